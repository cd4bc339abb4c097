#include "logic/rpe_studio.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <exception>
#include <tuple>

#include "flt/attention/flt.h"
#include "logic/tensors.h"

namespace flt::viz {
namespace {

using attention::FLTAttention;
using attention::FLTAttentionOptions;
using attention::ProposalKind;
using attention::SpectrumFamily;

FLTAttention make_module(const RpeSettings& s, uint64_t seed, int features) {
  return FLTAttention(FLTAttentionOptions()
                          .heads(1)
                          .head_dim(8)
                          .features(8)
                          .rpe_features(features)
                          .position_dim(s.position_dim)
                          .family(static_cast<SpectrumFamily>(s.family))
                          .components(s.components)
                          .smoothness(s.smoothness)
                          .rpe_scale(s.scale)
                          .proposal(static_cast<ProposalKind>(s.proposal))
                          .proposal_sigma(s.proposal_sigma)
                          .seed(seed));
}

// f exact and estimated at delta_j = r_mid - r_j for positions r_j along the first axis.
// -> exact, approx: (N)
void exact_and_approx(const FLTAttention& module, const at::Tensor& positions, at::Tensor* exact,
                      at::Tensor* approx) {
  const int64_t mid = positions.size(0) / 2;
  const at::Tensor delta = positions[mid].unsqueeze(0) - positions;  // (N, l)
  *exact = module->rpe_function(delta).reshape({-1});
  *approx = module->approximate_mask(positions)[0][0][mid];  // (B'=1, H=1, L, L) -> row mid
}

}  // namespace

const std::vector<std::string>& rpe_family_labels() {
  static const std::vector<std::string> labels = [] {
    std::vector<std::string> out;
    for (const auto& info : attention::spectrum_families()) out.push_back(info.display_name);
    return out;
  }();
  return labels;
}

const std::string& rpe_family_label(int family) {
  static const std::string unknown = "?";
  const auto& labels = rpe_family_labels();
  return family >= 0 && family < static_cast<int>(labels.size()) ? labels[family] : unknown;
}

bool rpe_family_uses_smoothness(int family) {
  return static_cast<SpectrumFamily>(family) == SpectrumFamily::kLocal;
}

const char* rpe_proposal_label(int proposal) {
  return proposal == 1 ? "Cauchy" : "Gaussian";
}

double rpe_max_error(const RpeSettings& settings, uint64_t seed, int features, int points) {
  at::NoGradGuard no_grad;
  const FLTAttention module = make_module(settings, seed, features);
  const auto opts = at::TensorOptions().dtype(at::kFloat);
  const at::Tensor positions = along_first_axis(
      at::linspace(-settings.extent, settings.extent, points, opts), settings.position_dim);
  at::Tensor exact, approx;
  exact_and_approx(module, positions, &exact, &approx);
  return (approx - exact).abs().max().item<double>();
}

RpeCurves compute_rpe_curves(const RpeSettings& settings, uint64_t seed, int points, int grid) {
  return computed_or_error<RpeCurves>([&](RpeCurves& out) {
    at::NoGradGuard no_grad;
    const FLTAttention module = make_module(settings, seed, settings.features);
    const auto opts = at::TensorOptions().dtype(at::kFloat);
    const int64_t l = settings.position_dim;
    const at::Tensor xi = at::linspace(-settings.xi_extent, settings.xi_extent, points, opts);
    out.xi = to_vector(xi);
    out.g = to_vector(module->spectrum(along_first_axis(xi, l)).reshape({-1}));
    const at::Tensor pos = at::linspace(-settings.extent, settings.extent, points, opts);
    const at::Tensor positions = along_first_axis(pos, l);
    at::Tensor exact, approx;
    exact_and_approx(module, positions, &exact, &approx);
    // delta_j = r_mid - r_j runs from +extent to -extent; flip so the curve reads left to right
    out.delta = to_vector(pos);
    out.exact = to_vector(exact.flip(0));
    out.approx = to_vector(approx.flip(0));
    out.max_error = (approx - exact).abs().max().item<float>();
    for (int r : {2, 4, 8, 16, 32, 64, 128, 256, 512}) {
      out.error_features.push_back(r);
      out.error_by_features.push_back(static_cast<float>(rpe_max_error(settings, seed, r, points)));
    }
    if (l == 2) {
      const at::Tensor delta = map_points(settings.extent, grid, opts);
      out.map_2d = to_vector(module->rpe_function(delta).reshape({-1}));
      out.grid = grid;
      std::tie(out.map_lo, out.map_hi) = value_range(out.map_2d);
    }
  });
}

}  // namespace flt::viz
