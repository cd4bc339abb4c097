#include "flt/attention/performer.h"

#include <ATen/ATen.h>

#include <cmath>

#include "flt/attention/linear.h"
#include "quarter_scale.h"

namespace flt::attention {
namespace {

// q D^{-1/4}: phi(q~).phi(k~) then estimates exp(q.k / sqrt(D)). As a column scale, which the
// feature map folds into its projection: the scaled copy of q is never built.
FeatureInput quarter_scaled(const torch::Tensor& x) {
  FeatureInput input(x);
  input.scales = {detail::quarter_scale(x)};
  return input;
}

void check_map(const char* fn, const FeatureMapImpl& map, const torch::Tensor& q) {
  TORCH_CHECK(map.options.input_dim() == q.size(-1), fn, ": feature map expects head dim ",
              map.options.input_dim(), " but q has shape ", q.sizes());
}

}  // namespace

torch::Tensor performer_attention(const torch::Tensor& q, const torch::Tensor& k,
                                  const torch::Tensor& v, const FeatureMapImpl& feature_map,
                                  bool causal, double eps) {
  check_qkv("performer_attention", q, k, v, causal);
  check_map("performer_attention", feature_map, q);
  check_positive_finite("performer_attention", "eps", eps);
  // Positive maps reach the eps floor only by underflow; trigonometric features are signed, so
  // there the estimated normaliser can be <= 0 and the same floor replaces it.
  return favor_attention(feature_map, quarter_scaled(q), quarter_scaled(k), v, causal, eps);
}

PerformerAttentionImpl::PerformerAttentionImpl(PerformerAttentionOptions options_)
    : AttentionModule(std::move(options_)) {
  reset();
}

void PerformerAttentionImpl::reset() {
  check_positive("PerformerAttention", "features (m)", options.features());
  check_dims_options("PerformerAttention", options.heads(), options.head_dim(), false, true);
  check_positive_finite("PerformerAttention", "eps", options.eps());
  check_attention_feature_kind("PerformerAttention", options.kind());
  feature_map = register_module("feature_map",
                                FeatureMap(FeatureMapOptions(options.head_dim(), options.features())
                                               .kind(options.kind())
                                               .orthogonal(options.orthogonal())
                                               .seed(options.seed())));
}

void PerformerAttentionImpl::pretty_print(std::ostream& stream) const {
  stream << "flt::attention::PerformerAttention(features=" << options.features()
         << ", kind=" << feature_kind_name(options.kind()) << ", head_dim=" << options.head_dim()
         << ")";
}

torch::Tensor PerformerAttentionImpl::forward(const torch::Tensor& q, const torch::Tensor& k,
                                              const torch::Tensor& v, const AttentionCall& call) {
  check_call("PerformerAttention", q, k, v, call.causal);
  return performer_attention(q, k, v, *feature_map, call.causal, options.eps());
}

torch::Tensor PerformerAttentionImpl::materialize(const torch::Tensor& q, const torch::Tensor& k,
                                                  const AttentionCall& call) {
  check_call("PerformerAttention::materialize", q, k, {}, call.causal);
  const auto query = feature_map->query_features(quarter_scaled(q));
  const auto key = feature_map->key_features(quarter_scaled(k), call.causal);
  return feature_attention_matrix(
      query, key, call.causal, favor_floor(query, favor_key_mass(key, call.causal), options.eps()));
}

void PerformerAttentionImpl::append(LinearAttentionState& state, const torch::Tensor& k,
                                    const torch::Tensor& v) const {
  check_call("PerformerAttention::append", k, k, v, false);
  state.check_tokens("PerformerAttention::append", k, v);
  const auto k_scaled = quarter_scaled(k);
  if (state.empty()) state.key_shift = feature_map->causal_key_shift(k_scaled.first_token());
  state.append(feature_map->key_features(k_scaled, state.key_shift), v);
}

torch::Tensor PerformerAttentionImpl::read(const LinearAttentionState& state,
                                           const torch::Tensor& q) const {
  state.check_queries("PerformerAttention::read", q);
  check_dims_against("PerformerAttention::read", options.heads(), options.head_dim(), q);
  const auto query = feature_map->query_features(quarter_scaled(q));
  return state.read(query,
                    favor_floor(query, state.normaliser.sum(-2, /*keepdim=*/true), options.eps()));
}

}  // namespace flt::attention
