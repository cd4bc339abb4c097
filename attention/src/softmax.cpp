#include "flt/attention/softmax.h"

#include <ATen/ATen.h>
#include <torch/version.h>

#include <cmath>
#include <limits>

#include "flt/kernels/causal_matmul.h"

namespace flt::attention {

namespace {

void check_scale(const char* fn, double scale) {
  TORCH_CHECK(scale >= 0.0 && std::isfinite(scale), fn,
              ": scale must be >= 0 and finite (0 means 1/sqrt(D)), got ", scale);
}

double logit_scale(double scale, const torch::Tensor& q) {
  return scale > 0.0 ? scale : 1.0 / std::sqrt(static_cast<double>(q.size(3)));
}

// (L, L): true above the diagonal, the keys a causal query does not see.
torch::Tensor future_mask(const torch::Tensor& q) {
  return at::ones({q.size(2), q.size(2)}, q.options().dtype(at::kBool)).triu(1);
}

// Causal softmax(q k^T s + bias), 0 above the diagonal except in a row that depends on a NaN, which
// is NaN throughout. The scores above the diagonal are neither formed from q, k nor differentiated
// (causal_matmul.h), so a NaN in q_i or k_j reaches only the rows that see it. s scales q, an
// (L, D) product where s (q k^T) was an (L, L) one in the forward and in the backward.
torch::Tensor causal_softmax(const torch::Tensor& q, const torch::Tensor& k, double s,
                             const torch::Tensor& bias) {
  const double minus_inf = -std::numeric_limits<double>::infinity();
  auto logits = kernels::causal_scores(q * s, k, minus_inf);
  if (bias.defined()) logits = (logits + bias).masked_fill(future_mask(q), minus_inf);
  return at::softmax(logits, -1);
}

}  // namespace

torch::Tensor softmax_attention_weights(const torch::Tensor& q, const torch::Tensor& k, bool causal,
                                        double scale, const torch::Tensor& bias) {
  check_qkv("softmax_attention", q, k, {}, causal);
  check_scale("softmax_attention", scale);
  const double s = logit_scale(scale, q);
  if (causal) {
    // A row that saw a NaN is NaN throughout; its weights above the diagonal are set back to 0.
    return causal_softmax(q, k, s, bias).masked_fill(future_mask(q), 0.0);
  }
  auto logits = at::matmul(q, k.transpose(-2, -1)) * s;
  if (bias.defined()) logits = logits + bias;
  return at::softmax(logits, -1);
}

torch::Tensor softmax_attention(const torch::Tensor& q, const torch::Tensor& k,
                                const torch::Tensor& v, bool causal, double scale) {
  check_qkv("softmax_attention", q, k, v, causal);
  if (!causal) return at::matmul(softmax_attention_weights(q, k, false, scale), v);
  check_scale("softmax_attention", scale);
  // Row i reads v_j for j <= i only: a NaN in v_j stays out of the rows before j, and a row that
  // saw a NaN in q or k stays out of the gradients of the values it does not read.
  return kernels::causal_matmul(causal_softmax(q, k, logit_scale(scale, q), {}), v);
}

SoftmaxAttentionImpl::SoftmaxAttentionImpl(SoftmaxAttentionOptions options_)
    : AttentionModule(std::move(options_)) {
  reset();
}

void SoftmaxAttentionImpl::reset() {
  check_dims_options("SoftmaxAttention", options.heads(), options.head_dim(), false, false);
  check_scale("SoftmaxAttention", options.scale());
}

void SoftmaxAttentionImpl::pretty_print(std::ostream& stream) const {
  stream << "flt::attention::SoftmaxAttention(scale=";
  if (options.scale() > 0.0) {
    stream << options.scale();
  } else {
    stream << "1/sqrt(D)";
  }
  if (options.fused()) stream << ", fused=true";
  stream << ")";
}

torch::Tensor SoftmaxAttentionImpl::forward(const torch::Tensor& q, const torch::Tensor& k,
                                            const torch::Tensor& v, const AttentionCall& call) {
  check_call("SoftmaxAttention", q, k, v, call.causal);
#if TORCH_VERSION_MAJOR >= 2
  if (options.fused()) {
    return at::scaled_dot_product_attention(q, k, v, {}, 0.0, call.causal,
                                            logit_scale(options.scale(), q));
  }
#endif
  return softmax_attention(q, k, v, call.causal, options.scale());
}

torch::Tensor SoftmaxAttentionImpl::materialize(const torch::Tensor& q, const torch::Tensor& k,
                                                const AttentionCall& call) {
  check_call("SoftmaxAttention::materialize", q, k, {}, call.causal);
  return softmax_attention_weights(q, k, call.causal, options.scale());
}

}  // namespace flt::attention
