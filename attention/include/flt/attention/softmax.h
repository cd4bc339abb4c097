#pragma once
// Exact softmax attention: the reference every approximation is measured against.

#include <torch/arg.h>

#include "flt/attention/attention.h"

namespace flt::attention {

/// Attention weights softmax(q k^T * scale + bias + causal mask). `scale` >= 0 and finite; 0 means
/// 1 / sqrt(D). `bias`, an additive logit mask (e.g. FLT's exact RPE mask), may be undefined.
/// q: (B, H, Lq, D)  k: (B, H, Lk, D)  bias: broadcastable to (B, H, Lq, Lk) -> (B, H, Lq, Lk)
torch::Tensor softmax_attention_weights(const torch::Tensor& q, const torch::Tensor& k,
                                        bool causal = false, double scale = 0.0,
                                        const torch::Tensor& bias = {});

/// softmax(q k^T * scale + causal mask) v, scale as above.
/// q: (B, H, Lq, D)  k: (B, H, Lk, D)  v: (B, H, Lk, Dv) -> (B, H, Lq, Dv)
torch::Tensor softmax_attention(const torch::Tensor& q, const torch::Tensor& k,
                                const torch::Tensor& v, bool causal = false, double scale = 0.0);

struct SoftmaxAttentionOptions {
  static constexpr const char* kName = "softmax";
  /// Logit scale; 0 (default) means 1 / sqrt(D).
  TORCH_ARG(double, scale) = 0.0;
  /// forward() through at::scaled_dot_product_attention where LibTorch has it (2.x): O(L) memory,
  /// flash or memory-efficient kernels on CUDA, for long sequences. A NaN in one value then may
  /// reach rows that do not attend to it (the fused kernels multiply masked weights by it), which
  /// the default path never does. LibTorch 1.x has no such function: the default path runs.
  TORCH_ARG(bool, fused) = false;
  /// Heads H and head dim D; 0 means "set by the container" (attention.h; unused by the math).
  FLT_ATTENTION_DIMS_OPTIONS;
};

class SoftmaxAttentionImpl : public AttentionModule<SoftmaxAttentionImpl, SoftmaxAttentionOptions> {
  FLT_ATTENTION_MODULE_MEMBERS(SoftmaxAttentionImpl, SoftmaxAttentionOptions);
};
TORCH_MODULE(SoftmaxAttention);

}  // namespace flt::attention
