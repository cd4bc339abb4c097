#pragma once
// SchoenbAt (Guo et al. 2025): kernelised attention out_i = sum_j K(<q_i, k_j>) v_j / sum_j K(<q_i,
// k_j>) for a dot-product kernel K(t) = sum_n a_n t^n (Schoenberg), estimated with random Maclaurin
// features (Kar & Karnick 2012), between the ppSBN pre- and post-normalisations.
//
// Random Maclaurin features with degrees truncated at P = max_degree: each of the F features draws
// a degree N with P[N = n] = 2^{-(n+1)} / Z, n = 0..P, Z = 1 - 2^{-(P+1)} (the paper's p = 2 law,
// renormalised to the truncation), and N Rademacher vectors w_j; its value is
//   phi(x) = sqrt(a_N / (F P[N = n])) prod_{j <= N} <w_j, x>.
// Then E[phi(x).phi(y)] = sum_{n <= P} a_n <x,y>^n exactly (E[<w,x><w,y>] = <x,y>): unbiased for
// the truncated series K_P; with |<x,y>| <= 1/sqrt(D) after ppSBN the tail K - K_P is below max_n
// a_n * D^{-(P+1)/2} / (1 - D^{-1/2}) (about 1e-9 for D = 64, P = 8).
//
// ppSBN pre: standardise every q and k feature over batch and length (causal: over batch and the
// positions <= i only, so no future token leaks), scale rows to unit norm, then by D^{-1/4}:
// |<q~, k~>| <= D^{-1/2} < 1, inside the radius of convergence of every kernel here.
// ppSBN post: gamma sign(x) |x|^beta per head (a plain power of a negative number is NaN).
// Normaliser: Maclaurin features are signed, so the estimate of sum_j K can be <= 0 although every
// exact term is >= K(-D^{-1/2}) > 0. It is raised to `normaliser_floor` * n_i * K(-D^{-1/2}), n_i
// the number of keys query i sees: a fraction of the smallest value the exact normaliser can take.

#include <torch/arg.h>

#include <string>
#include <vector>

#include "flt/attention/attention.h"

namespace flt::attention {

/// The kernels: "exp" e^t, "inv" 1/(1-t), "logi" 1 - log(1-t), "trigh" sinh t + cosh t,
/// "sqrt" 2 - sqrt(1-t).
const std::vector<std::string>& schoenberg_kernels();
/// Maclaurin coefficients a_0..a_{max_degree} of a kernel (derived in schoenbat.cpp); throws
/// naming an unknown kernel.
std::vector<double> maclaurin_coefficients(const std::string& kernel, int64_t max_degree);
/// K(t) in closed form. t: (...) -> (...)
torch::Tensor schoenberg_kernel(const std::string& kernel, const torch::Tensor& t);

/// Exact kernelised attention sum_j K(<q_i,k_j>) v_j / sum_j K(<q_i,k_j>) (no normalisation of q,
/// k). q: (B, H, Lq, D)  k: (B, H, Lk, D)  v: (B, H, Lk, Dv) -> (B, H, Lq, Dv)
torch::Tensor kernelized_attention(const torch::Tensor& q, const torch::Tensor& k,
                                   const torch::Tensor& v, const std::string& kernel,
                                   bool causal = false);

/// Default variance floor of the ppSBN pre-normalisation (options and functional form).
constexpr double kSbnEps = 1e-5;
/// Without ppSBN, q and k rows longer than this are scaled back to it: |<q, k>| <= 1/2.
constexpr double kRawInputRadius = 0.70710678118654752;

/// ppSBN pre-normalisation: standardise per feature over batch and length (prefix only when
/// causal; statistics in double), unit rows, times D^{-1/4}. A row that standardises to exactly 0
/// (one token in its statistics) stays 0 with zero gradient; one whose statistics saw a NaN is NaN.
/// eps > 0, finite.
/// x: (B, H, L, D) -> (B, H, L, D)
torch::Tensor ppsbn_pre(const torch::Tensor& x, bool causal, double eps = kSbnEps);

struct SchoenbAttentionOptions {
  static constexpr const char* kName = "schoenbat";
  /// Dot-product kernel: exp, inv, logi, trigh or sqrt.
  TORCH_ARG(std::string, kernel) = "exp";
  /// Random Maclaurin features F (> 0).
  TORCH_ARG(int64_t, features) = 64;
  /// Truncation degree P of the series (>= 1).
  TORCH_ARG(int64_t, max_degree) = 8;
  /// Apply ppSBN (pre and post). Off gives plain RMFA on q and k as given inside the ball of
  /// radius kRawInputRadius and radially clipped to it outside (|<q, k>| <= 1/2: every kernel's
  /// series converges there and the estimate stays bounded; unclipped raw inputs made training
  /// loss non-finite within a few hundred steps).
  TORCH_ARG(bool, ppsbn) = true;
  /// Variance floor of the pre-normalisation (positive, finite).
  TORCH_ARG(double, sbn_eps) = kSbnEps;
  /// Fraction of the smallest exact normaliser below which the estimate is raised (see above).
  TORCH_ARG(double, normaliser_floor) = 0.5;
  /// Initial post-normalisation gamma and beta (finite).
  TORCH_ARG(double, gamma) = 1.0;
  TORCH_ARG(double, beta) = 1.0;
  /// Seed of the initial draw.
  TORCH_ARG(uint64_t, seed) = 0;
  /// Heads H and head dim D; 0 means "set by the container" (attention.h). gamma and beta are per
  /// head and the features are sized by D, so a module used alone needs both.
  FLT_ATTENTION_DIMS_OPTIONS;
};

class SchoenbAttentionImpl : public AttentionModule<SchoenbAttentionImpl, SchoenbAttentionOptions> {
  /// materialize gives the approximate attention matrix before the post power (which acts on
  /// outputs, not weights).
  FLT_ATTENTION_MODULE_MEMBERS(SchoenbAttentionImpl, SchoenbAttentionOptions);

  void redraw(uint64_t seed);

  /// Random Maclaurin features of (normalised) inputs. x: (..., L, D) -> (..., L, F)
  torch::Tensor features(const torch::Tensor& x) const;
  /// RMFA without ppSBN post (inputs used as given). q: (B, H, Lq, D) ... -> (B, H, Lq, Dv)
  torch::Tensor rmfa(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                     bool causal) const;
  /// gamma sign(x) |x|^beta per head. x: (B, H, L, Dv) -> (B, H, L, Dv)
  torch::Tensor post(const torch::Tensor& x) const;

  torch::Tensor rademacher;    ///< (F, P, D) +-1 buffer
  torch::Tensor degree_mask;   ///< (F, P) 1 where j < N_f (the factors used), buffer
  torch::Tensor coefficients;  ///< (F) sqrt(a_N / (F P[N])), buffer
  torch::Tensor gamma, beta;   ///< (H) trainable
};
TORCH_MODULE(SchoenbAttention);

}  // namespace flt::attention
