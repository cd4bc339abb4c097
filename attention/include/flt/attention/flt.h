#pragma once
// FLT: FourierLearner-Transformer attention (Choromanski, Li et al. 2024, Algorithm 1).
//
// The RPE mask N_ij = f(r_i - r_j) is given through the Fourier transform g of f,
// f(x) = integral g(xi) exp(2 pi i x.xi) dxi. With xi_1..xi_r ~ p and a_t = g(xi_t) / p(xi_t),
// the real, sign-aware features (real part of Thm 4.1; unbiased for real f, negative g allowed)
// clang-format off
//   N1(r_i) = r^{-1/2} [s_t sqrt|a_t| cos(2 pi xi_t.r_i), s_t sqrt|a_t| sin(2 pi xi_t.r_i)]_t
//   N2(r_j) = r^{-1/2} [    sqrt|a_t| cos(2 pi xi_t.r_j),     sqrt|a_t| sin(2 pi xi_t.r_j)]_t
//   with s_t = sgn(a_t),
// clang-format on
// give N1.N2 = (1/r) sum_t a_t cos(2 pi xi_t.(r_i - r_j)) -> Re f(r_i - r_j). FAVOR+ on
// Q^ = [N1, q D^{-1/4}], K^ = [N2, k D^{-1/4}] then estimates exp(N^_ij + q_i.k_j / sqrt(D)):
// RPE-masked softmax attention in O(L (m + r) D). Positions may have any dimension l.

#include <torch/arg.h>
#include <torch/nn/cloneable.h>

#include <string>
#include <utility>
#include <vector>

#include "flt/attention/attention.h"
#include "flt/attention/feature_map.h"

namespace flt::attention {

/// Parameterisations of g (FLT paper Sec. 4.3, B.1, 5.3); all have a closed-form f.
enum class SpectrumFamily {
  /// g(xi) = sum_t w_t exp(-|xi - mu_t|^2 / (2 sigma_t^2)); f = Re of its inverse transform:
  /// sum_t w_t (2 pi sigma_t^2)^{l/2} exp(-2 pi^2 sigma_t^2 |x|^2) cos(2 pi mu_t.x).
  kGaussianMixture,
  /// Local RPE: g(xi) = sum_t w_t prod_j (sin(2 pi v_tj xi_j) / (pi xi_j))^k. k = 1 is the box
  /// f = sum_t w_t prod_j 1[|x_j| <= v_tj]; k >= 2 is its k-fold self-convolution: continuous,
  /// support k v, piecewise polynomial of degree k - 1 (the paper's Sec. 4.3 writes the
  /// denominator to the first power; only the k-th power of the whole ratio has this f).
  kLocal,
  /// Shift-invariant kernels (Bochner: g = C p_K), f(0) = C, length scale lambda:
  kGaussianKernel,  ///< f = C exp(-|x|^2 / (2 lambda^2)), g = C (2 pi lambda^2)^{l/2} exp(-2 pi^2
                    ///< lambda^2 |xi|^2)
  kLaplaceKernel,   ///< f = C exp(-|x|_1 / lambda), g = C prod_j 2 lambda / (1 + 4 pi^2 lambda^2
                    ///< xi_j^2)
  kCauchyKernel,    ///< f = C prod_j 1 / (1 + x_j^2 / lambda^2), g = C prod_j pi lambda exp(-2 pi
                    ///< lambda |xi_j|)
  /// Gaussian basis (molecules, Sec. 5.3): f = sum_t w_t (sqrt(2 pi) s_t)^{-l} exp(-|x|^2 / (2
  /// s_t^2)),
  /// g = sum_t w_t exp(-2 pi^2 s_t^2 |xi|^2).
  kGaussianBasis,
};
std::string spectrum_family_name(SpectrumFamily family);
SpectrumFamily spectrum_family_from_name(const std::string& name);

/// The distribution p the frequencies are drawn from.
enum class ProposalKind {
  kGaussian,  ///< N(0, s^2 I) (the paper's choice)
  /// Product of 1-D Cauchy(0, s): heavier tails; a_t = g/p then has finite variance for spectra
  /// with polynomial decay (Laplace kernel, local k >= 2), which a Gaussian p gives infinite
  /// variance.
  kCauchy,
};

/// Defaults of the spectrum, shared by RpeSpectrumOptions and FLTAttentionOptions.
constexpr int64_t kRpeComponents = 2;
constexpr int64_t kRpeSmoothness = 1;
constexpr double kRpeScale = 0.1;
constexpr double kRpeWeight = 1.0;

struct RpeSpectrumOptions {
  RpeSpectrumOptions(int64_t heads, int64_t position_dim)
      : heads_(heads), position_dim_(position_dim) {}
  /// Heads H: every head has its own spectrum parameters.
  TORCH_ARG(int64_t, heads);
  /// Position dimension l.
  TORCH_ARG(int64_t, position_dim);
  /// Family of g.
  TORCH_ARG(SpectrumFamily, family) = SpectrumFamily::kGaussianMixture;
  /// Components T (mixture, local, basis).
  TORCH_ARG(int64_t, components) = kRpeComponents;
  /// Local family: the power k (1 = box).
  TORCH_ARG(int64_t, smoothness) = kRpeSmoothness;
  /// Initial width: sigma_0 of the mixture (sigma_t = sigma_0 2^{-t}), radius unit of the local
  /// family (v_t = scale (t + 1)), lambda of the kernels, s_0 of the basis (s_t = s_0 2^t). > 0.
  TORCH_ARG(double, scale) = kRpeScale;
  /// Initial mask height: f(0) = weight for the mixture, kernels and basis; w_t = weight / T for
  /// local.
  TORCH_ARG(double, weight) = kRpeWeight;
};

/// Learnable g for every head, with its closed-form f.
class RpeSpectrumImpl : public torch::nn::Cloneable<RpeSpectrumImpl> {
 public:
  explicit RpeSpectrumImpl(RpeSpectrumOptions options);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;

