#include "flt/attention/softmax.h"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>

namespace flt::attention {

torch::Tensor softmax_attention_weights(const torch::Tensor& q, const torch::Tensor& k, bool causal,
                                        double scale) {
  check_qkv("softmax_attention", q, k, {}, causal);
  TORCH_CHECK(std::isfinite(scale), "softmax_attention: scale must be finite, got ", scale);
  const double s = scale > 0.0 ? scale : 1.0 / std::sqrt(static_cast<double>(q.size(3)));
  auto logits = at::matmul(q, k.transpose(-2, -1)) * s;
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
  TORCH_CHECK(options.scale() >= 0.0 && std::isfinite(options.scale()),
              "SoftmaxAttention: scale must be >= 0 and finite (0 means 1/sqrt(D)), got ",
              options.scale());
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
  return softmax_attention(q, k, v, call.causal, options.scale());
}

torch::Tensor SoftmaxAttentionImpl::materialize(const torch::Tensor& q, const torch::Tensor& k,
                                                const AttentionCall& call) {
  return softmax_attention_weights(q, k, call.causal, options.scale());
}

}  // namespace flt::attention
