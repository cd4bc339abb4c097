#include "flt/attention/flt.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>

#include "flt/attention/linear.h"
#include "flt/attention/softmax.h"
#include "flt/kernels/linear_attention.h"
#include "flt/kernels/position_features.h"
#include "precomputed_input.h"
#include "quarter_scale.h"

namespace flt::attention {

using detail::PrecomputedInput;

namespace {

constexpr double kPi = 3.14159265358979323846;

bool has_components(SpectrumFamily family) {
  return family == SpectrumFamily::kGaussianMixture || family == SpectrumFamily::kLocal ||
         family == SpectrumFamily::kGaussianBasis;
}

// Irwin-Hall density times (k-1)!, through truncated powers: sum_j (-1)^j C(k,j) (u - j)_+^{k-1}.
// The k-fold self-convolution of the box 1[|x| <= v] is (2v)^{k-1} IH_k((x + k v) / (2 v)).
torch::Tensor box_convolution(const torch::Tensor& x, const torch::Tensor& v, int64_t k) {
  const auto u = (x + static_cast<double>(k) * v) / (2.0 * v);
  auto total = at::zeros_like(u);
  double binom = 1.0, factorial = 1.0;
  for (int64_t i = 1; i < k; ++i) factorial *= static_cast<double>(i);
  for (int64_t j = 0; j <= k; ++j) {
    const auto shifted = u - static_cast<double>(j);
    const auto power = k == 1 ? (shifted >= 0).to(u.scalar_type()) : at::relu(shifted).pow(k - 1);
    total = total + ((j % 2 == 0) ? binom : -binom) * power;
    binom = binom * static_cast<double>(k - j) / static_cast<double>(j + 1);
  }
  return total / factorial * (2.0 * v).pow(k - 1);
}

// [cos, sin] of 2 pi xi.r for every head. positions (B', L, l), xi (H, r, l) -> (B', H, L, 2r)
// The phase is formed in turns and in double, whole turns removed, before it becomes an angle of
// the positions' dtype: in float, 2 pi xi t at t = 4096 is off by up to 1e-3 rad, and cos/sin of
// such large arguments take 4 ns an entry in their range reduction. Float on the CPU
// without gradients for the phase (the default: fixed frequencies and positions) takes the fused
// kernel, one pass instead of six; otherwise the composite below ((B', 1, L, l) x (H, l, r); frac_
// and mul_ in place on the fresh product: frac's derivative is 1).
torch::Tensor position_trig(const torch::Tensor& positions, const torch::Tensor& xi) {
  const bool phase_learns =
      at::GradMode::is_enabled() && (positions.requires_grad() || xi.requires_grad());
  if (positions.scalar_type() == torch::kFloat && positions.device().is_cpu() && !phase_learns)
    return kernels::fourier_position_features(positions, xi);
  const auto phase =
      at::matmul(positions.unsqueeze(1).to(torch::kDouble), xi.to(torch::kDouble).transpose(1, 2))
          .frac_()
          .mul_(2.0 * kPi)
          .to(positions.scalar_type());
  return at::cat({at::cos(phase), at::sin(phase)}, -1);
}

// The spectrum's parameters in the dtype of the points `x` it is evaluated at, after checking that
// `x` (the argument `name` of RpeSpectrum::`fn`) is (H, N, l). `scale` is exp(log_scale): sigma_t,
// s_t or lambda; the tensors a family does not use stay undefined.
struct SpectrumAt {
  torch::Tensor weights, scale, means, radii;
  double l;
};

SpectrumAt spectrum_at(const RpeSpectrumImpl& spectrum, const torch::Tensor& x, const char* fn,
                       const char* name) {
  const int64_t l = spectrum.options.position_dim();
  TORCH_CHECK(x.dim() == 3 && x.size(-1) == l, "RpeSpectrum::", fn, ": expected ", name,
              " of shape (H, N, ", l, "), got ", x.sizes());
  const auto in_dtype = [&](const torch::Tensor& t) {
    return t.defined() ? t.to(x.scalar_type()) : t;
  };
  const auto log_scale = in_dtype(spectrum.log_scale);
  return {in_dtype(spectrum.weights), log_scale.defined() ? log_scale.exp() : log_scale,
          in_dtype(spectrum.means), in_dtype(spectrum.radii), static_cast<double>(l)};
}

// N1 and N2 as one trigonometric block and two column scales: N1 = trig * query_scale,
// N2 = trig * key_scale, trig (B', H, L, 2r), scales (1, H, 1, 2r); and |N2|^2 / 2, the same at
// every position, (1, H, 1, 1) (|N1|^2 equals it up to r * 1e-30 where some a_t = 0). `by_rows`
// (and a phase that records no gradient): trig is not formed, `trig_rows` makes its rows instead
// (PrecomputedInput::leading_rows).
struct PositionBlock {
  torch::Tensor trig, query_scale, key_scale, half_squared_norm;
  std::shared_ptr<const detail::BlockRows> trig_rows;
};

PositionBlock position_block(const FLTAttentionImpl& attention, const torch::Tensor& positions,
                             bool by_rows = false) {
  const auto& options = attention.options;
  TORCH_CHECK(positions.dim() == 3 && positions.size(-1) == options.position_dim(),
              "FLTAttention: positions must have shape (B, L, ", options.position_dim(),
              ") (position_dim ", options.position_dim(), "), got ", positions.sizes());
  const auto dtype = positions.scalar_type();
  const double r = static_cast<double>(options.rpe_features());
  const auto xi = attention.base_frequencies.to(dtype) *
                  attention.log_proposal_sigma.to(dtype).exp();          // (H, r, l)
  const auto a = attention.rpe->g(xi) / attention.proposal_density(xi);  // (H, r)
  // In float32, g underflows to exactly 0 at frequencies far from the spectrum's mass, and
  // d sqrt(x)/dx is infinite at 0 (0 * inf = NaN in the backward): the floor keeps the gradient at
  // 0 there while changing N1.N2 by at most r * 1e-30.
  const auto magnitude =
      (a.abs() / r).clamp_min(1e-30).sqrt().repeat({1, 2}).view({1, a.size(0), 1, 2 * a.size(1)});

  // Rows made later carry no graph: a phase that learns (positions or the proposal's width
  // recording gradients) forms the block now.
  const bool phase_learns =
      at::GradMode::is_enabled() && (positions.requires_grad() || xi.requires_grad());
  PositionBlock block;  // [cos, sin] of every position now, or a block of rows at a time later
  if (by_rows && !phase_learns) {
    block.trig_rows = std::make_shared<const detail::BlockRows>(
        [positions, xi](int64_t start, int64_t n, int64_t first, int64_t count) {
          return position_trig(positions.narrow(1, start, n),
                               count < 0 ? xi : xi.narrow(0, first, count));
        });
  } else {
    block.trig = position_trig(positions, xi);
  }
  // Thm 4.1, real part: sgn(a_t) on one side only keeps N1.N2 = (1/r) sum_t a_t cos(...). With no
  // a_t < 0 (a positive spectrum: every family's start) N1 = N2 and both sides get the same scale
  // tensor, which `share_leading_projection` reads as "project the block once". Looking at the
  // signs would synchronise a GPU stream on every call, so off the CPU the sides keep separate
  // scales.
  block.key_scale = magnitude;
  block.query_scale = magnitude;
  if (!a.device().is_cpu() || at::any(a < 0).item<bool>()) {
    block.query_scale =
        magnitude * at::sign(a).detach().repeat({1, 2}).view({1, a.size(0), 1, 2 * a.size(1)});
  }
  // |N1_i|^2 = sum_t (|a_t| / r) (cos^2 + sin^2) at every position i: a closed form per head, so
  // the feature map never squares a scaled copy of the block (nor keeps one for the backward).
  block.half_squared_norm = 0.25 * magnitude.square().sum(-1, /*keepdim=*/true);
  return block;
}

// positions (B', L, l) -> Q^ or K^ parts: returns ([N1, q D^{-1/4}], [N2, k D^{-1/4}]), the
// position blocks as one [cos, sin] block with column scales, made a block of tokens at a time
// when `by_rows`.
std::pair<PrecomputedInput, PrecomputedInput> augmented(
    const FLTAttentionImpl& attention, const torch::Tensor& q, const torch::Tensor& k,
    const torch::Tensor& q_pos, const torch::Tensor& k_pos, bool by_rows = false) {
  check_dims_against("FLTAttention", attention.options.heads(), attention.options.head_dim(), q);
  const auto at_q = position_block(attention, q_pos, by_rows);
  // One evaluation when positions agree.
  const auto at_k = k_pos.is_same(q_pos) ? at_q : position_block(attention, k_pos, by_rows);
  // Q^ = [N1, q D^{-1/4}], K^ = [N2, k D^{-1/4}] as column blocks: never concatenated, the
  // position blocks (batch 1 when positions are shared) are projected once for the whole batch,
  // N1 and N2 are one [cos, sin] block, and every scale is a column scale of the projection.
  PrecomputedInput query{at_q.trig, q}, key{at_k.trig, k};
  query.leading_rows = at_q.trig_rows;
  key.leading_rows = at_k.trig_rows;
  query.scales = {at_q.query_scale, detail::quarter_scale(q)};
  key.scales = {at_q.key_scale, detail::quarter_scale(k)};
  query.half_squared_norms = {at_q.half_squared_norm};
  key.half_squared_norms = {at_q.half_squared_norm};
  // N1 = N2 at the same positions: the same block and scale tensors on both sides, which
  // `share_leading_projection` reads as "project the block once for queries and keys".
  return {query, key};
}

}  // namespace

std::string spectrum_family_name(SpectrumFamily family) {
  switch (family) {
    case SpectrumFamily::kGaussianMixture: return "gaussian_mixture";
    case SpectrumFamily::kLocal: return "local";
    case SpectrumFamily::kGaussianKernel: return "gaussian_kernel";
    case SpectrumFamily::kLaplaceKernel: return "laplace_kernel";
    case SpectrumFamily::kCauchyKernel: return "cauchy_kernel";
    case SpectrumFamily::kGaussianBasis: return "gaussian_basis";
  }
  return "?";
}

SpectrumFamily spectrum_family_from_name(const std::string& name) {
  for (auto f : {SpectrumFamily::kGaussianMixture, SpectrumFamily::kLocal,
                 SpectrumFamily::kGaussianKernel, SpectrumFamily::kLaplaceKernel,
                 SpectrumFamily::kCauchyKernel, SpectrumFamily::kGaussianBasis}) {
    if (spectrum_family_name(f) == name) return f;
  }
  TORCH_CHECK(
      false, "RPE spectrum: unknown family \"", name,
      "\" (expected gaussian_mixture, local, gaussian_kernel, laplace_kernel, cauchy_kernel "
      "or gaussian_basis)");
}

// ---- spectrum -----------------------------------------------------------------------------------

RpeSpectrumImpl::RpeSpectrumImpl(RpeSpectrumOptions options_) : options(std::move(options_)) {
  reset();
}

void RpeSpectrumImpl::reset() {
  const int64_t h = options.heads(), l = options.position_dim(), t = options.components();
  check_positive("RpeSpectrum", "heads", h);
  check_positive("RpeSpectrum", "position_dim", l);
  check_positive("RpeSpectrum", "components (T)", t);
  check_positive("RpeSpectrum", "smoothness (k)", options.smoothness());
  check_positive_finite("RpeSpectrum", "scale (sigma / radius / length scale)", options.scale());
  check_finite("RpeSpectrum", "weight", options.weight());
  const auto index = torch::arange(t, torch::kDouble);
  const double s0 = options.scale(), w = options.weight();
  // Non-zero initial weights: g = 0 would give zero gradients to the weights (the public FLT code
  // starts there).
  switch (options.family()) {
    case SpectrumFamily::kGaussianMixture: {
      const auto sigma = s0 * at::pow(2.0, -index);  // (T)
      const auto height = at::pow(2.0 * kPi * sigma * sigma, 0.5 * static_cast<double>(l));
      weights = register_parameter(
          "weights", (w / static_cast<double>(t) / height).repeat({h, 1}).to(torch::kFloat));
      log_scale = register_parameter("log_scale", sigma.log().repeat({h, 1}).to(torch::kFloat));
      means = register_parameter("means", torch::zeros({h, t, l}));
      break;
    }
    case SpectrumFamily::kLocal: {
      weights = register_parameter("weights", torch::full({h, t}, w / static_cast<double>(t)));
      radii = register_parameter(
          "radii",
          (s0 * (index + 1.0)).view({1, t, 1}).expand({h, t, l}).contiguous().to(torch::kFloat));
      break;
    }
    case SpectrumFamily::kGaussianKernel:
    case SpectrumFamily::kLaplaceKernel:
    case SpectrumFamily::kCauchyKernel:
      weights = register_parameter("weights", torch::full({h, 1}, w));
      log_scale = register_parameter("log_scale", torch::full({h, 1}, std::log(s0)));
      break;
    case SpectrumFamily::kGaussianBasis: {
      const auto s = s0 * at::pow(2.0, index);
      const auto height = at::pow(std::sqrt(2.0 * kPi) * s, static_cast<double>(l));
      weights = register_parameter(
          "weights", (w / static_cast<double>(t) * height).repeat({h, 1}).to(torch::kFloat));
      log_scale = register_parameter("log_scale", s.log().repeat({h, 1}).to(torch::kFloat));
      break;
    }
  }
}

void RpeSpectrumImpl::pretty_print(std::ostream& stream) const {
  stream << "flt::attention::RpeSpectrum(family=" << spectrum_family_name(options.family())
         << ", heads=" << options.heads() << ", position_dim=" << options.position_dim();
  if (has_components(options.family())) stream << ", components=" << options.components();
  if (options.family() == SpectrumFamily::kLocal) stream << ", smoothness=" << options.smoothness();
  stream << ")";
}

torch::Tensor RpeSpectrumImpl::g(const torch::Tensor& xi) const {
  const auto p = spectrum_at(*this, xi, "g", "xi");
  const auto& w = p.weights;
  switch (options.family()) {
    case SpectrumFamily::kGaussianMixture: {
      const auto diff = xi.unsqueeze(2) - p.means.unsqueeze(1);  // (H, N, T, l)
      const auto sigma = p.scale.unsqueeze(1);                   // (H, 1, T)
      return (w.unsqueeze(1) * at::exp(-diff.pow(2).sum(-1) / (2.0 * sigma * sigma))).sum(-1);
    }
    case SpectrumFamily::kLocal: {
      const auto v = p.radii.abs().unsqueeze(1);  // (H, 1, T, l)
      // sin(2 pi v xi) / (pi xi) = 2 v sinc(2 v xi) with torch's normalised sinc (finite at 0).
      const auto ratio = 2.0 * v * at::sinc(2.0 * v * xi.unsqueeze(2));  // (H, N, T, l)
      return (w.unsqueeze(1) * ratio.pow(options.smoothness()).prod(-1)).sum(-1);
    }
    case SpectrumFamily::kGaussianKernel: {
      const auto& lambda = p.scale;  // (H, 1)
      return w * at::pow(2.0 * kPi * lambda * lambda, 0.5 * p.l) *
             at::exp(-2.0 * kPi * kPi * lambda * lambda * xi.pow(2).sum(-1));
    }
    case SpectrumFamily::kLaplaceKernel: {
      const auto lambda = p.scale.unsqueeze(-1);  // (H, 1, 1)
      return w * (2.0 * lambda / (1.0 + 4.0 * kPi * kPi * lambda * lambda * xi.pow(2))).prod(-1);
    }
    case SpectrumFamily::kCauchyKernel: {
      const auto lambda = p.scale.unsqueeze(-1);
      return w * (kPi * lambda * at::exp(-2.0 * kPi * lambda * xi.abs())).prod(-1);
    }
    case SpectrumFamily::kGaussianBasis: {
      const auto s = p.scale.unsqueeze(1);  // (H, 1, T)
      return (w.unsqueeze(1) * at::exp(-2.0 * kPi * kPi * s * s * xi.pow(2).sum(-1, true))).sum(-1);
    }
  }
  return {};
}

torch::Tensor RpeSpectrumImpl::f(const torch::Tensor& delta) const {
  const auto p = spectrum_at(*this, delta, "f", "delta");
  const auto& w = p.weights;
  switch (options.family()) {
    case SpectrumFamily::kGaussianMixture: {
      const auto sigma = p.scale.unsqueeze(1);                        // (H, 1, T)
      const auto sq = delta.pow(2).sum(-1, true);                     // (H, N, 1)
      const auto phase = at::matmul(delta, p.means.transpose(1, 2));  // (H, N, T)
      return (w.unsqueeze(1) * at::pow(2.0 * kPi * sigma * sigma, 0.5 * p.l) *
              at::exp(-2.0 * kPi * kPi * sigma * sigma * sq) * at::cos(2.0 * kPi * phase))
          .sum(-1);
    }
    case SpectrumFamily::kLocal: {
      const auto v = p.radii.abs().unsqueeze(1);  // (H, 1, T, l)
      const auto box = box_convolution(delta.unsqueeze(2), v, options.smoothness());
      return (w.unsqueeze(1) * box.prod(-1)).sum(-1);
    }
    case SpectrumFamily::kGaussianKernel: {
      const auto& lambda = p.scale;
      return w * at::exp(-delta.pow(2).sum(-1) / (2.0 * lambda * lambda));
    }
    case SpectrumFamily::kLaplaceKernel: {
      return w * at::exp(-delta.abs().sum(-1) / p.scale);
    }
    case SpectrumFamily::kCauchyKernel: {
      const auto lambda = p.scale.unsqueeze(-1);
      return w * (1.0 / (1.0 + delta.pow(2) / (lambda * lambda))).prod(-1);
    }
    case SpectrumFamily::kGaussianBasis: {
      const auto s = p.scale.unsqueeze(1);  // (H, 1, T)
      return (w.unsqueeze(1) * at::pow(std::sqrt(2.0 * kPi) * s, -p.l) *
              at::exp(-delta.pow(2).sum(-1, true) / (2.0 * s * s)))
          .sum(-1);
    }
  }
  return {};
}

// ---- FLT attention ------------------------------------------------------------------------------

FLTAttentionImpl::FLTAttentionImpl(FLTAttentionOptions options_)
    : AttentionModule(std::move(options_)) {
  reset();
}

RpeSpectrumOptions rpe_spectrum_options(const FLTAttentionOptions& options, int64_t heads) {
  return RpeSpectrumOptions(heads, options.position_dim())
      .family(options.family())
      .components(options.components())
      .smoothness(options.smoothness())
      .scale(options.rpe_scale())
      .weight(options.rpe_weight());
}

void FLTAttentionImpl::reset() {
  constexpr const char* kFn = "FLTAttention";
  check_positive(kFn, "features (m)", options.features());
  check_positive(kFn, "rpe_features (r)", options.rpe_features());
  check_positive(kFn, "position_dim", options.position_dim());
  check_positive(kFn, "components (T)", options.components());
  check_positive(kFn, "smoothness (k)", options.smoothness());
  check_positive_finite(kFn, "proposal_sigma", options.proposal_sigma());
  check_attention_feature_kind(kFn, options.kind());
  check_positive_finite(kFn, "rpe_scale (sigma / radius / length scale)", options.rpe_scale());
  check_finite(kFn, "rpe_weight", options.rpe_weight());
  check_dims_options(kFn, options.heads(), options.head_dim(), true, true);
  check_positive_finite(kFn, "eps", options.eps());
  if (options.shared_spectrum().is_empty()) {
    rpe = register_module("rpe", RpeSpectrum(rpe_spectrum_options(options, options.heads())));
  } else {
    rpe = options.shared_spectrum();
    const auto& shared = rpe->options;
    TORCH_CHECK(shared.heads() == options.heads() &&
                    shared.position_dim() == options.position_dim() &&
                    shared.family() == options.family(),
                "FLTAttention: the shared spectrum has ", shared.heads(), " heads, position_dim ",
                shared.position_dim(), " and family ", spectrum_family_name(shared.family()),
                "; this module needs ", options.heads(), ", ", options.position_dim(), " and ",
                spectrum_family_name(options.family()));
  }
  const int64_t augmented_dim = 2 * options.rpe_features() + options.head_dim();
  feature_map =
      register_module("feature_map", FeatureMap(FeatureMapOptions(augmented_dim, options.features())
                                                    .kind(options.kind())
                                                    .seed(options.seed())));
  const auto log_sigma = torch::full({}, std::log(options.proposal_sigma()));
  if (options.learn_proposal()) {
    log_proposal_sigma = register_parameter("log_proposal_sigma", log_sigma);
  } else {
    log_proposal_sigma = register_buffer("log_proposal_sigma", log_sigma);
  }
  base_frequencies = register_buffer(
      "base_frequencies",
      torch::zeros({options.heads(), options.rpe_features(), options.position_dim()}));
  draw_frequencies(options.seed());
}

void FLTAttentionImpl::draw_frequencies(uint64_t seed) {
  // A stream separate from the attention features' (seed + a constant), both fixed by `seed`.
  auto gen = at::detail::createCPUGenerator(seed ^ 0x9E3779B97F4A7C15ULL);
  const auto shape = base_frequencies.sizes().vec();
  const auto dbl = torch::TensorOptions().dtype(torch::kDouble);
  torch::Tensor z;
  if (options.proposal() == ProposalKind::kGaussian) {
    z = at::randn(shape, gen, dbl);
  } else {
    z = at::tan(kPi * (at::empty(shape, dbl).uniform_(0.0, 1.0, gen) - 0.5));
  }
  torch::NoGradGuard no_grad;
  base_frequencies.copy_(z);
}

void FLTAttentionImpl::redraw(uint64_t seed) {
  options.seed(seed);
  feature_map->redraw(seed);
  draw_frequencies(seed);
}

void FLTAttentionImpl::pretty_print(std::ostream& stream) const {
  stream << "flt::attention::FLTAttention(features=" << options.features()
         << ", rpe_features=" << options.rpe_features()
         << ", position_dim=" << options.position_dim()
         << ", family=" << spectrum_family_name(options.family()) << ", heads=" << options.heads()
         << ", head_dim=" << options.head_dim() << ")";
}

torch::Tensor FLTAttentionImpl::proposal_density(const torch::Tensor& xi) const {
  TORCH_CHECK(xi.dim() >= 1 && xi.size(-1) == options.position_dim(),
              "FLTAttention::proposal_density: xi must have shape (..., ", options.position_dim(),
              ") (position_dim ", options.position_dim(), "), got ", xi.sizes());
  const double l = static_cast<double>(options.position_dim());
  const auto s = log_proposal_sigma.to(xi.scalar_type()).exp();
  if (options.proposal() == ProposalKind::kGaussian) {
    return at::exp(-xi.pow(2).sum(-1) / (2.0 * s * s)) / at::pow(std::sqrt(2.0 * kPi) * s, l);
  }
  return (1.0 / (kPi * s * (1.0 + (xi / s).pow(2)))).prod(-1);
}

torch::Tensor FLTAttentionImpl::frequencies() const {
  return base_frequencies * log_proposal_sigma.exp();
}

std::pair<torch::Tensor, torch::Tensor> FLTAttentionImpl::rpe_features(
    const torch::Tensor& positions) const {
  const auto block = position_block(*this, positions);
  return {block.trig * block.query_scale, block.trig * block.key_scale};
}

torch::Tensor FLTAttentionImpl::positions_for(const char* fn, const torch::Tensor& positions,
                                              const torch::Tensor& x, int64_t first_index) const {
  torch::Tensor pos;
  if (!positions.defined()) {
    pos = (torch::arange(x.size(2), x.options()) + static_cast<double>(first_index))
              .view({1, x.size(2), 1});
    if (options.position_dim() > 1) pos = pos.expand({1, x.size(2), options.position_dim()});
  } else {
    pos = resolve_positions(fn, positions, x);
  }
  TORCH_CHECK(pos.size(-1) == options.position_dim(), fn, ": positions have dimension ",
              pos.size(-1), " but position_dim is ", options.position_dim(), " (positions ",
              positions.sizes(), ")");
  return pos;
}

torch::Tensor FLTAttentionImpl::forward(const torch::Tensor& q, const torch::Tensor& k,
                                        const torch::Tensor& v, const AttentionCall& call) {
  check_call("FLTAttention", q, k, v, call.causal);
  TORCH_CHECK(q.size(2) == k.size(2) || !call.positions.defined(),
              "FLTAttention: positions cover one length; with Lq ", q.size(2), " != Lk ", k.size(2),
              " leave them undefined (token indices)");
  const auto q_pos = positions_for("FLTAttention", call.positions, q, 0);
  const auto k_pos = q.size(2) == k.size(2) ? q_pos : positions_for("FLTAttention", {}, k, 0);
  // On the CPU favor_attention forms its inputs a block of tokens at a time (the fused backward
  // again), and the position block is made so too rather than for the whole sequence.
  const bool by_rows = q.device().is_cpu() && k.device().is_cpu() && v.device().is_cpu();
  auto [qh, kh] = augmented(*this, q, k, q_pos, k_pos, by_rows);
  return detail::favor_attention(*feature_map, std::move(qh), std::move(kh), v, call.causal,
                                 options.eps());
}

torch::Tensor FLTAttentionImpl::materialize(const torch::Tensor& q, const torch::Tensor& k,
                                            const AttentionCall& call) {
  check_call("FLTAttention::materialize", q, k, {}, call.causal);
  const auto q_pos = positions_for("FLTAttention::materialize", call.positions, q, 0);
  const auto k_pos = q.size(2) == k.size(2) ? q_pos : positions_for("FLTAttention", {}, k, 0);
  auto [qh, kh] = augmented(*this, q, k, q_pos, k_pos);
  detail::share_leading_projection(*feature_map, qh, kh);
  const auto query = detail::query_features(*feature_map, qh);
  const auto key = detail::key_features(*feature_map, kh, call.causal);
  return feature_attention_matrix(
      query, key, call.causal, favor_floor(query, favor_key_mass(key, call.causal), options.eps()));
}

torch::Tensor FLTAttentionImpl::approximate_mask(const torch::Tensor& positions) const {
  TORCH_CHECK(positions.defined() && (positions.dim() == 2 || positions.dim() == 3),
              "FLTAttention::approximate_mask: positions must have shape (L, l) or (B, L, l)");
  const auto pos = positions.dim() == 2 ? positions.unsqueeze(0) : positions;
  const auto [n1, n2] = rpe_features(pos);
  return at::matmul(n1, n2.transpose(-2, -1));
}

torch::Tensor FLTAttentionImpl::exact_mask(const torch::Tensor& positions) const {
  TORCH_CHECK(positions.defined() && (positions.dim() == 2 || positions.dim() == 3),
              "FLTAttention::exact_mask: positions must have shape (L, l) or (B, L, l)");
  const auto pos = positions.dim() == 2 ? positions.unsqueeze(0) : positions;  // (B', L, l)
  TORCH_CHECK(pos.size(-1) == options.position_dim(),
              "FLTAttention::exact_mask: positions have dimension ", pos.size(-1),
              " but position_dim is ", options.position_dim());
  const int64_t b = pos.size(0), len = pos.size(1), l = pos.size(2);
  const auto delta = (pos.unsqueeze(2) - pos.unsqueeze(1)).reshape({1, b * len * len, l});
  return rpe->f(delta).view({options.heads(), b, len, len}).transpose(0, 1);
}

torch::Tensor FLTAttentionImpl::exact_attention(const torch::Tensor& q, const torch::Tensor& k,
                                                const AttentionCall& call) const {
  check_call("FLTAttention::exact_attention", q, k, {}, call.causal);
  TORCH_CHECK(q.size(2) == k.size(2), "FLTAttention::exact_attention: needs Lq == Lk, got ",
              q.sizes(), " and ", k.sizes());
  const auto pos = positions_for("FLTAttention::exact_attention", call.positions, q, 0);
  return softmax_attention_weights(q, k, call.causal, /*scale=*/0.0, exact_mask(pos));
}

torch::Tensor FLTAttentionImpl::spectrum(const torch::Tensor& xi) const {
  TORCH_CHECK(xi.dim() == 2, "FLTAttention::spectrum: xi must have shape (N, l), got ", xi.sizes());
  return rpe->g(xi.unsqueeze(0));
}

torch::Tensor FLTAttentionImpl::rpe_function(const torch::Tensor& delta) const {
  TORCH_CHECK(delta.dim() == 2, "FLTAttention::rpe_function: delta must have shape (N, l), got ",
              delta.sizes());
  return rpe->f(delta.unsqueeze(0));
}

int64_t FLTAttentionImpl::rpe_parameter_count() const {
  int64_t count = 0;
  for (const auto& p : rpe->parameters()) count += p.numel();
  if (options.learn_proposal()) count += 1;
  return count;
}

void FLTAttentionImpl::append(LinearAttentionState& state, const torch::Tensor& k,
                              const torch::Tensor& v, const torch::Tensor& positions) const {
  check_call("FLTAttention::append", k, k, v, false);
  state.check_tokens("FLTAttention::append", k, v);
  const auto pos = positions_for("FLTAttention::append", positions, k, state.steps);
  const auto kh = augmented(*this, k, k, pos, pos).second;
  if (state.empty()) state.key_shift = detail::causal_key_shift(*feature_map, kh.first_token());
  state.append(detail::key_features(*feature_map, kh, state.key_shift), v);
}

torch::Tensor FLTAttentionImpl::read(const LinearAttentionState& state, const torch::Tensor& q,
                                     const torch::Tensor& positions) const {
  state.check_queries("FLTAttention::read", q);
  TORCH_CHECK(positions.defined() || q.size(2) <= state.steps, "FLTAttention::read: ", q.size(2),
              " queries but only ", state.steps,
              " tokens appended; their default positions are the "
              "latest tokens' indices, so pass positions to read further");
  const auto pos = positions_for("FLTAttention::read", positions, q, state.steps - q.size(2));
  const auto qh = augmented(*this, q, q, pos, pos).first;
  const auto query = detail::query_features(*feature_map, qh);
  return state.read(query,
                    favor_floor(query, state.normaliser.sum(-2, /*keepdim=*/true), options.eps()));
}

const std::vector<SpectrumFamilyInfo>& spectrum_families() {
  static const std::vector<SpectrumFamilyInfo> families = [] {
    const std::pair<SpectrumFamily, const char*> display[] = {
        {SpectrumFamily::kGaussianMixture, "Gaussian mixture"},
        {SpectrumFamily::kLocal, "local (box^k)"},
        {SpectrumFamily::kGaussianKernel, "Gaussian kernel"},
        {SpectrumFamily::kLaplaceKernel, "Laplace kernel"},
        {SpectrumFamily::kCauchyKernel, "Cauchy kernel"},
        {SpectrumFamily::kGaussianBasis, "Gaussian basis"},
    };
    std::vector<SpectrumFamilyInfo> out;
    for (const auto& [family, name] : display) {
      TORCH_INTERNAL_ASSERT(static_cast<size_t>(family) == out.size(), "spectrum_families: order");
      out.push_back({family, spectrum_family_name(family), name});
    }
    // the value after the last has no name: a family added to the enum (and named in
    // spectrum_family_name, which -Wswitch enforces) but missing above fails here
    TORCH_INTERNAL_ASSERT(spectrum_family_name(static_cast<SpectrumFamily>(out.size())) == "?",
                          "spectrum_families: a SpectrumFamily has no display name");
    return out;
  }();
  return families;
}

}  // namespace flt::attention
