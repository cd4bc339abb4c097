#pragma once
// Helpers shared by the test executables: seeded inputs, error-message checks, finite differences.

#include <gtest/gtest.h>
#include <torch/types.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "flt/runtime.h"

namespace flt::testing {

/// Seeds LibTorch's global generator and sets the runtime up once per test.
class SeededTest : public ::testing::Test {
 protected:
  void SetUp() override {
    flt::init(/*quiet=*/true);
    torch::manual_seed(20241120);
  }
};

/// A path for a file `name` in GoogleTest's scratch folder.
inline std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "/" + name;
}

/// Runs `fn`, expects a c10::Error whose message contains every one of `parts`.
inline void expect_error(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
  } catch (const c10::Error& e) {
    const std::string message = e.what_without_backtrace();
    for (const auto& part : parts) {
      EXPECT_NE(message.find(part), std::string::npos)
          << "error message lacks \"" << part << "\": " << message;
    }
    return;
  }
  ADD_FAILURE() << "expected an error mentioning \"" << (parts.empty() ? "" : parts[0]) << "\"";
}

/// |a - b| <= bound entry by entry (`bound` broadcasts to a's shape), reported with the worst entry
/// as a fraction of its bound: for comparisons whose tolerance is derived entry by entry.
inline ::testing::AssertionResult all_within(const torch::Tensor& a, const torch::Tensor& b,
                                             const torch::Tensor& bound) {
  if (a.sizes() != b.sizes()) {
    return ::testing::AssertionFailure() << "shapes differ: " << a.sizes() << " vs " << b.sizes();
  }
  const auto ad = a.to(torch::kDouble);
  const auto bd = b.to(torch::kDouble);
  if (!ad.isfinite().all().item<bool>())
    return ::testing::AssertionFailure() << "non-finite values";
  if (!bound.isfinite().all().item<bool>())
    return ::testing::AssertionFailure() << "the bound is not finite: no bound at these values";
  const auto ratio = ((ad - bd).abs() / bound.to(torch::kDouble).expand_as(ad)).nan_to_num(0.0);
  const double worst = ratio.max().item<double>();
  if (worst <= 1.0) return ::testing::AssertionSuccess();
  const int64_t at = ratio.argmax().item<int64_t>();
  return ::testing::AssertionFailure()
         << "max error " << worst << " of its bound at flat index " << at << ": "
         << ad.flatten()[at].item<double>() << " vs " << bd.flatten()[at].item<double>()
         << " (bound " << bound.to(torch::kDouble).expand_as(ad).flatten()[at].item<double>()
         << ")";
}

/// |a - b| <= atol + rtol |b| entry by entry, reported with the worst entry.
inline ::testing::AssertionResult all_close(const torch::Tensor& a, const torch::Tensor& b,
                                            double rtol, double atol) {
  return all_within(a, b, atol + rtol * b.to(torch::kDouble).abs());
}

// ---- float error bounds (Higham, Accuracy and Stability of Numerical Algorithms, ch. 2-3) ----

/// The unit roundoff u of a floating dtype: 2^-24 float, 2^-53 double, 2^-11 half, 2^-8 bfloat16
/// (its 8-bit significand).
inline double unit_roundoff(torch::ScalarType dtype) {
  switch (dtype) {
    case torch::kDouble: return std::ldexp(1.0, -53);
    case torch::kHalf: return std::ldexp(1.0, -11);
    case torch::kBFloat16: return std::ldexp(1.0, -8);
    default: return std::ldexp(1.0, -24);
  }
}

/// gamma_n = n u / (1 - n u): a sum or dot product of n terms, in any order and with or without
/// FMA, is off by at most gamma_n times the sum of the terms' magnitudes.
inline double rounding_gamma(double n, double u) {
  return n * u / (1.0 - n * u);
}

