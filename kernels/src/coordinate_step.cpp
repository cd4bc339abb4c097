// The fused CPU step of the coordinate rule (coordinate_step.h): no intermediate tensors, OpenMP
// over blocks of coordinates. The composite LearnedOptimizerModelImpl::step stays the readable
// reference (meta-training differentiates through it); tests compare the two.
//
// Why it is laid out this way: the rule costs ~500 multiply-adds and ~50 exp/log/tanh per
// coordinate, so a scalar loop with libm calls is ~60x slower than Adam. Coordinates are therefore
// processed kLanes at a time in structure-of-arrays scratch (the optimizer keeps the state
// slot-major, (S, N), so each slot of a block is one contiguous vector load and store), every inner
// loop runs over the kLanes coordinates so it vectorises as a loop (`omp simd`), and exp/log/tanh
// are branch-free polynomial or rational versions (below) that vectorise, unlike libm's.
#include "flt/kernels/coordinate_step.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "flt/detail/cpu_clones.h"  // FLT_CLONES_AVX512 (16 lanes = one AVX-512 register)

// The loop over the coordinates of a block: vectorised as a loop (not unrolled and re-packed).
#define FOR_LANES(l) _Pragma("omp simd") for (int64_t l = 0; l < kLanes; ++l)

namespace flt::kernels::coordinate {
namespace {

// The rule's constants (coordinate_rule.h) in float. The EMA complements are rounded from the exact
// values: 1 - 0.999f in float is 0.00099998713, a 1.3e-5 relative bias on every v update (measured
// against the double reference).
constexpr float kDecay1 = kBeta1, kDecay2 = kBeta2, kDecayV = kBetaV;
constexpr float kGain1 = 1.0 - kBeta1, kGain2 = 1.0 - kBeta2, kGainV = 1.0 - kBetaV;
constexpr float kMaxGradientF = kMaxGradient, kRatioClipF = kRatioClip;
constexpr float kMaxLogMagnitudeF = kMaxLogMagnitude, kLogSignKF = kLogSignK;
constexpr float kRmsEpsilonF = kRmsEpsilon, kReadFloorF = kReadFloor;
constexpr float kCosineEpsilonF = kCosineEpsilon;
constexpr int64_t kLanes = 16;  // coordinates per block: one AVX-512 or two AVX2 registers

// ---- branch-free float math (vectorisable; accurate to a few ulp on the ranges used) ------------

FLT_INLINE float from_bits(int32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
FLT_INLINE int32_t to_bits(float f) {
  int32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}
FLT_INLINE bool is_finite(float x) {
  return (to_bits(x) & 0x7f800000) != 0x7f800000;
}
FLT_INLINE float clip(float x, float bound) {
  return std::min(bound, std::max(-bound, x));
}

/// e^x: x = n ln2 + r with |r| <= ln2 / 2 (ln2 split in two for an exact n ln2), e^r by its Taylor
/// polynomial to r^7 (truncation < 2e-8 relative), 2^n through the exponent bits. Inputs are
/// clamped to [-87, 88], so the result is a normal float (e^-87 stands in for anything smaller).
FLT_INLINE float exp_approx(float x) {
  x = std::min(88.0f, std::max(-87.0f, x));
  // n = round(x / ln2) by the 1.5 * 2^23 trick: the sum's low mantissa bits hold n.
  const float shifted = x * 1.44269504088896341f + 12582912.0f;
  const int32_t n = to_bits(shifted) - 0x4b400000;
  const float nf = shifted - 12582912.0f;
  const float r = (x - nf * 0.693145751953125f) - nf * 1.428606765330187e-06f;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  return p * from_bits((n + 127) << 23);
}

/// log x for normal x > 0: x = 2^e m with m in [sqrt(1/2), sqrt(2)), log m = 2 atanh(s),
/// s = (m - 1) / (m + 1), |s| <= 0.172, by its odd series to s^9 (truncation < 1e-9).
FLT_INLINE float log_approx(float x) {
  const int32_t bits = to_bits(x);
  int32_t e = ((bits >> 23) & 0xff) - 127;
  float m = from_bits((bits & 0x007fffff) | 0x3f800000);  // [1, 2)
  const bool high = m > 1.41421356f;
  m = high ? 0.5f * m : m;
  e = high ? e + 1 : e;
  const float s = (m - 1.0f) / (m + 1.0f), s2 = s * s;
  float p = 1.0f / 9.0f;
  p = p * s2 + 1.0f / 7.0f;
  p = p * s2 + 1.0f / 5.0f;
  p = p * s2 + 1.0f / 3.0f;
  p = p * s2 + 1.0f;
  return static_cast<float>(e) * 0.693147180559945f + 2.0f * s * p;
}

/// tanh x = x P(x^2) / Q(x^2) on |x| <= 9 (tanh 9 = 1 in float), a (5, 4) rational fitted to
/// tanh(x)/x by weighted least squares (Sanathanan-Koerner iterations in double precision on 4000
/// points of [0, 9]; dev/fit_tanh_rational.cpp); in float over 2e6 points of [0, 10]: absolute
/// error < 3.6e-7.
/// Cheaper than 1 - 2 / (e^{2x} + 1) (step 5% faster; the head takes 32 tanh per coordinate).
FLT_INLINE float tanh_approx(float x) {
  const float c = std::min(9.0f, std::max(-9.0f, x)), y = c * c;
  float p = -1.21642089e-11f;
  p = p * y + 3.0521857e-08f;
  p = p * y + 2.79776268e-05f;
  p = p * y + 0.0038667405f;
  p = p * y + 0.136786193f;
  p = p * y + 1.0f;
  float q = 1.28539727e-06f;
  q = q * y + 0.000393591152f;
  q = q * y + 0.0272399336f;
  q = q * y + 0.470119506f;
  q = q * y + 1.0f;
  return std::min(1.0f, std::max(-1.0f, c * p / q));
}

FLT_INLINE float sigmoid_approx(float x) {
  return 1.0f / (1.0f + exp_approx(-x));
}

/// Andrychowicz et al.'s log-and-sign encoding (log_sign_encoding in learned_model.cpp).
FLT_INLINE void log_sign(float x, float& log_part, float& sign_part) {
  static_assert(kLogSignK == 5.0, "the threshold e^-k and e^k below are for k = 5");
  const float threshold = 0.006737947f;  // e^-5
  const float a = std::abs(x);
  const bool large = a >= threshold;
  log_part = large ? log_approx(std::max(a, threshold)) * (1.0f / kLogSignKF) : -1.0f;
  const float sign = x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : 0.0f);
  sign_part = large ? sign : x * 148.4131591f;  // e^5
}

// ---- the step -----------------------------------------------------------------------------------

/// A tensor's blocks: the weights and the tensor's layout (a tail block runs on padded copies with
/// its own stride) and step size.
struct BlockPlan : RuleWeights {
  int64_t slots = 0, slot_stride = 0;  // state: `slots` rows, `slot_stride` floats apart
  float step_size = 0;
};

/// Rows r0 .. r0 + R - 1 of block_affine: R independent multiply-add chains in registers.
template <int R>
FLT_INLINE void affine_rows(const float* w, const float* b, const float (*x)[kLanes], int64_t r0,
                            int64_t cols, float (*y)[kLanes]) {
  float acc[R][kLanes];
  FOR_LANES(l) {
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) acc[i][l] = b ? b[r0 + i] : 0.0f;
  }
  for (int64_t c = 0; c < cols; ++c) {
    FOR_LANES(l) {
      const float xc = x[c][l];
#pragma GCC unroll 8
      for (int i = 0; i < R; ++i) acc[i][l] += w[(r0 + i) * cols + c] * xc;
    }
  }
  FOR_LANES(l) {
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) y[r0 + i][l] = acc[i][l];
  }
}

