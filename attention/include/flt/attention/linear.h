#pragma once
// Linear attention (Katharopoulos et al. 2020) with the elu(x) + 1 feature map.

#include <torch/arg.h>

#include "flt/attention/attention.h"

namespace flt::attention {

/// Default floor of the normaliser of linear attention (options and functional form).
constexpr double kLinearAttentionEps = 1e-6;

/// elu(x) + 1, the positive feature map of linear attention. x: (...) -> (...)
torch::Tensor elu_feature_map(const torch::Tensor& x);

/// out_i = phi(q_i)^T S / phi(q_i)^T z with S = sum_j phi(k_j) v_j^T, z = sum_j phi(k_j)
/// (prefix sums over j <= i when causal), phi = elu + 1.
/// q: (B, H, Lq, D)  k: (B, H, Lk, D)  v: (B, H, Lk, Dv) -> (B, H, Lq, Dv)
torch::Tensor linear_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, bool causal = false,
                               double eps = kLinearAttentionEps);

struct LinearAttentionOptions {
  static constexpr const char* kName = "linear";
  /// Floor of the normaliser phi(q_i)^T z (it is positive; the floor only guards underflow).
  TORCH_ARG(double, eps) = kLinearAttentionEps;
  /// Heads H and head dim D; 0 means "set by the container" (attention.h; unused by the math).
  FLT_ATTENTION_DIMS_OPTIONS;
};

class LinearAttentionImpl : public AttentionModule<LinearAttentionImpl, LinearAttentionOptions> {
  FLT_ATTENTION_MODULE_MEMBERS(LinearAttentionImpl, LinearAttentionOptions);
};
TORCH_MODULE(LinearAttention);

/// The attention matrix implied by feature maps, whose product with v is
/// kernels::normalized_linear_attention with the same floor:
/// A_ij = phi_q_i . phi_k_j / max(sum_j' phi_q_i . phi_k_j', floor_i) (j, j' <= i when causal).
/// Shared by every feature-map variant's `materialize`.
/// phi_q: (B, H, Lq, M)  phi_k: (B, H, Lk, M)  floor: broadcastable to (B, H, Lq, 1)
/// -> (B, H, Lq, Lk)
torch::Tensor feature_attention_matrix(const torch::Tensor& phi_q, const torch::Tensor& phi_k,
                                       bool causal, const torch::Tensor& floor);
/// The same with one floor `eps` for every query.
torch::Tensor feature_attention_matrix(const torch::Tensor& phi_q, const torch::Tensor& phi_k,
                                       bool causal, double eps = kLinearAttentionEps);

}  // namespace flt::attention
