#pragma once
// The per-coordinate rule of the learned optimizer's second design (flt/optim/learned_schedule.h),
// one copy for the vectorised CPU loop and the CUDA kernel (plain C++: no LibTorch, so nvcc
// compiles it alone). Per coordinate, Adam's two moments and the tensor's decisions of this step:
//
//   d_prev = m / (sqrt v + eps)                                       (last step's direction)
//   m <- beta1 m + (1 - beta1) g,  v <- beta2 v + (1 - beta2) g^2
//   a = clip(m bc1 / (sqrt(v bc2) + eps)),  b = clip(g / (sqrt(v bc2) + eps))   (clip to +-10)
//   p <- keep p - eta (a + gain (out_bias + sum_j out_j softsign(in_a_j a + in_b_j b + bias_j)))
//
// A non-finite gradient or step leaves the coordinate and its moments unchanged (`ok` false).
// Written with ternaries and the C float functions only, so GCC vectorises the CPU loop around it
// (the std::min / std::max it replaces compile to the same selects) and nvcc compiles it as is.

#include <cfloat>
#include <cmath>

// Inlined into every caller: the CPU loop's per-micro-architecture clones (flt/detail/cpu_clones.h)
// each vectorise their own copy.
#if defined(__CUDACC__)
#define FLT_RULE_INLINE __host__ __device__ __forceinline__
#elif defined(__GNUC__)
#define FLT_RULE_INLINE inline __attribute__((always_inline))
#else
#define FLT_RULE_INLINE inline
#endif

namespace flt::kernels::schedule {

constexpr int kCorrectorHidden = 4;
/// The rule's constants (LearnedScheduleImpl's, whose composite reference takes them in double;
/// the fused passes round them to float once, below).
constexpr double kBeta1 = 0.9, kBeta2 = 0.999, kEpsilon = 1e-8, kRatioClip = 10.0;

/// What one pass reads besides the coordinates: the corrector's 17 weights and the moments' bias
/// corrections at this step (the same for every tensor of a step).
struct RuleConstants {
  float in_a[kCorrectorHidden], in_b[kCorrectorHidden], bias[kCorrectorHidden],
      out[kCorrectorHidden], out_bias;
  float bc1, bc2;  ///< 1 / (1 - beta^t) of the two moments
};

/// One tensor's decisions of this step.
struct TensorDecision {
  float eta, keep, gain;  ///< step size, 1 - shrink, correction gain
};

/// One coordinate after the step, and what its tensor's statistics add up: the gradient (0 where
/// the coordinate was left unchanged, as the composite step counts it), the last step's direction
/// and the parameter as it now is.
struct Coordinate {
  float param, m, v;
  float grad, d_prev;
  bool ok;
};

/// softsign x / (1 + |x|): the corrector's unit, exact and cheap in a vectorised loop.
FLT_RULE_INLINE float softsign(float x) {
  return x / (1.0f + fabsf(x));
}

FLT_RULE_INLINE float clip_ratio(float x) {
  constexpr float clip = static_cast<float>(kRatioClip);
  const float low = x < -clip ? -clip : x;
  return clip < low ? clip : low;
}

FLT_RULE_INLINE Coordinate step_coordinate(const RuleConstants& c, const TensorDecision& t,
                                           float g_raw, float p, float m0, float v0) {
  constexpr float beta1 = static_cast<float>(kBeta1), beta2 = static_cast<float>(kBeta2),
                  eps = static_cast<float>(kEpsilon);
  const bool finite_grad = fabsf(g_raw) <= FLT_MAX;  // false for NaN and +-Inf
  const float g = finite_grad ? g_raw : 0.0f;
  const float d_prev = m0 / (sqrtf(v0) + eps);
  const float m = beta1 * m0 + (1 - beta1) * g;
  const float v = beta2 * v0 + (1 - beta2) * g * g;
  const float denominator = sqrtf(v * c.bc2) + eps;
  const float a = clip_ratio(m * c.bc1 / denominator);
  const float b = clip_ratio(g / denominator);
  float correction = c.out_bias;
  for (int j = 0; j < kCorrectorHidden; ++j)
    correction += c.out[j] * softsign(c.in_a[j] * a + c.in_b[j] * b + c.bias[j]);
  const float next = t.keep * p - t.eta * (a + t.gain * correction);
  const bool ok = finite_grad && fabsf(next) <= FLT_MAX;
  return {ok ? next : p, ok ? m : m0, ok ? v : v0, ok ? g : 0.0f, d_prev, ok};
}

/// The statistics a pass adds up per tensor, in this order: sum g d_prev, g^2, d_prev^2, p_new^2,
/// and the count of coordinates left unchanged.
constexpr int kSums = 5;

}  // namespace flt::kernels::schedule