/// y[r][l] = b[r] + sum_c w[r][c] x[c][l] over a block (w row-major (rows, cols)). The sum over c
/// is a chain of dependent multiply-adds: rows go in groups so that several independent chains
/// keep the FMA units busy instead of each waiting on the previous one's latency.
FLT_INLINE void block_affine(const float* w, const float* b, const float (*x)[kLanes], int64_t rows,
                             int64_t cols, float (*y)[kLanes]) {
  int64_t r = 0;
  for (; r + 8 <= rows; r += 8) affine_rows<8>(w, b, x, r, cols, y);
  for (; r + 4 <= rows; r += 4) affine_rows<4>(w, b, x, r, cols, y);
  for (; r < rows; ++r) affine_rows<1>(w, b, x, r, cols, y);
}

/// The FLT / Performer memory of one block: queries, keys and values from x = in[0..F), their
/// softmax-kernel features, and the memory `mem` decayed, appended to and read into `read`.
/// This is attention::LinearAttentionState's decay / append / read, one state per lane, written
/// out: a block's state lives in `mem` as one vector per slot, and the fused path exists
/// to avoid tensor operations per block (a LibTorch op costs about a microsecond to dispatch,
/// the whole step of a block of 16 coordinates less). The composite `step` calls the state
/// itself; the tests hold the two together. Layout per coordinate: S (m x Dv) row-major, z (m).
FLT_INLINE void linear_attention_memory(const RuleWeights& w, int64_t F, float (*in)[kLanes],
                                        float (*mem)[kLanes], float (*read)[kLanes]) {
  constexpr int64_t L = kLanes;
  alignas(64) float q[kMaxWidth][L], k[kMaxWidth][L], v[kMaxWidth][L];
  alignas(64) float phi_q[kMaxWidth][L], phi_k[kMaxWidth][L];
  block_affine(w.wq, w.bq, in, w.key_dim, F, q);
  block_affine(w.wk, w.bk, in, w.key_dim, F, k);
  block_affine(w.wv, w.bv, in, w.value_dim, F, v);
  float q_norm[L], k_norm[L], shift[L], denominator[L];
  FOR_LANES(l) q_norm[l] = 0.0f, k_norm[l] = 0.0f;
  for (int64_t d = 0; d < w.key_dim; ++d) {
    FOR_LANES(l) {
      q[d][l] = tanh_approx(q[d][l]) * w.quarter;
      k[d][l] = tanh_approx(k[d][l]) * w.quarter;
      q_norm[l] += 0.5f * q[d][l] * q[d][l];
      k_norm[l] += 0.5f * k[d][l] * k[d][l];
    }
  }
  FOR_LANES(l) shift[l] = -3.0e38f;
  for (int64_t f = 0; f < w.features; ++f) {
    const float* pf = w.proj + f * w.proj_cols + w.rpe_width;
    float lq[L], lk[L];
    FOR_LANES(l) lq[l] = w.rpe_q_logits[f] - q_norm[l], lk[l] = w.rpe_k_logits[f] - k_norm[l];
    for (int64_t d = 0; d < w.key_dim; ++d) {
      FOR_LANES(l) lq[l] += pf[d] * q[d][l], lk[l] += pf[d] * k[d][l];
    }
    FOR_LANES(l) {
      phi_q[f][l] = lq[l];
      phi_k[f][l] = exp_approx(lk[l]) * w.inv_sqrt_m;  // unshifted keys (bounded inputs)
      shift[l] = std::max(shift[l], lq[l]);
    }
  }
  FOR_LANES(l) denominator[l] = 0.0f;
  for (int64_t e = 0; e < w.value_dim; ++e) {
    FOR_LANES(l) read[e][l] = 0.0f;
  }
  for (int64_t f = 0; f < w.features; ++f) {
    float* z = mem[w.features * w.value_dim + f];
    FOR_LANES(l) {
      phi_q[f][l] = exp_approx(phi_q[f][l] - shift[l]) * w.inv_sqrt_m;  // per-token shift
      z[l] = w.gamma * z[l] + phi_k[f][l];
      denominator[l] += phi_q[f][l] * z[l];
    }
    for (int64_t e = 0; e < w.value_dim; ++e) {
      float* s = mem[f * w.value_dim + e];
      FOR_LANES(l) {
        s[l] = w.gamma * s[l] + phi_k[f][l] * v[e][l];
        read[e][l] += phi_q[f][l] * s[l];
      }
    }
  }
  FOR_LANES(l) denominator[l] = 1.0f / std::max(denominator[l], kReadFloorF);
  for (int64_t e = 0; e < w.value_dim; ++e) {
    FOR_LANES(l) read[e][l] *= denominator[l];
  }
}

