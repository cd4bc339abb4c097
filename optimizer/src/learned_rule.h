#pragma once
// Constants of the learned update rule (learned_model.h), shared by its composite reference
// (LearnedOptimizerModelImpl::step, learned_model.cpp) and its fused inference path
// (learned_step_fused.cpp), so the two cannot drift apart. Internal to the library.

namespace flt::optim::detail {

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
/// The head's log-magnitude a is clipped to [-kMaxLogMagnitude, kMaxLogMagnitude].
constexpr double kMaxLogMagnitude = 6.0;
/// Threshold exponent k of the log-and-sign encodings (threshold e^-k).
constexpr double kLogSignK = 5.0;
/// Floor of the attention memory's normaliser phi_q . z (positive features; guards underflow).
constexpr double kReadFloor = 1e-20;

}  // namespace flt::optim::detail
