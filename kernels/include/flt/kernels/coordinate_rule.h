#pragma once
// The constants of the learned optimizer's first design (flt/optim/learned_model.h), per
// coordinate: one copy for its composite reference (LearnedOptimizerModelImpl::step, in double and
// float tensors), its fused CPU step (flt/kernels/coordinate_step.h) and the per-tensor controller
// around them (optimizer/rules/src/learned_rule.h). Plain C++, no LibTorch.

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace flt::kernels::coordinate {

/// Input features of the head (without the memory's read-out): g / rms, m1 / rms, m2 / rms and the
/// log-and-sign encodings of g, m1, rms and p.
constexpr int64_t kFeatures = 10;
/// Moment slots at the start of a coordinate's state: m1, m2, v.
constexpr int64_t kMoments = 3;
/// EMA decays of the moments: m1 of g (Adam's beta1), m2 of g (a slower momentum), v of g^2
/// (Adam's beta2).
constexpr double kBeta1 = 0.9, kBeta2 = 0.99, kBetaV = 0.999;
/// |g| is clipped here before squaring so that v stays finite in float32 (1e18^2 = 1e36 < 3.4e38);
/// the features only see ratios and logarithms, so larger gradients change nothing downstream.
constexpr double kMaxGradient = 1e18;
/// Added under the square root of rms = sqrt(v_hat + eps): finite ratios for an all-zero history.
constexpr double kRmsEpsilon = 1e-30;
/// The ratio features g / rms, m1 / rms, m2 / rms are clipped to [-kRatioClip, kRatioClip].
constexpr double kRatioClip = 10.0;
/// The head's log-magnitude a is squashed to (-kMaxLogMagnitude, kMaxLogMagnitude) by
/// kMaxLogMagnitude * tanh(a / kMaxLogMagnitude): the head reshapes the step within a tensor (up to
/// e^2 = 7.4x either way) while the per-tensor controller owns its overall size.
constexpr double kMaxLogMagnitude = 2.0;
/// The head's additive correction to the Adam direction is multiplied by
///   gate = min(1, max(|g / rms|, |m1 / rms|, |m2 / rms|)),
/// the largest of the normalised gradient features: 1 while the coordinate has gradient signal,
/// vanishing with it, so that no gradient means no step, as in Adam (a fitted network otherwise
/// keeps moving on the head's bias alone; test VanishingGradients_StopTheRule).
inline float correction_gate(float g_ratio, float m1_ratio, float m2_ratio) {
  return std::min(1.0f, std::max({std::fabs(g_ratio), std::fabs(m1_ratio), std::fabs(m2_ratio)}));
}
/// Threshold exponent k of the log-and-sign encodings (threshold e^-k).
constexpr double kLogSignK = 5.0;
/// Floor of the attention memory's normaliser phi_q . z (positive features; guards underflow).
constexpr double kReadFloor = 1e-20;
/// Per-coordinate terms summed over a tensor after each step for its step-size controller:
/// g d_prev, g^2, d_prev^2, p_new^2, with d_prev = m1 / sqrt(v) of the old state.
constexpr int64_t kStatistics = 4;
/// Added to the cosine's denominators (an all-zero previous direction gives 0).
constexpr double kCosineEpsilon = 1e-30;

}  // namespace flt::kernels::coordinate