/// The EMA memory of one block: values from x = in[0..F) averaged into `mem`, read unbiased.
FLT_INLINE void ema_memory(const RuleWeights& w, int64_t F, float (*in)[kLanes],
                           float (*mem)[kLanes], float (*read)[kLanes]) {
  constexpr int64_t L = kLanes;
  alignas(64) float v[kMaxWidth][L];
  block_affine(w.wv, w.bv, in, w.value_dim, F, v);
  for (int64_t e = 0; e < w.value_dim; ++e) {
    FOR_LANES(l) {
      mem[e][l] = w.ema_keep[e] * mem[e][l] + w.ema_gain[e] * v[e][l];
      read[e][l] = mem[e][l] * w.ema_unbias[e];
    }
  }
}

/// The LSTM memory of one block, `mem` = [h, c]: the read is the new h.
FLT_INLINE void lstm_memory(const RuleWeights& w, int64_t F, float (*in)[kLanes],
                            float (*mem)[kLanes], float (*read)[kLanes]) {
  constexpr int64_t L = kLanes;
  alignas(64) float gates[4 * kMaxWidth][L];
  // Gates i, f, g, o (LibTorch's order) from x and the previous h; memory = [h, c].
  block_affine(w.lstm_ih, w.lstm_b, in, 4 * w.key_dim, F, gates);
  for (int64_t r = 0; r < 4 * w.key_dim; ++r) {
    for (int64_t c = 0; c < w.key_dim; ++c) {
      const float wrc = w.lstm_hh[r * w.key_dim + c];
      FOR_LANES(l) gates[r][l] += wrc * mem[c][l];
    }
  }
  for (int64_t d = 0; d < w.key_dim; ++d) {
    FOR_LANES(l) {
      const float ig = sigmoid_approx(gates[d][l]), fg = sigmoid_approx(gates[w.key_dim + d][l]);
      const float gg = tanh_approx(gates[2 * w.key_dim + d][l]),
                  og = sigmoid_approx(gates[3 * w.key_dim + d][l]);
      const float c = fg * mem[w.key_dim + d][l] + ig * gg;
      const float hh = og * tanh_approx(c);
      mem[w.key_dim + d][l] = c;
      mem[d][l] = hh;
      read[d][l] = hh;
    }
  }
}

