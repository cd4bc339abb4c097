#pragma once
// Contracts the attention modules share in their tests: gradients by finite differences and the
// random-feature modules' draws (Performer, FLT, SchoenbAt).

#include <gtest/gtest.h>
#include <torch/serialize.h>
#include <torch/types.h>

#include <string>
#include <vector>

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

/// q, k of `scale` (B 2, H 2, L 12, D `dim`, float): the forward and the gradients of q, k, v and
/// of every parameter are finite, and the materialised matrix and causal streaming (append, read)
/// agree with the forward (they share its normaliser floor). `label` names the case in failures.
template <typename Module>
void expect_finite_and_consistent_at_scale(Module module, int64_t dim, double scale, bool causal,
                                           const std::string& label) {
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
  EXPECT_TRUE(all_close(torch::matmul(module->materialize(q, k, call), v), out, 1e-5, 1e-6))
      << label;
  if (!causal) return;
  flt::attention::LinearAttentionState state;
  std::vector<torch::Tensor> outs;
  for (int64_t t = 0; t < 12; ++t) {
    module->append(state, k.narrow(2, t, 1), v.narrow(2, t, 1));
    outs.push_back(module->read(state, q.narrow(2, t, 1)));
  }
  EXPECT_TRUE(all_close(torch::cat(outs, 2), out, 1e-5, 1e-6)) << label;
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

}  // namespace flt::testing
