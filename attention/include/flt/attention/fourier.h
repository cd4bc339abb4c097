#pragma once
// Fourier attention (FourierFormer, Nguyen et al. 2022, Definition 1 / eq. 15):
//   K_ij = prod_d phi( sin(R_d (q_id - k_jd)) / (R_d (q_id - k_jd)) ),  out_i = sum_j K_ij v_j /
//   sum_j K_ij
// R is used through |R| (s is even). The computation is kernels::fourier_attention_op: the fused
// CPU / CUDA kernel, or the composite reference for other dtypes and for sigmoid phi.
// A row whose every weight is exactly zero (ReLU phi, or every key on a zero of sin) outputs 0.

#include <torch/arg.h>

#include "flt/attention/attention.h"
#include "flt/kernels/fourier_attention.h"

namespace flt::attention {

using kernels::FourierPhi;

/// Default power p of phi(x) = x^p (Table 7 of the supplement: 4 and 6 are best), for the options
/// and every functional form.
constexpr int64_t kFourierPower = 4;

/// The R at which Fourier attention has softmax attention's temperature on the same q and k:
/// phi(sin x / x) = exp(-(c/6) x^2 + O(x^4)) with c = p for x^p, |x|^p and relu(x)^p and
/// c = 1 - sigmoid(1) for the sigmoid, so the kernel is exp(-(c/6) R^2 |q - k|^2) near q = k, whose
/// q.k term exp((c/3) R^2 q.k) equals softmax's exp(q.k / sqrt(D)) when R = sqrt(3 / (c sqrt(D))).
/// 0.43 for p = 4, D = 16. A bandwidth in q - k's own units, like a KDE's rule: the paper's R = 2
/// (for its q and k) is 21x softmax's temperature here, and a character LM trained with it was 24%
/// behind softmax; with this R it was 3% ahead (docs/reproductions.md, lesson 8).
double fourier_softmax_matched_r(int64_t head_dim, int64_t power = kFourierPower,
                                 FourierPhi phi = FourierPhi::kPower);

/// How many R values the module learns.
enum class FourierRShape {
  kScalar,            ///< one R for all heads and dimensions (the paper's main setting)
  kPerDimension,      ///< R_d shared by the heads: shape (D) (the supplement's "R is a vector")
  kPerHead,           ///< one R per head: shape (H, 1)
  kPerHeadDimension,  ///< R_{h,d}: shape (H, D)
};

/// out = Fourier attention of q, k, v. `R`: a scalar (0-d or (1)), (D), (H, 1) or (H, D); its
/// absolute value is used, so every entry must be finite and nonzero (R = 0 weighs every key
/// equally whatever q and k). `power` >= 1 (<= 32); odd powers give signed weights (warned once).
/// q: (B, H, Lq, D)  k: (B, H, Lk, D)  v: (B, H, Lk, Dv)  R: see above -> (B, H, Lq, Dv)
torch::Tensor fourier_attention(const torch::Tensor& q, const torch::Tensor& k,
                                const torch::Tensor& v, const torch::Tensor& R,
                                int64_t power = kFourierPower, bool causal = false,
                                FourierPhi phi = FourierPhi::kPower);

/// The normalised kernel matrix K_ij / sum_j K_ij (zero rows where every weight vanishes).
/// q: (B, H, Lq, D)  k: (B, H, Lk, D)  R: as in fourier_attention -> (B, H, Lq, Lk)
torch::Tensor fourier_attention_weights(const torch::Tensor& q, const torch::Tensor& k,
                                        const torch::Tensor& R, int64_t power = kFourierPower,
                                        bool causal = false, FourierPhi phi = FourierPhi::kPower);

/// |R| broadcast to (H, D) from any accepted shape; throws a message naming the bad shape.
/// R: (), (1), (D), (H, 1) or (H, D) -> (H, D)
torch::Tensor fourier_r_per_head_dim(const char* fn, const torch::Tensor& R, int64_t heads,
                                     int64_t head_dim);

// ---- The estimators behind the attention (FourierFormer Sec. 3.1-3.2) ------------------------
// Fourier attention is the Nadaraya-Watson regression estimator built on the generalized Fourier
// density estimator (eq. 12, 14). These functions expose both estimators for samples in R^D so
// they can be checked against the densities and functions they estimate (Kernel Explorer).

/// A = integral over R of phi(sin z / z) dz, the normaliser of the generalized Fourier density
/// estimator, in closed form: phi = s^p (any p >= 1) and phi = |s|^p with p even. Other phi
/// (|s|, ReLU, sigmoid: A diverges or has no closed form) throw a message naming phi and p.
double fourier_kernel_integral(int64_t power = kFourierPower, FourierPhi phi = FourierPhi::kPower);

/// The generalized Fourier density estimator (FourierFormer eq. 12) at `points`:
///   p(x) = R^D / (N A^D) sum_i prod_d phi( sin(R (x_d - k_id)) / (R (x_d - k_id)) ).
/// It integrates to 1 over R^D for every phi with finite A; odd powers can go negative. Evaluated
/// through fourier_attention (the same kernel numerics as the attention). R > 0, finite.
/// points: (P, D)  samples: (N, D) -> (P)
torch::Tensor fourier_density_estimate(const torch::Tensor& points, const torch::Tensor& samples,
                                       double R, int64_t power = kFourierPower,
                                       FourierPhi phi = FourierPhi::kPower);

/// The Gaussian kernel density estimate with an isotropic bandwidth h > 0 (the estimator behind
/// softmax attention, FourierFormer eq. 5): p(x) = (1/N) sum_i N(x; k_i, h^2 I).
/// points: (P, D)  samples: (N, D) -> (P)
torch::Tensor gaussian_kde(const torch::Tensor& points, const torch::Tensor& samples,
                           double bandwidth);

/// The generalized Fourier nonparametric regression estimator (FourierFormer eq. 14): Fourier
/// attention with queries = points, keys = samples, values = targets. Where every weight
/// vanishes the estimate is 0 (as in fourier_attention).
/// points: (P, D)  samples: (N, D)  targets: (N, Dv) -> (P, Dv)
torch::Tensor fourier_regression_estimate(const torch::Tensor& points, const torch::Tensor& samples,
                                          const torch::Tensor& targets, double R,
                                          int64_t power = kFourierPower,
                                          FourierPhi phi = FourierPhi::kPower);

struct FourierAttentionOptions {
  static constexpr const char* kName = "fourier";
  /// Heads H and head dim D; 0 means "set by the container" (attention.h). A per-head R needs
  /// heads, a per-dimension R needs head_dim.
  FLT_ATTENTION_DIMS_OPTIONS;
  /// Initial R, positive and finite; 0 (default): fourier_softmax_matched_r of the head dim, phi
  /// and power (the head dim from head_dim, or from q at the first call when head_dim is 0). The
  /// paper's values (2 for language, 1 for images, supplement Table 8) assume its q and k scale.
  TORCH_ARG(double, r_init) = 0.0;
  /// Scalar, per-dimension, per-head or per-head-and-dimension R.
  TORCH_ARG(FourierRShape, r_shape) = FourierRShape::kScalar;
  /// Whether R is a trainable parameter (else a buffer).
  TORCH_ARG(bool, learn_r) = true;
  /// phi(x) = x^power (Table 7: odd powers diverge, 4 and 6 are best).
  TORCH_ARG(int64_t, power) = kFourierPower;
  /// The function phi (power by default; abs, ReLU, sigmoid for ablations).
  TORCH_ARG(FourierPhi, phi) = FourierPhi::kPower;
};

class FourierAttentionImpl : public AttentionModule<FourierAttentionImpl, FourierAttentionOptions> {
  FLT_ATTENTION_MODULE_MEMBERS(FourierAttentionImpl, FourierAttentionOptions);

  /// R as learned (sign included; used through |R|): (1), (D), (H, 1) or (H, D).
  torch::Tensor R;

 private:
  /// r_init 0 without head_dim: R takes its value from the first call's D. A buffer (saved and
  /// loaded with R), present only then.
  torch::Tensor r_pending_;
  void resolve_r(const torch::Tensor& q);
};
TORCH_MODULE(FourierAttention);

}  // namespace flt::attention