/// The memory and head of one block: the memory read into in[F..F + reads), then the head's
/// `outputs` numbers tanh(W_in [x, read] + b_in) -> W_out . + b_out into out (h: scratch).
FLT_INLINE void memory_and_head(const RuleWeights& w, int64_t F, float (*in)[kLanes],
                                float (*mem)[kLanes], float (*h)[kLanes], int64_t outputs,
                                float (*out)[kLanes]) {
  float(*read)[kLanes] = in + F;
  if (w.memory == MemoryKind::kLinearAttention) {
    linear_attention_memory(w, F, in, mem, read);
  } else if (w.memory == MemoryKind::kEMA) {
    ema_memory(w, F, in, mem, read);
  } else if (w.memory == MemoryKind::kLSTM) {
    lstm_memory(w, F, in, mem, read);
  }
  block_affine(w.w_in, w.b_in, in, w.hidden, F + w.reads, h);
  for (int64_t j = 0; j < w.hidden; ++j) {
    FOR_LANES(l) h[j][l] = tanh_approx(h[j][l]);
  }
  block_affine(w.w_out, w.b_out, h, outputs, w.hidden, out);
}

/// One full block of kLanes coordinates starting at grad/param/state (slot j of coordinate l at
/// state[j * w.slot_stride + l]).
/// Returns the number of coordinates skipped (non-finite gradient or step); writes the block's sums
/// of the controller statistics (step_statistics) to statistics[0..4).
FLT_CLONES_AVX512 int64_t step_block(const BlockPlan& w, const float* grad, float* param,
                                     float* state, double* statistics) {
  constexpr int64_t L = kLanes;
  const int64_t F = kFeatures;
  const int64_t M = kMoments;
  alignas(64) float st[kMaxState][L];  // state, transposed; updated in place
  alignas(64) float g[L], ok[L], update[L];
  alignas(64) float in[kFeatures + kMaxWidth][L];  // [x, read]
  alignas(64) float h[kMaxWidth][L], out[2][L];

  FOR_LANES(l) {
    ok[l] = is_finite(grad[l]) ? 1.0f : 0.0f;
    g[l] = is_finite(grad[l]) ? clip(grad[l], kMaxGradientF) : 0.0f;
  }
  for (int64_t j = 0; j < w.slots; ++j) {
    FOR_LANES(l) st[j][l] = state[j * w.slot_stride + l];
  }

  // Moments and features x (in[0..F)); the previous direction m1 / sqrt(v) for the controller.
  float adam_direction[L], previous[L];
  FOR_LANES(l) {
    previous[l] = st[0][l] / (std::sqrt(st[2][l]) + kCosineEpsilonF);
    const float m1 = kDecay1 * st[0][l] + kGain1 * g[l];
    const float m2 = kDecay2 * st[1][l] + kGain2 * g[l];
    const float vv = kDecayV * st[2][l] + kGainV * g[l] * g[l];
    st[0][l] = m1, st[1][l] = m2, st[2][l] = vv;
    const float m1h = m1 * w.c1, m2h = m2 * w.c2;
    const float rms = std::sqrt(vv * w.cv + kRmsEpsilonF);
    const float inv_rms = 1.0f / rms;
    adam_direction[l] = clip(m1h * inv_rms, kRatioClipF);
    in[0][l] = clip(g[l] * inv_rms, kRatioClipF);
    in[1][l] = adam_direction[l];
    in[2][l] = clip(m2h * inv_rms, kRatioClipF);
    log_sign(g[l], in[3][l], in[4][l]);
    log_sign(m1h, in[5][l], in[6][l]);
    float unused;
    log_sign(rms, in[7][l], unused);
    log_sign(param[l], in[8][l], in[9][l]);
  }

  // Head: MLP([x, read]) -> (direction, log-magnitude); update = -scale (adam + gate d) e^a.
  memory_and_head(w, F, in, st + M, h, 2, out);
  FOR_LANES(l) {
    const float a = kMaxLogMagnitudeF * tanh_approx(out[1][l] * (1.0f / kMaxLogMagnitudeF));
    const float gate = correction_gate(in[0][l], in[1][l], in[2][l]);
    update[l] = -w.step_size * (adam_direction[l] + gate * out[0][l]) * exp_approx(a);
    ok[l] = (ok[l] != 0.0f && is_finite(update[l])) ? 1.0f : 0.0f;
  }

  // Scatter: skipped coordinates keep their parameter and their whole state.
  bool all_ok = true;
  for (int64_t l = 0; l < L; ++l) all_ok = all_ok && ok[l] != 0.0f;
  int64_t skipped = 0;
  if (all_ok) {
    FOR_LANES(l) param[l] += update[l];
    for (int64_t j = 0; j < w.slots; ++j) {
      FOR_LANES(l) state[j * w.slot_stride + l] = st[j][l];
    }
  } else {
    for (int64_t l = 0; l < L; ++l) {
      if (ok[l] == 0.0f) {
        ++skipped;
        continue;
      }
      param[l] += update[l];
      for (int64_t j = 0; j < w.slots; ++j) state[j * w.slot_stride + l] = st[j][l];
    }
  }
  // The controller's statistics; lanes past a tail's end have zero gradient, state and parameter.
  // Products in double: in float, g^2 of a 1e-20 gradient underflows while g d does not.
  double sums[kStatistics][L];
  FOR_LANES(l) {
    const double gl = g[l], dl = previous[l], pl = param[l];
    sums[0][l] = gl * dl, sums[1][l] = gl * gl, sums[2][l] = dl * dl, sums[3][l] = pl * pl;
  }
  for (int64_t i = 0; i < kStatistics; ++i) {
    double total = 0.0;
    for (int64_t l = 0; l < L; ++l) total += sums[i][l];
    statistics[i] = total;
  }
  return skipped;
}

