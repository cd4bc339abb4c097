#pragma once
// Helpers shared by the test executables: seeded inputs, error-message checks, finite differences.

#include <gtest/gtest.h>
#include <torch/types.h>

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

/// max |a - b| / (atol + rtol |b|) <= 1, reported with the worst entry.
inline ::testing::AssertionResult all_close(const torch::Tensor& a, const torch::Tensor& b,
                                            double rtol, double atol) {
  if (a.sizes() != b.sizes()) {
    return ::testing::AssertionFailure() << "shapes differ: " << a.sizes() << " vs " << b.sizes();
  }
  const auto ad = a.to(torch::kDouble);
  const auto bd = b.to(torch::kDouble);
  if (!ad.isfinite().all().item<bool>())
    return ::testing::AssertionFailure() << "non-finite values";
  const auto ratio = (ad - bd).abs() / (atol + rtol * bd.abs());
  const double worst = ratio.max().item<double>();
  if (worst <= 1.0) return ::testing::AssertionSuccess();
  const int64_t at = ratio.argmax().item<int64_t>();
  return ::testing::AssertionFailure()
         << "max scaled error " << worst << " at flat index " << at << ": "
         << ad.flatten()[at].item<double>() << " vs " << bd.flatten()[at].item<double>()
         << " (rtol " << rtol << ", atol " << atol << ")";
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
