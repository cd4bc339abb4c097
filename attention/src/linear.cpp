#include "flt/attention/linear.h"

#include <ATen/ATen.h>

#include <cmath>

#include "flt/kernels/linear_attention.h"

namespace flt::attention {

torch::Tensor elu_feature_map(const torch::Tensor& x) {
  return at::elu(x) + 1.0;
}

torch::Tensor linear_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, bool causal, double eps) {
  check_qkv("linear_attention", q, k, v, causal);
  check_positive_finite("linear_attention", "eps", eps);
  return kernels::normalized_linear_attention(elu_feature_map(q), elu_feature_map(k), v, causal,
                                              eps);
}

torch::Tensor feature_attention_matrix(const torch::Tensor& phi_q, const torch::Tensor& phi_k,
                                       bool causal, const torch::Tensor& floor) {
  auto scores = at::matmul(phi_q, phi_k.transpose(-2, -1));
  if (causal) scores = scores.tril();
  const auto weights =
      scores / at::maximum(scores.sum(-1, /*keepdim=*/true), floor.to(scores.scalar_type()));
  // Causal: a row whose normaliser saw a NaN keeps its zeros above the diagonal (0 / NaN is NaN).
  return causal ? weights.tril() : weights;
}

torch::Tensor feature_attention_matrix(const torch::Tensor& phi_q, const torch::Tensor& phi_k,
                                       bool causal, double eps) {
  return feature_attention_matrix(phi_q, phi_k, causal, at::scalar_tensor(eps, phi_q.options()));
}

LinearAttentionImpl::LinearAttentionImpl(LinearAttentionOptions options_)
    : AttentionModule(std::move(options_)) {
  reset();
}

void LinearAttentionImpl::reset() {
  check_positive_finite("LinearAttention", "eps", options.eps());
  check_dims_options("LinearAttention", options.heads(), options.head_dim(), false, false);
}

void LinearAttentionImpl::pretty_print(std::ostream& stream) const {
  stream << "flt::attention::LinearAttention(feature_map=elu+1, eps=" << options.eps() << ")";
}

torch::Tensor LinearAttentionImpl::forward(const torch::Tensor& q, const torch::Tensor& k,
                                           const torch::Tensor& v, const AttentionCall& call) {
  check_call("LinearAttention", q, k, v, call.causal);
  return linear_attention(q, k, v, call.causal, options.eps());
}

torch::Tensor LinearAttentionImpl::materialize(const torch::Tensor& q, const torch::Tensor& k,
                                               const AttentionCall& call) {
  check_call("LinearAttention::materialize", q, k, {}, call.causal);
  return feature_attention_matrix(elu_feature_map(q), elu_feature_map(k), call.causal,
                                  options.eps());
}

}  // namespace flt::attention