/// The last `count` < kLanes coordinates: run as a full block on padded copies (padding lanes see
/// a zero gradient and state, and are not copied back).
int64_t step_tail(const BlockPlan& w, const float* grad, float* param, float* state, int64_t count,
                  double* statistics) {
  BlockPlan padded = w;
  padded.slot_stride = kLanes;
  std::array<float, kLanes> g{}, p{};
  std::array<float, kLanes * kMaxState> s{};
  std::copy(grad, grad + count, g.begin());
  std::copy(param, param + count, p.begin());
  for (int64_t j = 0; j < w.slots; ++j)
    std::copy(state + j * w.slot_stride, state + j * w.slot_stride + count, s.begin() + j * kLanes);
  const int64_t skipped = step_block(padded, g.data(), p.data(), s.data(), statistics);
  std::copy(p.begin(), p.begin() + count, param);
  for (int64_t j = 0; j < w.slots; ++j)
    std::copy(s.begin() + j * kLanes, s.begin() + j * kLanes + count, state + j * w.slot_stride);
  return skipped;  // padding lanes have finite zero gradients: never skipped
}

/// memory_head_rows for `count` <= kLanes rows from row-major inputs, memories and outputs
/// (padding lanes see zeros and are not written back).
FLT_CLONES_AVX512 void rows_block(const RuleWeights& w, int64_t inputs, int64_t outputs,
                                  int64_t count, const float* x, float* memory,
                                  int64_t memory_width, float* out) {
  constexpr int64_t L = kLanes;
  alignas(64) float in[kMaxInputs + kMaxWidth][L] = {};
  alignas(64) float mem[kMaxState][L] = {};
  alignas(64) float h[kMaxWidth][L], o[kMaxWidth][L];
  for (int64_t l = 0; l < count; ++l) {
    for (int64_t c = 0; c < inputs; ++c) in[c][l] = x[l * inputs + c];
    for (int64_t j = 0; j < memory_width; ++j) mem[j][l] = memory[l * memory_width + j];
  }
  memory_and_head(w, inputs, in, mem, h, outputs, o);
  for (int64_t l = 0; l < count; ++l) {
    for (int64_t j = 0; j < memory_width; ++j) memory[l * memory_width + j] = mem[j][l];
    for (int64_t c = 0; c < outputs; ++c) out[l * outputs + c] = o[c][l];
  }
}

}  // namespace

