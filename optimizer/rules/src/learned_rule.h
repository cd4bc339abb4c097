#pragma once
// Constants and per-tensor formulas of the learned update rule (learned_model.h), shared by its
// composite reference (LearnedOptimizerModelImpl::step, learned_model.cpp), its fused inference
// path (learned_step_fused.cpp over flt/kernels/coordinate_step.h) and the optimizer
// (coordinate_mnemosyne.cpp), so they cannot drift apart.
// Internal to the library.

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "flt/kernels/coordinate_rule.h"

namespace flt::optim::detail {

// The per-coordinate constants (EMA decays, clips, the correction gate, the encodings' threshold,
// the read's floor, the controller's statistics) are the fused step's:
// flt/kernels/coordinate_rule.h.
using kernels::coordinate::correction_gate;
using kernels::coordinate::kBeta1, kernels::coordinate::kBeta2, kernels::coordinate::kBetaV;
using kernels::coordinate::kCosineEpsilon, kernels::coordinate::kStatistics;
using kernels::coordinate::kLogSignK, kernels::coordinate::kMaxGradient;
using kernels::coordinate::kMaxLogMagnitude, kernels::coordinate::kRatioClip;
using kernels::coordinate::kReadFloor, kernels::coordinate::kRmsEpsilon;
/// The gate on tensors (the composite reference's): see correction_gate(float, ...).
inline at::Tensor correction_gate(const at::Tensor& g_ratio, const at::Tensor& m1_ratio,
                                  const at::Tensor& m2_ratio) {
  return at::clamp_max(at::maximum(at::maximum(g_ratio.abs(), m1_ratio.abs()), m2_ratio.abs()),
                       1.0);
}

// ---- the per-tensor step-size controller ------------------------------------------------------
//
// Every parameter tensor has its own step size
//   eta = rho * sqrt(min(mean(p^2), 16 mean(p_0^2)) + floor^2) * exp(c) * anneal(t / total_steps),
// relative to the tensor's own scale (as Adafactor's relative step: no learning rate to tune across
// problems whose weights live at different scales), with a log-multiplier c that a hypergradient
// signal steers: after each step, h = cos(g_t, d_{t-1}) (the new gradient against the previous
// Adam direction m1 / sqrt(v) of the whole tensor) and
//   c <- clamp(c + kappa (h - target), kMinLogMultiplier, kMaxLogMultiplier).
// While successive steps agree (h > target) the step grows; under gradient noise (h ~ 0) or
// oscillation (h < 0) it shrinks geometrically, which is what lets a run settle: with pure-noise
// gradients the total displacement is a convergent geometric sum. rho, floor, kappa and target are
// meta-parameters; kappa and target are kMinGain and kMinTarget plus a learned positive part, so
// that no meta-training can remove the settling (PES on horizons up to 2000 steps once drove an
// unconstrained target to -0.02: the step then grows under pure noise, which no horizon it saw
// punished): with pure noise c falls by at least kMinGain * kMinTarget = 9e-4 a step.

/// Per-tensor controller state: [c, mean(p^2) after the last step, last cosine h, mean(p^2) at the
/// start, long-run mean(g^2)].
constexpr int64_t kTensorState = 5;
/// The reference scale follows the tensor's RMS up to this factor over its starting RMS: without
/// the cap the scale follows a random walk outward (pure noise: RMS 0.01 -> 1.2 in 5000 steps, the
/// step growing with it faster than the controller shrank it), with it the feedback is bounded.
constexpr double kMaxScaleGrowth = 4.0;
/// Decay of the long-run mean square of the tensor's gradient (Adam's beta2: about 1000 steps).
/// The cosine only counts as agreement in proportion to signal = min(1, sqrt(mean(g^2) / long-run
/// mean(g^2))): on a fitted network (training loss ~0) the last tiny gradients still agree from
/// step to step (they all grow the margins), and without this the controller read that as progress
/// and raised the step e^3-fold (breast-cancer MLP: held-out loss 0.05 -> 2.5). A gradient 25x
/// below its long-run RMS no longer beats the target and the step shrinks.
constexpr double kBetaLongGradient = 0.999;
/// Bounds of the log-multiplier c: the step grows at most e^3 = 20x over its relative start; it can
/// shrink to nothing in practice (e^-30).
constexpr double kMinLogMultiplier = -30.0, kMaxLogMultiplier = 3.0;
/// Lower bounds of the gain kappa and the target of the cosine (see above).
constexpr double kMinGain = 0.03, kMinTarget = 0.03;

inline double exp_of(double x) {
  return std::exp(x);
}
inline at::Tensor exp_of(const at::Tensor& x) {
  return at::exp(x);
}
inline double sqrt_of(double x) {
  return std::sqrt(x);
}
inline at::Tensor sqrt_of(const at::Tensor& x) {
  return at::sqrt(x);
}
inline double min_of(double a, double b) {
  return std::min(a, b);
}
inline at::Tensor min_of(const at::Tensor& a, const at::Tensor& b) {
  return at::minimum(a, b);
}
inline double clamp_to(double x, double lo, double hi) {
  return std::clamp(x, lo, hi);
}
inline at::Tensor clamp_to(const at::Tensor& x, double lo, double hi) {
  return at::clamp(x, lo, hi);
}

/// Cosine annealing to 0 over a known run length (total_steps > 0); 1 when the length is unknown.
inline double anneal(int64_t t, int64_t total_steps) {
  if (total_steps <= 0) return 1.0;
  const double f = std::min(1.0, static_cast<double>(t - 1) / static_cast<double>(total_steps));
  return 0.5 * (1.0 + std::cos(M_PI * f));
}

/// The step size of a tensor. T = double (inference) or at::Tensor (meta-training: differentiable
/// in the meta-parameters log_rho and log_floor).
template <typename T>
T controller_step_size(const T& log_multiplier, const T& mean_square, const T& initial_mean_square,
                       const T& log_rho, const T& log_floor, double annealing) {
  const T capped = min_of(mean_square, initial_mean_square * (kMaxScaleGrowth * kMaxScaleGrowth));
  return exp_of(log_rho + log_multiplier) * sqrt_of(capped + exp_of(log_floor * 2.0)) * annealing;
}

inline double where_positive(double test, double yes, double no) {
  return test > 0.0 ? yes : no;
}
inline at::Tensor where_positive(const at::Tensor& test, const at::Tensor& yes,
                                 const at::Tensor& no) {
  return at::where(test > 0.0, yes, no);
}

/// The next controller state from the tensor's summed statistics (g d_prev, g^2, d_prev^2) and its
/// size; kappa = kMinGain + exp(log_gain), target = kMinTarget + exp(log_target). Returns
/// {c, cosine, long-run mean(g^2)}.
template <typename T>
std::tuple<T, T, T> controller_update(const T& log_multiplier, const T& long_grad_square,
                                      const T& dot, const T& grad_square, const T& direction_square,
                                      const T& numel, const T& log_gain, const T& log_target) {
  // Clamped: Cauchy-Schwarz bounds the exact cosine, but float underflow does not (a gradient of
  // 1e-20 has g d ~ 1e-10 while g^2 flushes to 0), and one unbounded cosine on a fitted network
  // would throw c across its range in a single step (test VanishingGradients_StopTheRule).
  const T cosine =
      clamp_to(dot / (sqrt_of(grad_square * direction_square) + kCosineEpsilon), -1.0, 1.0);
  const T mean_grad_square = grad_square / numel;
  const T long_run = where_positive(
      long_grad_square,
      long_grad_square * kBetaLongGradient + mean_grad_square * (1.0 - kBetaLongGradient),
      mean_grad_square);
  const T signal = clamp_to(sqrt_of(mean_grad_square / (long_run + kCosineEpsilon)), 0.0, 1.0);
  const T gain = exp_of(log_gain) + kMinGain, target = exp_of(log_target) + kMinTarget;
  const T next = clamp_to(log_multiplier + gain * (signal * cosine - target), kMinLogMultiplier,
                          kMaxLogMultiplier);
  return {next, cosine, long_run};
}

}  // namespace flt::optim::detail
