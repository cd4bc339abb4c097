#include "flt/attention/softmax.h"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>

namespace flt::attention {

namespace {

void check_scale(const char* fn, double scale) {
  TORCH_CHECK(scale >= 0.0 && std::isfinite(scale), fn,
              ": scale must be >= 0 and finite (0 means 1/sqrt(D)), got ", scale);
}

}  // namespace

torch::Tensor softmax_attention_weights(const torch::Tensor& q, const torch::Tensor& k, bool causal,
                                        double scale, const torch::Tensor& bias) {
  check_qkv("softmax_attention", q, k, {}, causal);
  check_scale("softmax_attention", scale);
  const double s = scale > 0.0 ? scale : 1.0 / std::sqrt(static_cast<double>(q.size(3)));
  auto logits = at::matmul(q, k.transpose(-2, -1)) * s;
  if (bias.defined()) logits = logits + bias;
  if (causal) {
    const int64_t length = q.size(2);
    const auto future = at::ones({length, length}, q.options().dtype(at::kBool)).triu(1);
    logits = logits.masked_fill(future, -std::numeric_limits<double>::infinity());
  }
  return at::softmax(logits, -1);
}

torch::Tensor softmax_attention(const torch::Tensor& q, const torch::Tensor& k,
                                const torch::Tensor& v, bool causal, double scale) {
  check_qkv("softmax_attention", q, k, v, causal);
  return at::matmul(softmax_attention_weights(q, k, causal, scale), v);
}

SoftmaxAttentionImpl::SoftmaxAttentionImpl(SoftmaxAttentionOptions options_)
    : options(std::move(options_)) {
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
  stream << ")";
}

torch::Tensor SoftmaxAttentionImpl::forward(const torch::Tensor& q, const torch::Tensor& k,
                                            const torch::Tensor& v, const AttentionCall& call) {
  check_call("SoftmaxAttention", q, k, v, call.causal);
  return softmax_attention(q, k, v, call.causal, options.scale());
}

torch::Tensor SoftmaxAttentionImpl::materialize(const torch::Tensor& q, const torch::Tensor& k,
                                                const AttentionCall& call) {
  check_call("SoftmaxAttention::materialize", q, k, {}, call.causal);
  return softmax_attention_weights(q, k, call.causal, options.scale());
}

}  // namespace flt::attention