void coordinate_steps_(const RuleWeights& weights, std::vector<TensorSlice>& tensors) {
  // A tensor's blocks of kLanes coordinates, its last one possibly a shorter tail, numbered
  // consecutively across the tensors.
  struct Work {
    BlockPlan plan;
    int64_t first_block = 0, blocks = 0;
  };
  std::vector<Work> work(tensors.size());
  int64_t total_blocks = 0;
  for (size_t k = 0; k < tensors.size(); ++k) {
    Work& w = work[k];
    static_cast<RuleWeights&>(w.plan) = weights;
    w.plan.slots = tensors[k].slots, w.plan.slot_stride = tensors[k].n;
    w.plan.step_size = tensors[k].step_size;
    w.first_block = total_blocks;
    w.blocks = (tensors[k].n + kLanes - 1) / kLanes;
    total_blocks += w.blocks;
  }
  // Per-block sums and skip counts, added in block order afterwards: the results do not depend on
  // how the blocks were split between threads.
  std::vector<double> partial(kStatistics * total_blocks, 0.0);
  std::vector<int64_t> skipped(total_blocks, 0);
  at::parallel_for(0, total_blocks, 256, [&](int64_t begin, int64_t end) {
    size_t k = 0;
    while (work[k].first_block + work[k].blocks <= begin) ++k;
    for (int64_t b = begin; b < end; ++b) {
      while (work[k].first_block + work[k].blocks <= b) ++k;  // (skips empty tensors too)
      const BlockPlan& plan = work[k].plan;
      const TensorSlice& t = tensors[k];
      const int64_t i = (b - work[k].first_block) * kLanes, count = std::min(kLanes, t.n - i);
      double* sums = &partial[kStatistics * b];
      skipped[b] = count == kLanes
                       ? step_block(plan, t.grad + i, t.param + i, t.state + i, sums)
                       : step_tail(plan, t.grad + i, t.param + i, t.state + i, count, sums);
    }
  });
  for (size_t k = 0; k < tensors.size(); ++k) {
    tensors[k].skipped = 0;
    tensors[k].statistics.fill(0.0);
    for (int64_t b = work[k].first_block; b < work[k].first_block + work[k].blocks; ++b) {
      tensors[k].skipped += skipped[b];
      for (int64_t i = 0; i < kStatistics; ++i)
        tensors[k].statistics[i] += partial[kStatistics * b + i];
    }
  }
}

void memory_head_rows(const RuleWeights& weights, int64_t inputs, int64_t outputs, int64_t rows,
                      const float* x, float* memory, int64_t memory_width, float* out) {
  if (inputs < 1 || inputs > kMaxInputs || outputs < 1 || outputs > kMaxWidth || memory_width < 0 ||
      memory_width > kMaxState || weights.hidden > kMaxWidth || weights.reads > kMaxWidth)
    throw std::invalid_argument("memory_head_rows: inputs " + std::to_string(inputs) +
                                ", outputs " + std::to_string(outputs) + ", memory " +
                                std::to_string(memory_width) + " or hidden " +
                                std::to_string(weights.hidden) + " out of the fused bounds");
  for (int64_t r = 0; r < rows; r += kLanes)
    rows_block(weights, inputs, outputs, std::min(kLanes, rows - r), x + r * inputs,
               memory + r * memory_width, memory_width, out + r * outputs);
}

}  // namespace flt::kernels::coordinate