  /// g per head. xi: (H or 1, N, l) -> (H, N)
  torch::Tensor g(const torch::Tensor& xi) const;
  /// f per head (real part for the mixture with mu != 0). delta: (H or 1, N, l) -> (H, N)
  torch::Tensor f(const torch::Tensor& delta) const;

  RpeSpectrumOptions options;
  torch::Tensor weights;    ///< w_t (mixture, local, basis): (H, T); C (kernels): (H, 1)
  torch::Tensor log_scale;  ///< log sigma_t / log s_t: (H, T); log lambda: (H, 1); local: unused
  torch::Tensor means;      ///< mixture mu_t: (H, T, l)
  torch::Tensor radii;      ///< local v_tj (used through |v|): (H, T, l)
};
TORCH_MODULE(RpeSpectrum);

struct FLTAttentionOptions;
/// The spectrum options an FLT module with `heads` heads builds from its options.
RpeSpectrumOptions rpe_spectrum_options(const FLTAttentionOptions& options, int64_t heads);

struct FLTAttentionOptions {
  static constexpr const char* kName = "flt";
  /// Attention random features m (> 0).
  TORCH_ARG(int64_t, features) = 64;
  /// RPE random features r (> 0); the RPE features have 2 r columns (cos and sin).
  TORCH_ARG(int64_t, rpe_features) = 32;
  /// Position dimension l (1: token indices; 2: image patches; 3: point coordinates).
  TORCH_ARG(int64_t, position_dim) = 1;
  /// Family of the learned spectrum g.
  TORCH_ARG(SpectrumFamily, family) = SpectrumFamily::kGaussianMixture;
  /// Components T of the mixture, local and basis families (> 0).
  TORCH_ARG(int64_t, components) = kRpeComponents;
  /// Local family: power k (1 = box).
  TORCH_ARG(int64_t, smoothness) = kRpeSmoothness;
  /// Initial width of g (see RpeSpectrumOptions::scale), > 0.
  TORCH_ARG(double, rpe_scale) = kRpeScale;
  /// Initial mask height (see RpeSpectrumOptions::weight), finite.
  TORCH_ARG(double, rpe_weight) = kRpeWeight;
  /// Proposal p of the frequencies.
  TORCH_ARG(ProposalKind, proposal) = ProposalKind::kGaussian;
  /// Scale s of p (> 0).
  TORCH_ARG(double, proposal_sigma) = 1.0;
  /// Learn s (reparameterised draws xi = s z keep the estimator unbiased).
  TORCH_ARG(bool, learn_proposal) = false;
  /// Attention feature map (FAVOR+ positive by default).
  TORCH_ARG(FeatureKind, kind) = FeatureKind::kPositive;
  /// Seed of the initial draws (attention and RPE features).
  TORCH_ARG(uint64_t, seed) = 0;
  /// Heads H and head dim D; 0 means "set by the container" (attention.h). The spectrum is per head
  /// and the features are sized by D, so a module used alone needs both.
  FLT_ATTENTION_DIMS_OPTIONS;
  /// Floor of the normaliser, relative to the keys' feature mass (`favor_floor`; only reached by
  /// underflow).
  TORCH_ARG(double, eps) = kFavorEps;
  /// A spectrum owned elsewhere and shared by several FLT modules (layers of one model share their
  /// RPE this way: `TransformerOptions::share_rpe`). The module uses it without registering it, so
  /// the owner's parameters() lists it once. Null (default): the module owns its spectrum.
  TORCH_ARG(RpeSpectrum, shared_spectrum) = nullptr;
};

class FLTAttentionImpl : public AttentionModule<FLTAttentionImpl, FLTAttentionOptions> {
  /// forward and materialize (the approximate attention matrix) take their positions from
  /// `call.positions`: (L, l) or (B, L, l), token indices when undefined.
  FLT_ATTENTION_MODULE_MEMBERS(FLTAttentionImpl, FLTAttentionOptions);

