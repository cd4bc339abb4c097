#pragma once
// Performer attention (Choromanski et al. 2021): softmax attention estimated with FAVOR+ random
// features in O(L m D); non-causal, causal (prefix sums) and streaming (decoding state).

#include <torch/arg.h>

#include "flt/attention/attention.h"
#include "flt/attention/feature_map.h"

namespace flt::attention {

struct PerformerAttentionOptions {
  static constexpr const char* kName = "performer";
  /// Random features m (> 0).
  TORCH_ARG(int64_t, features) = 64;
  /// Feature map (default FAVOR+ positive; hyperbolic halves the variance at 2m columns).
  TORCH_ARG(FeatureKind, kind) = FeatureKind::kPositive;
  /// Orthogonal random features (default true).
  TORCH_ARG(bool, orthogonal) = true;
  /// Seed of the initial draw of the features.
  TORCH_ARG(uint64_t, seed) = 0;
  /// Heads H and head dim D; 0 means "set by the container" (attention.h). The features are sized
  /// by D, so a module used alone needs head_dim.
  FLT_ATTENTION_DIMS_OPTIONS;
  /// Floor of the normaliser, relative to the keys' feature mass (`favor_floor`); the shifted
  /// features keep the normaliser far above it unless it underflows.
  TORCH_ARG(double, eps) = kFavorEps;
};

/// Performer attention with the given feature map (whose input_dim is D); q and k are scaled by
/// D^{-1/4} so that phi(q).phi(k) estimates exp(q.k / sqrt(D)).
/// q: (B, H, Lq, D)  k: (B, H, Lk, D)  v: (B, H, Lk, Dv) -> (B, H, Lq, Dv)
torch::Tensor performer_attention(const torch::Tensor& q, const torch::Tensor& k,
                                  const torch::Tensor& v, const FeatureMapImpl& feature_map,
                                  bool causal = false, double eps = kFavorEps);

class PerformerAttentionImpl
    : public AttentionModule<PerformerAttentionImpl, PerformerAttentionOptions> {
  FLT_ATTENTION_MODULE_MEMBERS(PerformerAttentionImpl, PerformerAttentionOptions);

  /// Draws the random features again (the only way they change).
  void redraw(uint64_t seed) { feature_map->redraw(seed); }

  /// Streaming decoding: append keys and values, then read queries; appending tokens one at a time
  /// and reading after each append gives the batch causal outputs.
  /// k: (B, H, T, D)  v: (B, H, T, Dv)
  void append(LinearAttentionState& state, const torch::Tensor& k, const torch::Tensor& v) const;
  /// q: (B, H, T, D) -> (B, H, T, Dv)
  torch::Tensor read(const LinearAttentionState& state, const torch::Tensor& q) const;

  FeatureMap feature_map{nullptr};
};
TORCH_MODULE(PerformerAttention);

}  // namespace flt::attention
