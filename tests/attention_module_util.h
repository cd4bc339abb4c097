#pragma once
// Contracts the attention modules share in their tests: gradients by finite differences and the
// random-feature modules' draws (Performer, FLT, SchoenbAt).

#include <gtest/gtest.h>
#include <torch/autograd.h>
#include <torch/serialize.h>
#include <torch/types.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "favor_composite_guard.h"  // attention/src: internal
#include "flt/attention/attention.h"
#include "flt/attention/feature_map.h"
#include "test_util.h"

namespace flt::testing {

/// Autograd against central differences for attention (a module or any callable
/// `attend(q, k, v, call)`, in double) with respect to q, k (`qk_shape`, (B, H, L, D)), v (width
/// `dv`) and `parameters`.
template <typename Attend>
void expect_attention_gradients(Attend attend, std::vector<int64_t> qk_shape, int64_t dv,
                                bool causal, std::vector<torch::Tensor> parameters = {},
                                double step = 1e-6, double rtol = 1e-5, double atol = 1e-7) {
  auto q = torch::randn(qk_shape, torch::kDouble).requires_grad_();
  auto k = torch::randn(qk_shape, torch::kDouble).requires_grad_();
  qk_shape.back() = dv;
  auto v = torch::randn(qk_shape, torch::kDouble).requires_grad_();
  flt::attention::AttentionCall call;
  call.causal = causal;
  std::vector<torch::Tensor> inputs = {q, k, v};
  inputs.insert(inputs.end(), parameters.begin(), parameters.end());
  expect_gradients_match(
      [&](const std::vector<torch::Tensor>& x) { return attend(x[0], x[1], x[2], call); }, inputs,
      step, rtol, atol);
}

/// How far apart two float evaluations of the same softmax-kernel attention (Performer, FLT: a
/// FAVOR+ feature map) may land because they round differently, entry by entry of the output
/// (B, H, L, Dv): the whole causal forward against token-by-token streaming, or against the
/// materialised matrix times v, and either of them under another BLAS kernel (OpenBLAS picks its
/// GEMM blocking and summation order by CPU or OPENBLAS_CORETYPE, and one row is not multiplied as
/// twelve are). A bound, derived as follows; u is the unit roundoff of q's dtype (2^-24 for float)
/// and gamma_n = n u / (1 - n u) bounds the relative error of a sum or dot product of n terms
/// against the sum of their magnitudes (Higham, Accuracy and Stability, 3.1).
///  1. Logits P_rj = sum_d W_rd s_d x_jd over the map's Din input columns (s = D^{-1/4} on q, k;
///     FLT adds its position block's share: one more addition): |dP| <= gamma_{Din+2} S with
///     S = max_rj sum_d |W_rd s_d x_jd|. At scale 100 S is ~10^3, so |dP| ~ 10^-3 absolute: the
///     error of a feature comes from the size of its logit, not of the feature.
///  2. A feature is exp(P_rj - shift_j - log root): a query's shift is its top logit (another P:
///     2 |dP|), a key's shift is formed in double from |k|^2/2 and the first key and rounded once
///     to float (the same in two float evaluations; against a double reference it adds
///     u (max |x|^2 + S), a bound on |shift|). Each of the two subtractions rounds at u times its
///     result, at most 104 + 70 + log 2m in magnitude for any feature exp does not flush to zero
///     (float's exp underflows below -103.3, a key's exponent is capped at 70); exp adds u. A
///     weight a_ij = sum_r phi_r(q_i) phi_r(k_j) sums M >= 0 terms, so its relative error is
///     e <= exp(3 gamma_{Din+2} S + 4 u Lambda + 2u) (1 + gamma_M) - 1 (Lambda that range).
///  3. out_i = sum_j a_ij v_j / sum_j a_ij. Relative errors e_j of the weights move it by
///     sum_j w_ij e_j (v_j - out_i) / (1 + sum_j w_ij e_j) (w the normalised weights, i.e. the
///     materialised matrix), so by at most e / (1 - e) sum_j w_ij |v_j - out_i|; the sums
///     over j and r (signed numerator, positive denominator) and the division add
///     (gamma_{L+M} + u)(sum_j w_ij |v_j| + |out_i|).
///     (convex_combination_error_bound, test_util.h, which also covers rows whose normaliser is
///     the floor eps max(1, ...) of favor_floor: eps = 1e-30 by default).
///  4. Underflow: features below float's normal range round in absolute steps of 1.4e-45; the
///     L M products and L + M sums so rounded move the output by at most
///     (L M + L + M) 1.4e-45 (max |v| + max |out|) / eps, about 1e-12.
/// Each evaluation is within that of the exact result, so two differ by at most twice it
/// (`evaluations` 2; 1 against a double reference). Measured: the worst difference uses 1.7% of
/// the bound (any OPENBLAS_CORETYPE, 1 or 2 threads), and a streamed output off by 1e-4 relative
/// already fails (9x to 14x its bound). The spread sum_j w_ij |v_j - out_i| is what makes the bound
/// tight where attention concentrates (at scale 1e4 each query picks one key and any rounding of
/// the weights leaves the output alone). `leading_bound` bounds the entries of the map's input
/// columns before q, k (FLT's position features; 0 when q, k are the whole input).
template <typename Module>
torch::Tensor float_rounding_bound(Module module, const torch::Tensor& q, const torch::Tensor& k,
                                   const torch::Tensor& v, const torch::Tensor& out,
                                   const flt::attention::AttentionCall& call, double leading_bound,
                                   int evaluations = 2) {
  torch::NoGradGuard no_grad;
  const double u = unit_roundoff(q.scalar_type());
  const torch::Tensor w = module->feature_map->projection.to(torch::kDouble).abs();  // (m, Din)
  const int64_t dim = q.size(-1), inputs = w.size(1);
  const double features = static_cast<double>(module->feature_map->output_dim());
  // S: sum_d |W_rd s_d x_jd| over the q, k columns (the last D) for every token of q and k, plus
  // the leading columns' share.
  const auto qk_columns =
      w.narrow(1, inputs - dim, dim) * std::pow(static_cast<double>(dim), -0.25);
  const auto x = torch::cat({q, k}, -2).detach().to(torch::kDouble).abs();
  double terms = torch::matmul(x, qk_columns.t()).max().item<double>();
  if (inputs > dim)
    terms += w.narrow(1, 0, inputs - dim).sum(1).max().item<double>() * leading_bound;
  // Lambda: the largest |log feature| of a feature that exp does not flush to zero.
  const double range =
      -std::log(q.scalar_type() == torch::kDouble ? std::numeric_limits<double>::denorm_min()
                                                  : std::numeric_limits<float>::denorm_min()) +
      70.0 + std::log(2.0 * features);
  double log_error =
      3.0 * rounding_gamma(static_cast<double>(inputs + 2), u) * terms + 4.0 * u * range + 2.0 * u;
  if (evaluations == 1) {  // the keys' shift rounded to float, against a double reference
    const double norms =
        x.pow(2).sum(-1).max().item<double>() / std::sqrt(static_cast<double>(dim)) +
        static_cast<double>(inputs - dim) * leading_bound * leading_bound;
    log_error += u * (norms + terms);
  }
  const double gamma_m = rounding_gamma(features, u);
  const double weight_error = std::expm1(log_error) * (1.0 + gamma_m) + gamma_m;
  TORCH_CHECK(weight_error < 1.0, "float_rounding_bound: weights may be off by ", weight_error,
              ": no bound at this scale");
  const torch::Tensor weights = module->materialize(q, k, call);
  // Underflow: each of the L M feature products and the L + M sums may be off by float's
  // smallest step (absolute, not relative), divided by a normaliser of at least eps (favor_floor).
  const double length = static_cast<double>(k.size(-2));
  const double smallest = q.scalar_type() == torch::kDouble
                              ? std::numeric_limits<double>::denorm_min()
                              : std::numeric_limits<float>::denorm_min();
  const double underflow = (length * features + length + features) * smallest *
                           (v.abs().max().item<double>() + out.abs().max().item<double>()) /
                           module->options.eps();
  return evaluations * convex_combination_error_bound(weights, v, out, weight_error,
                                                      length + features, u, underflow);
}

/// q, k of `scale` (B 2, H 2, L 12, D `dim`, float): the forward and the gradients of q, k, v and
/// of every parameter are finite, and the materialised matrix and causal streaming (append, read)
/// agree with the forward (they share its normaliser floor) within float_rounding_bound (the
/// module's `leading_bound` passed on). `label` names the case in failures.
template <typename Module>
void expect_finite_and_consistent_at_scale(Module module, int64_t dim, double scale, bool causal,
                                           const std::string& label, double leading_bound = 0.0) {
  module->zero_grad();
  const auto q = (torch::randn({2, 2, 12, dim}) * scale).requires_grad_();
  const auto k = (torch::randn({2, 2, 12, dim}) * scale).requires_grad_();
  const auto v = torch::randn({2, 2, 12, 3}).requires_grad_();
  flt::attention::AttentionCall call;
  call.causal = causal;
  const torch::Tensor out = module(q, k, v, call);
  EXPECT_TRUE(out.isfinite().all().item<bool>()) << label;
  (out * torch::randn_like(out)).sum().backward();
  for (const torch::Tensor& t : {q, k, v})
    EXPECT_TRUE(t.grad().isfinite().all().item<bool>()) << label;
  for (const auto& p : module->named_parameters()) {
    const torch::Tensor grad = p.value().grad();
    EXPECT_TRUE(grad.isfinite().all().item<bool>()) << label << " " << p.key();
  }
  torch::NoGradGuard no_grad;
  const auto bound = float_rounding_bound(module, q, k, v, out, call, leading_bound);
  EXPECT_TRUE(all_within(torch::matmul(module->materialize(q, k, call), v), out, bound)) << label;
  if (!causal) return;
  flt::attention::LinearAttentionState state;
  std::vector<torch::Tensor> outs;
  for (int64_t t = 0; t < 12; ++t) {
    module->append(state, k.narrow(2, t, 1), v.narrow(2, t, 1));
    outs.push_back(module->read(state, q.narrow(2, t, 1)));
  }
  EXPECT_TRUE(all_within(torch::cat(outs, 2), out, bound)) << label;
}

/// The forward without autograd (the blocked path of favor_attention when (B, H, L) spans several
/// blocks) against the autograd one-pass path (FavorCompositeGuard), causal and not, in double, up
/// to rounding. The keys of the last third are doubled so that later blocks hold the larger logits
/// (the running sums' rescaling is exercised). `label` names the case in failures.
template <typename Module>
void expect_blocked_equals_one_pass(Module module, int64_t batch, int64_t heads, int64_t length,
                                    int64_t dim, const std::string& label) {
  const auto q = torch::randn({batch, heads, length, dim}, torch::kDouble);
  auto k = torch::randn({batch, heads, length, dim}, torch::kDouble);
  k.narrow(2, 2 * length / 3, length - 2 * length / 3).mul_(2.0);
  const auto v = torch::randn({batch, heads, length, 5}, torch::kDouble);
  for (bool causal : {false, true}) {
    flt::attention::AttentionCall call;
    call.causal = causal;
    torch::Tensor blocked;
    {
      torch::NoGradGuard no_grad;
      blocked = module(q, k, v, call);
    }
    torch::Tensor one_pass;
    {
      flt::attention::FavorCompositeGuard composite;
      one_pass = module(q.clone().requires_grad_(), k, v, call).detach();
    }
    const torch::Tensor difference = (blocked - one_pass).abs().max();
    EXPECT_TRUE(all_close(blocked, one_pass, 1e-12, 1e-14))
        << label << (causal ? " causal" : "") << " max diff " << difference.item<double>();
  }
}

/// The output and the gradients of attention (a module: q, k, v and every parameter that gets
/// one) under one upstream gradient: `module(q, k, v, call)` with fresh leaves of q, k, v; the
/// name of the output's autograd node goes to `path`.
/// -> {out, dq, dk, dv, parameters' gradients in named_parameters order (undefined if none)}
template <typename Module>
std::vector<torch::Tensor> attention_output_and_gradients(
    Module module, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
    const torch::Tensor& upstream, const flt::attention::AttentionCall& call, std::string& path) {
  module->zero_grad();
  const auto qg = q.detach().clone().requires_grad_(), kg = k.detach().clone().requires_grad_(),
             vg = v.detach().clone().requires_grad_();
  const torch::Tensor out = module(qg, kg, vg, call);
  (out * upstream).sum().backward();
  const auto node = out.grad_fn();
  path = node ? node->name() : "";
  std::vector<torch::Tensor> result = {out.detach(), qg.grad(), kg.grad(), vg.grad()};
  for (const auto& p : module->named_parameters()) {
    const torch::Tensor grad = p.value().grad();
    result.push_back(grad.defined() ? grad.clone() : grad);
  }
  module->zero_grad();
  return result;
}

/// Two tensors with NaN in the same entries, equal elsewhere within rtol and atol.
inline ::testing::AssertionResult nan_and_close(const torch::Tensor& a, const torch::Tensor& b,
                                                double rtol, double atol) {
  if (a.defined() != b.defined()) return ::testing::AssertionFailure() << "one is undefined";
  if (!a.defined()) return ::testing::AssertionSuccess();
  if (a.sizes() != b.sizes())
    return ::testing::AssertionFailure() << "shapes differ: " << a.sizes() << " vs " << b.sizes();
  const auto nan = a.isnan();
  if (!torch::equal(nan, b.isnan()))
    return ::testing::AssertionFailure()
           << "NaN in different entries: " << nan.sum().item<int64_t>() << " vs "
           << b.isnan().sum().item<int64_t>();
  return all_close(a.masked_fill(nan, 0.0), b.masked_fill(nan, 0.0), rtol, atol);
}

/// The fused backward of favor_attention (non-causal CPU calls with autograd: features recomputed
/// block by block) against the composite path (FavorCompositeGuard: the features of the whole
/// sequence, autograd's backward): the output and the gradients of q, k, v and every parameter
/// under one random upstream gradient, NaN in the same entries and equal elsewhere within rtol and
/// atol. The output's autograd node must be the fused function's unless `fused_path` is false (a
/// case the fused function leaves to the composite path). `label` names the case in failures.
template <typename Module>
void expect_fused_backward_equals_composite(Module module, const torch::Tensor& q,
                                            const torch::Tensor& k, const torch::Tensor& v,
                                            const flt::attention::AttentionCall& call,
                                            const std::string& label, bool fused_path = true,
                                            double rtol = 1e-10, double atol = 1e-12) {
  const auto upstream = torch::randn({v.size(0), v.size(1), q.size(2), v.size(3)}, v.options());
  std::string path, composite_path;
  const auto fused = attention_output_and_gradients(module, q, k, v, upstream, call, path);
  std::vector<torch::Tensor> composite;
  {
    flt::attention::FavorCompositeGuard guard;
    composite = attention_output_and_gradients(module, q, k, v, upstream, call, composite_path);
  }
  EXPECT_EQ(path.find("FavorFunction") != std::string::npos, fused_path) << label << ": " << path;
  EXPECT_EQ(composite_path.find("FavorFunction"), std::string::npos) << label;
  std::vector<std::string> names = {"output", "dq", "dk", "dv"};
  for (const auto& p : module->named_parameters()) names.push_back("d " + p.key());
  for (size_t i = 0; i < names.size(); ++i)
    EXPECT_TRUE(nan_and_close(fused[i], composite[i], rtol, atol)) << label << ": " << names[i];
}

/// Central differences of sum(out * upstream) along one random direction per input (q, k, v and
/// each parameter of the module that gets a gradient) against autograd's directional derivative
/// <grad, direction>, in double: a gradient check for sizes too large for
/// `expect_gradients_match`'s coordinate by coordinate differences (several blocks of
/// favor_attention). `label` names the case in failures.
template <typename Module>
void expect_directional_derivatives(Module module, const torch::Tensor& q, const torch::Tensor& k,
                                    const torch::Tensor& v,
                                    const flt::attention::AttentionCall& call,
                                    const std::string& label, double step = 1e-6,
                                    double rtol = 1e-6) {
  const auto upstream = torch::randn({v.size(0), v.size(1), q.size(2), v.size(3)}, v.options());
  std::string path;
  const auto grads = attention_output_and_gradients(module, q, k, v, upstream, call, path);
  std::vector<torch::Tensor> inputs = {q, k, v};
  std::vector<std::string> names = {"q", "k", "v"};
  for (const auto& p : module->named_parameters()) {
    inputs.push_back(p.value());
    names.push_back(p.key());
  }
  const auto loss = [&](const std::vector<torch::Tensor>& x) {
    torch::NoGradGuard no_grad;
    const torch::Tensor out = module(x[0], x[1], x[2], call);
    return (out * upstream).sum().item<double>();
  };
  for (size_t i = 0; i < inputs.size(); ++i) {
    const torch::Tensor grad = grads[i + 1];
    if (!grad.defined()) continue;
    const auto direction = torch::randn_like(inputs[i]);
    const double analytic = (grad * direction).sum().item<double>();
    auto shifted = [&](double sign) {
      torch::NoGradGuard no_grad;
      if (i < 3) {
        auto x = std::vector<torch::Tensor>{q, k, v};
        x[i] = inputs[i] + sign * step * direction;
        return loss(x);
      }
      const auto saved = inputs[i].clone();
      inputs[i].add_(sign * step * direction);
      const double value = loss({q, k, v});
      inputs[i].copy_(saved);
      return value;
    };
    const double numeric = (shifted(1.0) - shifted(-1.0)) / (2.0 * step);
    EXPECT_NEAR(analytic, numeric, rtol * std::max(1.0, std::abs(analytic)))
        << label << ": d/d " << names[i];
  }
}

/// Forwards repeat until redraw(seed); a new seed changes the output; save/load carries the draw
/// into `other` (a module of the same shape made with another seed). Returns the first output.
template <typename Module>
torch::Tensor expect_redraw_only_on_request(Module module, Module other, const torch::Tensor& q,
                                            const torch::Tensor& v, const std::string& file) {
  const auto first = module(q, q, v);
  EXPECT_TRUE(torch::equal(first, module(q, q, v)));  // no silent redraw
  module->redraw(99);
  const auto second = module(q, q, v);
  EXPECT_FALSE(torch::equal(first, second));
  const std::string path = temp_path(file);
  torch::save(module, path);
  torch::load(other, path);
  EXPECT_TRUE(torch::equal(other(q, q, v), second));  // the draw is in the saved buffers
  return first;
}

/// Appending tokens one at a time and reading after each append (a streaming module: Performer,
/// FLT) equals causal attention over the whole sequence to 1e-10.
template <typename Module>
void expect_streaming_equals_causal_batch(Module module, const torch::Tensor& q,
                                          const torch::Tensor& k, const torch::Tensor& v,
                                          const std::string& label) {
  flt::attention::AttentionCall call;
  call.causal = true;
  const auto batch = module(q, k, v, call);
  flt::attention::LinearAttentionState state;
  std::vector<torch::Tensor> outs;
  for (int64_t t = 0; t < k.size(2); ++t) {
    module->append(state, k.narrow(2, t, 1), v.narrow(2, t, 1));
    outs.push_back(module->read(state, q.narrow(2, t, 1)));
  }
  EXPECT_EQ(state.steps, k.size(2)) << label;
  EXPECT_TRUE(all_close(torch::cat(outs, 2), batch, 1e-10, 1e-10)) << label;
}

/// A streaming module's (Performer's, FLT's) calls that do not fit `state` (tokens of batch B,
/// heads H, key width D, value width Dv already appended) throw naming the call (`name`, e.g.
/// "FLTAttention"), the bad shape or dtype and the state's shape, and leave the state as it was:
/// another batch, another value width and float inputs to append; another batch, a missing
/// dimension and float queries to read.
template <typename Module>
void expect_streaming_mismatches_named(Module module, flt::attention::LinearAttentionState& state,
                                       const std::string& name, int64_t B, int64_t H, int64_t D,
                                       int64_t Dv) {
  const auto opts = torch::TensorOptions().dtype(torch::kDouble);
  const auto shape = [](const torch::Tensor& t) {
    std::ostringstream text;
    text << t.sizes();
    return text.str();
  };
  const std::string held = shape(state.numerator), append = name + "::append",
                    read = name + "::read";
  const int64_t steps = state.steps;
  const auto other_batch_k = torch::randn({B + 1, H, 1, D}, opts);
  expect_error(
      [&] {
        module->append(state, other_batch_k, torch::randn({B + 1, H, 1, Dv}, opts));
      },
      {append, shape(other_batch_k), held});
  const auto wide_v = torch::randn({B, H, 1, Dv + 2}, opts);
  expect_error(
      [&] {
        module->append(state, torch::randn({B, H, 1, D}, opts), wide_v);
      },
      {append, shape(wide_v), held});
  expect_error(
      [&] {
        module->append(state, torch::randn({B, H, 1, D}), torch::randn({B, H, 1, Dv}));
      },
      {append, "Float", "Double"});
  const auto other_batch_q = torch::randn({B + 1, H, 1, D}, opts);
  expect_error([&] { module->read(state, other_batch_q); }, {read, shape(other_batch_q), held});
  const auto flat_q = torch::randn({B, H, D}, opts);
  expect_error([&] { module->read(state, flat_q); }, {read, shape(flat_q)});
  expect_error([&] { module->read(state, torch::randn({B, H, 1, D})); }, {read, "Float", "Double"});
  EXPECT_EQ(state.steps, steps);
  EXPECT_EQ(module->read(state, torch::randn({B, H, 1, D}, opts)).sizes(),
            torch::IntArrayRef({B, H, 1, Dv}));
}

}  // namespace flt::testing