  /// Draws attention and RPE random features again from `seed`.
  void redraw(uint64_t seed);

  /// The RPE features of positions. positions: (B', L, l) -> N1, N2: (B', H, L, 2r)
  std::pair<torch::Tensor, torch::Tensor> rpe_features(const torch::Tensor& positions) const;
  /// N^ = N1 N2^T. positions: (L, l) or (B', L, l) -> (B', H, L, L)
  torch::Tensor approximate_mask(const torch::Tensor& positions) const;
  /// N = f(r_i - r_j). positions: (L, l) or (B', L, l) -> (B', H, L, L)
  torch::Tensor exact_mask(const torch::Tensor& positions) const;
  /// Exact RPE-masked softmax weights softmax(q k^T / sqrt(D) + N) (causal mask when asked).
  /// q: (B, H, L, D)  k: (B, H, L, D) -> (B, H, L, L)
  torch::Tensor exact_attention(const torch::Tensor& q, const torch::Tensor& k,
                                const AttentionCall& call = {}) const;
  /// g at frequencies, per head. xi: (N, l) -> (H, N)
  torch::Tensor spectrum(const torch::Tensor& xi) const;
  /// f at offsets, per head. delta: (N, l) -> (H, N)
  torch::Tensor rpe_function(const torch::Tensor& delta) const;
  /// Trainable scalars of the RPE part (spectrum, plus the proposal scale when learnt).
  int64_t rpe_parameter_count() const;
  /// The frequencies xi_t = s z_t in use. -> (H, r, l)
  torch::Tensor frequencies() const;
  /// The proposal density p the frequencies are drawn from (a_t = g(xi_t) / p(xi_t)); with
  /// `spectrum`, sup |g| / p is the constant c of Thm 4.2. xi: (..., l) -> (...)
  torch::Tensor proposal_density(const torch::Tensor& xi) const;

  /// Streaming, as for Performer. positions: (T, l) or (B, T, l); undefined means the token indices
  /// steps .. steps + T - 1 (append) and steps - T .. steps - 1 (read, i.e. the latest tokens; so
  /// reading more queries than tokens appended needs explicit positions).
  /// k: (B, H, T, D)  v: (B, H, T, Dv)
  void append(LinearAttentionState& state, const torch::Tensor& k, const torch::Tensor& v,
              const torch::Tensor& positions = {}) const;
  /// q: (B, H, T, D) -> (B, H, T, Dv)
  torch::Tensor read(const LinearAttentionState& state, const torch::Tensor& q,
                     const torch::Tensor& positions = {}) const;

  RpeSpectrum rpe{nullptr};
  FeatureMap feature_map{nullptr};
  torch::Tensor base_frequencies;    ///< z: (H, r, l) standard draws of the proposal (buffer)
  torch::Tensor log_proposal_sigma;  ///< log s: scalar (parameter when learnt, else buffer)

 private:
  torch::Tensor positions_for(const char* fn, const torch::Tensor& positions,
                              const torch::Tensor& x, int64_t first_index) const;
  void draw_frequencies(uint64_t seed);
};
TORCH_MODULE(FLTAttention);

/// A spectrum family with its names, for menus and command lines.
struct SpectrumFamilyInfo {
  SpectrumFamily family;
  std::string name;          ///< spectrum_family_name(family), e.g. "gaussian_mixture"
  std::string display_name;  ///< for people, e.g. "Gaussian mixture"
};
/// Every SpectrumFamily in enum order. Tools list the families from here, so a new family shows up
/// in them without a change there.
const std::vector<SpectrumFamilyInfo>& spectrum_families();

}  // namespace flt::attention