/// A bound, entry by entry, on the rounding error of out_i = sum_j w_ij v_j, attention's weighted
/// average (w (..., Lq, Lk) the weights a_ij / F_i, v (..., Lk, Dv), out (..., Lq, Dv)), whose
/// weights a_ij each carry a relative error of at most e = `weight_error` and whose sums of at
/// most `terms` terms round at unit roundoff `u`. Where the normaliser F_i = sum_j a_ij (the row
/// sums to 1):
///   |d out_i| <= e / (1 - e) sum_j w_ij |v_j - out_i|
///                + (gamma_terms + u) (sum_j w_ij |v_j| + |out_i|),
/// since weights a_j (1 + e_j) give sum_j w_j e_j (v_j - out) / (1 + sum_j w_j e_j) exactly, and
/// the second term is the signed numerator's sum, the positive normaliser's and the division. The
/// spread sum_j w_ij |v_j - out_i| makes it tight where attention concentrates on one key. Where a
/// floor F_i > sum_j a_ij replaced the normaliser (the row sums to less than 1; the floor comes
/// from the same features, so it carries e too), e / (1 - e) (sum_j w_ij |v_j| + |out_i|) replaces
/// the first term. `absolute` is added everywhere (underflow: float rounds below 1.2e-38 in steps
/// of 1.4e-45, not relatively).
/// With an error bound per weight (`weight_error` (..., Lq, Lk) broadcasting with `weights`), the
/// first term is sum_j w_ij e_ij |v_j - out_i| / (1 - sum_j w_ij e_ij), and in floored rows
/// (sum_j w_ij e_ij |v_j| + e_i |out_i|) / (1 - e_i), e_i = max_j e_ij.
inline torch::Tensor convex_combination_error_bound(const torch::Tensor& weights,
                                                    const torch::Tensor& v,
                                                    const torch::Tensor& out,
                                                    const torch::Tensor& weight_error, double terms,
                                                    double u, double absolute = 0.0) {
  const auto w = weights.detach().to(torch::kDouble);
  const auto e = weight_error.to(torch::kDouble).expand_as(w);
  const auto we = w * e;
  const auto vd = v.detach().to(torch::kDouble), od = out.detach().to(torch::kDouble);
  std::vector<torch::Tensor> spread;  // channel by channel: no (..., Lq, Lk, Dv) temporary
  for (int64_t c = 0; c < vd.size(-1); ++c) {
    const auto vc = vd.select(-1, c).unsqueeze(-2), oc = od.select(-1, c).unsqueeze(-1);
    spread.push_back((we * (vc - oc).abs()).sum(-1));
  }
  const auto magnitude = torch::matmul(w.abs(), vd.abs()) + od.abs();
  // A normalised row sums to 1 up to its own rounding, gamma_terms.
  const auto floored = w.sum(-1, /*keepdim=*/true) < 1.0 - 2.0 * rounding_gamma(terms, u);
  const auto row_error = std::get<0>(e.max(-1, /*keepdim=*/true));
  const auto numerator = torch::where(floored, torch::matmul(we, vd.abs()) + row_error * od.abs(),
                                      torch::stack(spread, -1));
  const auto denominator =
      torch::where(floored, 1.0 - row_error, 1.0 - we.sum(-1, /*keepdim=*/true));
  // A denominator <= 0 (weights that may be off by 100%) leaves no bound: inf (all_within fails).
  const auto first = torch::where(denominator > 0, numerator / denominator,
                                  torch::full({}, INFINITY, torch::kDouble));
  return first + (rounding_gamma(terms, u) + u) * magnitude + absolute;
}

inline torch::Tensor convex_combination_error_bound(const torch::Tensor& weights,
                                                    const torch::Tensor& v,
                                                    const torch::Tensor& out, double weight_error,
                                                    double terms, double u, double absolute = 0.0) {
  return convex_combination_error_bound(
      weights, v, out, torch::full({}, weight_error, torch::kDouble), terms, u, absolute);
}

// ---- where a NaN may go in causal attention: output row i reads q_i and k_j, v_j for j <= i ----

/// Whether causal attention's output row `row` reads input `input` (0 q, 1 k, 2 v) at `position`.
inline bool causal_reads(int input, int64_t row, int64_t position) {
  return input == 0 ? position == row : position <= row;
}

/// Whether some output row of a causal attention over `length` tokens reads both input `a` at
/// `position_a` and input `b` at `position_b`: only then can a NaN at the one reach the gradient
/// of the other.
inline bool causal_rows_share(int a, int64_t position_a, int b, int64_t position_b,
                              int64_t length) {
  for (int64_t row = 0; row < length; ++row) {
    if (causal_reads(a, row, position_a) && causal_reads(b, row, position_b)) return true;
  }
  return false;
}

/// After a backward pass through causal attention over `inputs` (q, k, v: (1, 1, L, .)) whose
/// input `which` held a NaN at position `bad`: the gradient of every input at every position that
/// shares no output row with the NaN is finite.
inline void expect_finite_gradients_apart_from(const std::vector<torch::Tensor>& inputs, int which,
                                               int64_t bad, const std::string& label) {
  const int64_t length = inputs[0].size(2);
  for (int input = 0; input < 3; ++input) {
    for (int64_t i = 0; i < length; ++i) {
      if (causal_rows_share(which, bad, input, i, length)) continue;
      EXPECT_TRUE(inputs[input].grad()[0][0][i].isfinite().all().item<bool>())
          << label << ": gradient of "
          << "qkv"[input] << " at " << i;
    }
  }
}

/// Checks autograd gradients of sum(fn(inputs) * w) for a fixed random w against central finite
/// differences on every input entry. Inputs must be double tensors with requires_grad set.
inline void expect_gradients_match(
    const std::function<torch::Tensor(const std::vector<torch::Tensor>&)>& fn,
    std::vector<torch::Tensor> inputs, double step = 1e-6, double rtol = 1e-5, double atol = 1e-7) {
  const auto probe = fn(inputs);
  const auto weights = torch::randn_like(probe).detach();
  (probe * weights).sum().backward();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto analytic = inputs[i].grad().clone();
    auto numeric = torch::zeros_like(analytic);
    auto flat = inputs[i].detach().view(-1);  // shares storage with the input
    auto numeric_flat = numeric.view(-1);
    torch::NoGradGuard no_grad;
    for (int64_t e = 0; e < flat.numel(); ++e) {
      const double original = flat[e].item<double>();
      flat[e] = original + step;
      const double plus = (fn(inputs) * weights).sum().item<double>();
      flat[e] = original - step;
      const double minus = (fn(inputs) * weights).sum().item<double>();
      flat[e] = original;
      numeric_flat[e] = (plus - minus) / (2 * step);
    }
    EXPECT_TRUE(all_close(analytic, numeric, rtol, atol)) << "gradient of input " << i;
  }
}

}  // namespace flt::testing
