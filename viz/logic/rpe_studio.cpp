#include "logic/rpe_studio.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <exception>

#include "flt/attention/flt.h"

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

// Points along the first axis: (N) -> (N, l) with the other coordinates 0.
at::Tensor along_first_axis(const at::Tensor& t, int64_t l) {
  at::Tensor out = at::zeros({t.size(0), l}, t.options());
  out.select(1, 0).copy_(t);
  return out;
}

std::vector<float> to_vector(const at::Tensor& t) {
  const at::Tensor f = t.detach().to(at::kFloat).contiguous();
  return std::vector<float>(f.data_ptr<float>(), f.data_ptr<float>() + f.numel());
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

const char* rpe_family_label(int family) {
  static const char* kLabels[kRpeFamilyCount] = {"Gaussian mixture", "local (box^k)",
                                                 "Gaussian kernel",  "Laplace kernel",
                                                 "Cauchy kernel",    "Gaussian basis"};
  return kLabels[std::clamp(family, 0, kRpeFamilyCount - 1)];
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
  RpeCurves out;
  try {
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
      const at::Tensor axis = at::linspace(-settings.extent, settings.extent, grid, opts);
      const at::Tensor y = axis.flip(0).view({grid, 1}).expand({grid, grid});
      const at::Tensor x = axis.view({1, grid}).expand({grid, grid});
      const at::Tensor delta = at::stack({x.reshape({-1}), y.reshape({-1})}, 1);
      out.map_2d = to_vector(module->rpe_function(delta).reshape({-1}));
      out.grid = grid;
      const auto [lo, hi] = std::minmax_element(out.map_2d.begin(), out.map_2d.end());
      out.map_lo = *lo;
      out.map_hi = *hi;
    }
  } catch (const std::exception& ex) {
    out.error = ex.what();
  }
  return out;
}

}  // namespace flt::viz
