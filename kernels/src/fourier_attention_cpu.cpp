// Fused CPU Fourier attention: forward and backward without the (L, L, D) tensor.
//
// Work items are (batch, head, tile of kQueryTile queries), spread over OpenMP threads. Inside an
// item, keys come in chunks of kKeyChunk (their transposed data stays in L2 while every query of
// the tile uses it) and the innermost loops run over keys, contiguous, so they vectorise.
//
// Per (query, key) pair the weight prod_d phi(s(x_d)), x_d = r_d (q_d - k_d), is accumulated as two
// running products, num = prod |sin x_d| (or the series value of s near 0) and den = prod |x_d|
// (or 1), whose binary exponents are moved into integers every few dimensions: no log, exp or
// division per pair and dimension, and no underflow (the naive product of 64 sinc^4 factors
// underflows float). sin x_d comes from the trig identity with per-token sin/cos.
// The weight is then m * 2^e with m = (num/den)^p; each row is normalised by its largest e.
// The forward keeps the normalised weights A (B, H, Lq, Lk: the memory of one softmax attention
// matrix) so the backward does not recompute the D-dimensional products; the backward then needs
// c(x) = cot x - 1/x per pair and dimension for dq, dk and dR.
#include "fourier_attention_cpu.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "flt/detail/cpu_clones.h"  // FLT_CLONES: one AVX2/FMA clone and the baseline; FLT_INLINE

namespace flt::kernels::cpu {
namespace {

using fourier::FactorMode;

constexpr int64_t kQueryTile = 8;
constexpr int64_t kKeyChunk = 128;

// IEEE layout of T: the integer of its width, mantissa bits, exponent bias and exponent mask
// (float: 23, 127, 0xff; double: 52, 1023, 0x7ff).
template <typename T>
struct Float {
  using Int = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;
  static_assert(sizeof(Int) == sizeof(T) && std::numeric_limits<T>::is_iec559);
  static constexpr int kMantissa = std::numeric_limits<T>::digits - 1;
  static constexpr Int kBias = std::numeric_limits<T>::max_exponent - 1;
  static constexpr Int kExpMask = 2 * kBias + 1;
};

template <typename T>
using IntOf = typename Float<T>::Int;

// Exponent of a weight that is exactly zero: below any real one, and differences stay in range.
template <typename T>
constexpr IntOf<T> kZeroExponent = std::numeric_limits<IntOf<T>>::min() / 4;

template <typename To, typename From>
FLT_INLINE To bit_cast(From x) {
  return __builtin_bit_cast(To, x);
}

// v >= 0 becomes its mantissa in [1, 2) and its exponent moves into e; zero (and, never reached in
// practice, subnormals) becomes exactly 0, so a vanished factor keeps the weight at 0. With
// kKeepNaN (the product of |sin x|), NaN stays NaN: reading its exponent field as a number gave a
// finite mantissa, so a NaN or infinite q or k (NaN sin) produced a finite, arbitrary weight. Now
// the weight is NaN, and so is every row it enters. (The product of |x| needs no such care: a NaN
// x comes with a NaN sin x.) The blend keeps the store unconditional: a select that left v as it
// was became a masked store and stopped the loop vectorising.
template <typename T, bool kKeepNaN>
FLT_INLINE void move_exponent(T& v, IntOf<T>& e) {
  using F = Float<T>;
  using Int = IntOf<T>;
  const Int bits = bit_cast<Int>(v);
  const Int biased = (bits >> F::kMantissa) & F::kExpMask;
  Int mantissa = (bits & ((Int(1) << F::kMantissa) - 1)) | (F::kBias << F::kMantissa);
  if constexpr (kKeepNaN) {
    const Int nan = -Int(biased == F::kExpMask);  // all ones for NaN
    mantissa = (mantissa & ~nan) | (bits & nan);
  }
  v = biased == 0 ? T(0) : bit_cast<T>(mantissa);
  e += biased == 0 ? Int(0) : biased - F::kBias;
}

// 2^n for n <= 0, 0 below the normal range.
template <typename T>
FLT_INLINE T exp2_nonpositive(IntOf<T> n) {
  using F = Float<T>;
  using Int = IntOf<T>;
  return n <= -F::kBias ? T(0) : bit_cast<T>(Int(n + F::kBias) << F::kMantissa);
}

// The data of one (batch, head): pointers into FourierOperands and the outputs.
template <typename T>
struct Head {
  const T *q, *q_sin, *q_cos, *k_t, *k_sin_t, *k_cos_t, *v, *r;
  int64_t lk, dim, dv;
  int power;
};

template <typename T>
Head<T> head_of(const FourierProblem& p, const FourierOperands<T>& in, int64_t bh) {
  const int64_t h = bh % p.heads;
  return {in.q + bh * p.lq * p.dim,
          in.q_sin + bh * p.lq * p.dim,
          in.q_cos + bh * p.lq * p.dim,
          in.k_t + bh * p.dim * p.lk,
          in.k_sin_t + bh * p.dim * p.lk,
          in.k_cos_t + bh * p.dim * p.lk,
          in.v + bh * p.lk * p.dv,
          in.r + h * p.dim,
          p.lk,
          p.dim,
          p.dv,
          p.power};
}

// Dimension d of the pair loop of query i against keys from j0: the query's scalars and the keys'
// columns (keys are contiguous per dimension).
template <typename T>
struct PairDim {
  T q, r, sin_q, cos_q;
  const T *k, *sin_k, *cos_k;
};

template <typename T>
FLT_INLINE PairDim<T> pair_dim(const Head<T>& hd, int64_t i, int64_t d, int64_t j0) {
  const int64_t qd = i * hd.dim + d, kd = d * hd.lk + j0;
  return {hd.q[qd],    hd.r[d],         hd.q_sin[qd],   hd.q_cos[qd],
          hd.k_t + kd, hd.k_sin_t + kd, hd.k_cos_t + kd};
}

// Scratch of one query-chunk evaluation.
template <typename T>
struct PairScratch {
  alignas(64) T num[kKeyChunk];
  alignas(64) T den[kKeyChunk];
  alignas(64) IntOf<T> num_exp[kKeyChunk];
  alignas(64) IntOf<T> den_exp[kKeyChunk];
  alignas(64) IntOf<T> sign[kKeyChunk];
};

// Weights of query i against keys [j0, j0 + n) (n <= kKeyChunk): weight_j = mant[j] * 2^expo[j],
// mant signed for odd powers, 0 with expo = kZeroExponent when the weight vanishes.
template <typename T, FactorMode kMode>
FLT_INLINE void pair_weights(const Head<T>& hd, int64_t i, int64_t j0, int64_t n, T* mant,
                             IntOf<T>* expo, PairScratch<T>& s) {
  using Int = IntOf<T>;
  constexpr T kSmall2 = fourier::Precision<T>::kSmall * fourier::Precision<T>::kSmall;
  constexpr int kEvery = fourier::Precision<T>::kRenormEvery;
  constexpr bool kSigned = kMode == FactorMode::kPowerOdd || kMode == FactorMode::kRelu;
  T* __restrict num = s.num;
  T* __restrict den = s.den;
  Int* __restrict num_exp = s.num_exp;
  Int* __restrict den_exp = s.den_exp;
  Int* __restrict sign = s.sign;
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) {
    num[j] = T(1);
    den[j] = T(1);
    num_exp[j] = 0;
    den_exp[j] = 0;
    sign[j] = 0;
  }
  for (int64_t d = 0; d < hd.dim; ++d) {
    const PairDim<T> pd = pair_dim(hd, i, d, j0);
    const T* __restrict k_d = pd.k;
    const T* __restrict sin_k = pd.sin_k;
    const T* __restrict cos_k = pd.cos_k;
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) {
      const T x = pd.r * (pd.q - k_d[j]);
      const T x2 = x * x;
      const T sin_x = pd.sin_q * cos_k[j] - pd.cos_q * sin_k[j];
      const bool small = x2 < kSmall2;
      // Both branches computed, then selected: a select of values vectorises, a branch around
      // floating-point work does not (GCC will not speculate it under -ftrapping-math).
      const T series = fourier::sinc_series(x2);
      const T abs_sin = std::abs(sin_x);
      const T abs_x = std::abs(x);
      num[j] *= small ? series : abs_sin;
      den[j] *= small ? T(1) : abs_x;
      if constexpr (kSigned) {
        // The sign bit of sin_x * x is the sign of s; the series branch is positive.
        const Int sign_bits = small ? Int(0) : (bit_cast<Int>(sin_x) ^ bit_cast<Int>(x));
        if constexpr (kMode == FactorMode::kPowerOdd) {
          sign[j] ^= sign_bits;
        } else {
          sign[j] |= sign_bits;
        }
      }
    }
    if ((d + 1) % kEvery == 0 || d + 1 == hd.dim) {
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) {
        move_exponent<T, /*kKeepNaN=*/true>(num[j], num_exp[j]);
        move_exponent<T, /*kKeepNaN=*/false>(den[j], den_exp[j]);
      }
    }
  }
  // num, den in [1, 2) (or num = 0): ratio in (1/2, 2), raised to p below.
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) {
    const T ratio = num[j] / den[j];
    num[j] = ratio;
    mant[j] = ratio;
  }
  for (int e = 1; e < hd.power; ++e) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) mant[j] *= num[j];
  }
  const Int power = hd.power;
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) {
    bool zero = num[j] == T(0);
    T m = mant[j];
    if constexpr (kMode == FactorMode::kPowerOdd) m = sign[j] < 0 ? -m : m;
    // A negative factor zeroes a ReLU weight, but not a NaN one (0 * NaN is NaN).
    if constexpr (kMode == FactorMode::kRelu) zero = zero || (sign[j] < 0 && num[j] == num[j]);
    mant[j] = zero ? T(0) : m;
    expo[j] = zero ? kZeroExponent<T> : power * (num_exp[j] - den_exp[j]);
  }
}

// Keys query i may see within [j0, j0 + kKeyChunk).
FLT_INLINE int64_t visible_keys(int64_t i, int64_t j0, int64_t lk, bool causal) {
  const int64_t end = causal ? std::min(lk, i + 1) : lk;
  return std::max<int64_t>(0, std::min(end - j0, kKeyChunk));
}

template <typename T, FactorMode kMode>
FLT_INLINE void forward_item(const Head<T>& hd, int64_t i0, int64_t i1, bool causal, T* out,
                             T* row_max, T* row_sum, T* weights, IntOf<T>* expo_rows) {
  using Int = IntOf<T>;
  PairScratch<T> scratch;
  // The rows of `weights` hold the mantissas until the row is normalised in place.
  T* mant_rows = weights + i0 * hd.lk;
  const int64_t key_end = causal ? std::min(hd.lk, i1) : hd.lk;
  for (int64_t j0 = 0; j0 < key_end; j0 += kKeyChunk) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t n = visible_keys(i, j0, hd.lk, causal);
      if (n == 0) continue;
      const int64_t row = (i - i0) * hd.lk + j0;
      pair_weights<T, kMode>(hd, i, j0, n, mant_rows + row, expo_rows + row, scratch);
    }
  }
  for (int64_t i = i0; i < i1; ++i) {
    const int64_t n = causal ? std::min(hd.lk, i + 1) : hd.lk;
    T* __restrict mant = mant_rows + (i - i0) * hd.lk;
    const Int* __restrict expo = expo_rows + (i - i0) * hd.lk;
    Int top = kZeroExponent<T>;
#pragma omp simd reduction(max : top)
    for (int64_t j = 0; j < n; ++j) top = std::max(top, expo[j]);
    T sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < n; ++j) {
      mant[j] *= exp2_nonpositive<T>(expo[j] - top);
      sum += mant[j];
    }
    T* __restrict o = out + i * hd.dv;
    std::fill(o, o + hd.dv, T(0));
    std::fill(mant + n, mant + hd.lk, T(0));  // causal: future keys weigh 0
    row_max[i] = static_cast<T>(top);
    row_sum[i] = top == kZeroExponent<T> ? T(0) : sum;
    if (row_sum[i] == T(0)) {  // every weight vanished: output 0 (documented)
      std::fill(mant, mant + n, T(0));
      continue;
    }
    for (int64_t j = 0; j < n; ++j) {
      const T w = mant[j];
      if (w == T(0)) continue;
      const T* __restrict vj = hd.v + j * hd.dv;
#pragma omp simd
      for (int64_t c = 0; c < hd.dv; ++c) o[c] += w * vj[c];
    }
    const T inv = T(1) / sum;
#pragma omp simd
    for (int64_t c = 0; c < hd.dv; ++c) o[c] *= inv;
#pragma omp simd
    for (int64_t j = 0; j < n; ++j)
      mant[j] *= inv;  // the attention weights A_ij, kept for backward
  }
}

// Thread-private accumulators of the backward: dk (transposed, unscaled), dv, dr.
template <typename T>
struct BackwardAccumulators {
  T* dk_t;  // (B, H, D, Lk): sum_i G_ij c(x_ijd); dk = -p r_d times it
  T* dv;    // (B, H, Lk, Dv)
  T* dr;    // (H, D): sum_ij G_ij c(x_ijd) (q_id - k_jd); dr = p times it
};

template <typename T, FactorMode kMode>
FLT_INLINE void backward_item(const Head<T>& hd, int64_t i0, int64_t i1, bool causal, const T* out,
                              const T* weights, const T* row_sum, const T* grad_out, T* dq, T* dk_t,
                              T* dv, T* dr) {
  constexpr T kSmall2 = fourier::Precision<T>::kSmall * fourier::Precision<T>::kSmall;
  alignas(64) T coupling[kKeyChunk];  // G_ij = A_ij (g_i . v_j - g_i . out_i) = dL / dlog w_ij
  T delta[kQueryTile];
  for (int64_t i = i0; i < i1; ++i) {
    T acc = 0;
    const T* g = grad_out + i * hd.dv;
    const T* o = out + i * hd.dv;
#pragma omp simd reduction(+ : acc)
    for (int64_t c = 0; c < hd.dv; ++c) acc += g[c] * o[c];
    delta[i - i0] = acc;
    std::fill(dq + i * hd.dim, dq + (i + 1) * hd.dim, T(0));
  }
  const T power = static_cast<T>(hd.power);
  const int64_t key_end = causal ? std::min(hd.lk, i1) : hd.lk;
  for (int64_t j0 = 0; j0 < key_end; j0 += kKeyChunk) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t n = visible_keys(i, j0, hd.lk, causal);
      if (n == 0 || row_sum[i] == T(0)) continue;
      // A_ij as the forward normalised them: no recomputation of the D-dimensional products.
      const T* __restrict a_row = weights + i * hd.lk + j0;
      const T* __restrict g = grad_out + i * hd.dv;
      for (int64_t j = 0; j < n; ++j) {
        const T a = a_row[j];
        coupling[j] = 0;
        if (a == T(0)) continue;
        const T* __restrict vj = hd.v + (j0 + j) * hd.dv;
        T* __restrict dvj = dv + (j0 + j) * hd.dv;
        T gv = 0;
#pragma omp simd reduction(+ : gv)
        for (int64_t c = 0; c < hd.dv; ++c) {
          gv += g[c] * vj[c];
          dvj[c] += a * g[c];
        }
        coupling[j] = a * (gv - delta[i - i0]);
      }
      for (int64_t d = 0; d < hd.dim; ++d) {
        const PairDim<T> pd = pair_dim(hd, i, d, j0);
        const T* __restrict k_d = pd.k;
        const T* __restrict sin_k = pd.sin_k;
        const T* __restrict cos_k = pd.cos_k;
        T* __restrict dk_d = dk_t + d * hd.lk + j0;
        T acc_q = 0, acc_r = 0;
#pragma omp simd reduction(+ : acc_q, acc_r)
        for (int64_t j = 0; j < n; ++j) {
          const T diff = pd.q - k_d[j];
          const T x = pd.r * diff;
          const T x2 = x * x;
          const T sin_x = pd.sin_q * cos_k[j] - pd.cos_q * sin_k[j];
          const T cos_x = pd.cos_q * cos_k[j] + pd.sin_q * sin_k[j];
          const bool small = x2 < kSmall2;
          const T denom = x * sin_x;
          // At an exact zero of sin the weight is 0 (coupling 0); keep c finite there.
          const bool pole = !small && denom == T(0);
          const T safe_denom = small || pole ? T(1) : denom;
          const T closed = (x * cos_x - sin_x) / safe_denom;
          const T series = fourier::cot_minus_inv_series(x, x2);
          const T c = small ? series : (pole ? T(0) : closed);
          const T t = coupling[j] * c;
          acc_q += t;
          acc_r += t * diff;
          dk_d[j] += t;
        }
        dq[i * hd.dim + d] += power * pd.r * acc_q;
        dr[d] += power * acc_r;
      }
    }
  }
}

// Non-template, multiversioned entry points per (type, mode): the clones compile the inlined
// templates above for AVX2/FMA and for the baseline.
#define FLT_DEFINE_ITEMS(T, MODE, SUFFIX)                                                          \
  FLT_CLONES void forward_##SUFFIX(const Head<T>& hd, int64_t i0, int64_t i1, bool causal, T* out, \
                                   T* row_max, T* row_sum, T* weights, IntOf<T>* expo_rows) {      \
    forward_item<T, MODE>(hd, i0, i1, causal, out, row_max, row_sum, weights, expo_rows);          \
  }                                                                                                \
  FLT_CLONES void backward_##SUFFIX(const Head<T>& hd, int64_t i0, int64_t i1, bool causal,        \
                                    const T* out, const T* weights, const T* row_sum,              \
                                    const T* grad_out, T* dq, T* dk_t, T* dv, T* dr) {             \
    backward_item<T, MODE>(hd, i0, i1, causal, out, weights, row_sum, grad_out, dq, dk_t, dv, dr); \
  }

FLT_DEFINE_ITEMS(float, FactorMode::kPowerEven, float_even)
FLT_DEFINE_ITEMS(float, FactorMode::kPowerOdd, float_odd)
FLT_DEFINE_ITEMS(float, FactorMode::kRelu, float_relu)
FLT_DEFINE_ITEMS(double, FactorMode::kPowerEven, double_even)
FLT_DEFINE_ITEMS(double, FactorMode::kPowerOdd, double_odd)
FLT_DEFINE_ITEMS(double, FactorMode::kRelu, double_relu)
#undef FLT_DEFINE_ITEMS

// The clones of one element type by mode (kAbs is even in q - k, as kPowerEven).
template <typename T>
struct ItemTable;
#define FLT_ITEM_TABLE(T)                                          \
  template <>                                                      \
  struct ItemTable<T> {                                            \
    static decltype(&forward_##T##_even) forward(FactorMode m) {   \
      return m == FactorMode::kPowerOdd ? forward_##T##_odd        \
             : m == FactorMode::kRelu   ? forward_##T##_relu       \
                                        : forward_##T##_even;        \
    }                                                              \
    static decltype(&backward_##T##_even) backward(FactorMode m) { \
      return m == FactorMode::kPowerOdd ? backward_##T##_odd       \
             : m == FactorMode::kRelu   ? backward_##T##_relu      \
                                        : backward_##T##_even;       \
    }                                                              \
  };
FLT_ITEM_TABLE(float)
FLT_ITEM_TABLE(double)
#undef FLT_ITEM_TABLE

int64_t tiles_of(int64_t length) {
  return (length + kQueryTile - 1) / kQueryTile;
}

}  // namespace

int64_t fourier_forward_workspace(const FourierProblem& p) {
  return std::max(1, p.threads) * kQueryTile * p.lk;
}

int64_t fourier_backward_workspace(const FourierProblem& p) {
  return std::max(1, p.threads) * (p.batch * p.heads * p.lk * (p.dim + p.dv) + p.heads * p.dim);
}

template <typename T>
void fourier_forward(const FourierProblem& p, const FourierOperands<T>& in, T* out, T* row_max,
                     T* row_sum, T* weights, T* workspace) {
  static_assert(sizeof(IntOf<T>) == sizeof(T), "exponents share the workspace with mantissas");
  const auto item_fn = ItemTable<T>::forward(p.mode);
  const int64_t tiles = tiles_of(p.lq);
  const int64_t items = p.batch * p.heads * tiles;
#pragma omp parallel num_threads(std::max(1, p.threads))
  {
    // Exponent rows of one query tile (kQueryTile * Lk) per thread; mantissas go to `weights`.
    IntOf<T>* expo_rows =
        reinterpret_cast<IntOf<T>*>(workspace + omp_get_thread_num() * kQueryTile * p.lk);
#pragma omp for schedule(dynamic, 1)
    for (int64_t item = 0; item < items; ++item) {
      const int64_t bh = item / tiles;
      const int64_t i0 = (item % tiles) * kQueryTile;
      const int64_t i1 = std::min(p.lq, i0 + kQueryTile);
      const Head<T> hd = head_of(p, in, bh);
      item_fn(hd, i0, i1, p.causal, out + bh * p.lq * p.dv, row_max + bh * p.lq,
              row_sum + bh * p.lq, weights + bh * p.lq * p.lk, expo_rows);
    }
  }
}

template <typename T>
void fourier_backward(const FourierProblem& p, const FourierOperands<T>& in, const T* out,
                      const T* weights, const T* row_sum, const T* grad_out, T* dq, T* dk, T* dv,
                      T* dr, T* workspace) {
  const auto item_fn = ItemTable<T>::backward(p.mode);
  const int64_t tiles = tiles_of(p.lq);
  const int64_t items = p.batch * p.heads * tiles;
  const int threads = std::max(1, p.threads);
  // Thread-private dk (transposed) and dv, reduced below in a fixed order (deterministic for a
  // given thread count): no atomics. Memory: threads * (size of k + size of v).
  const int64_t dk_size = p.batch * p.heads * p.dim * p.lk;
  const int64_t dv_size = p.batch * p.heads * p.lk * p.dv;
  const int64_t dr_size = p.heads * p.dim;
  T* private_dk = workspace;
  T* private_dv = private_dk + threads * dk_size;
  T* private_dr = private_dv + threads * dv_size;
  std::fill(workspace, workspace + fourier_backward_workspace(p), T(0));
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num();
#pragma omp for schedule(static)
    for (int64_t item = 0; item < items; ++item) {
      const int64_t bh = item / tiles;
      const int64_t h = bh % p.heads;
      const int64_t i0 = (item % tiles) * kQueryTile;
      const int64_t i1 = std::min(p.lq, i0 + kQueryTile);
      const Head<T> hd = head_of(p, in, bh);
      item_fn(hd, i0, i1, p.causal, out + bh * p.lq * p.dv, weights + bh * p.lq * p.lk,
              row_sum + bh * p.lq, grad_out + bh * p.lq * p.dv, dq + bh * p.lq * p.dim,
              private_dk + t * dk_size + bh * p.dim * p.lk,
              private_dv + t * dv_size + bh * p.lk * p.dv, private_dr + t * dr_size + h * p.dim);
    }
    // Reduce: dk[b,h,j,d] = -p r[h,d] sum_t dk_t[t,b,h,d,j]; dv = sum_t dv_t.
#pragma omp for schedule(static)
    for (int64_t bh = 0; bh < p.batch * p.heads; ++bh) {
      const T* r = in.r + (bh % p.heads) * p.dim;
      for (int64_t j = 0; j < p.lk; ++j) {
        for (int64_t d = 0; d < p.dim; ++d) {
          T acc = 0;
          for (int u = 0; u < threads; ++u)
            acc += private_dk[u * dk_size + (bh * p.dim + d) * p.lk + j];
          dk[(bh * p.lk + j) * p.dim + d] = -static_cast<T>(p.power) * r[d] * acc;
        }
        for (int64_t c = 0; c < p.dv; ++c) {
          T acc = 0;
          for (int u = 0; u < threads; ++u)
            acc += private_dv[u * dv_size + (bh * p.lk + j) * p.dv + c];
          dv[(bh * p.lk + j) * p.dv + c] = acc;
        }
      }
    }
  }
  for (int64_t e = 0; e < dr_size; ++e) {
    T acc = 0;
    for (int u = 0; u < threads; ++u) acc += private_dr[u * dr_size + e];
    dr[e] = acc;
  }
}

template void fourier_forward<float>(const FourierProblem&, const FourierOperands<float>&, float*,
                                     float*, float*, float*, float*);
template void fourier_forward<double>(const FourierProblem&, const FourierOperands<double>&,
                                      double*, double*, double*, double*, double*);
template void fourier_backward<float>(const FourierProblem&, const FourierOperands<float>&,
                                      const float*, const float*, const float*, const float*,
                                      float*, float*, float*, float*, float*);
template void fourier_backward<double>(const FourierProblem&, const FourierOperands<double>&,
                                       const double*, const double*, const double*, const double*,
                                       double*, double*, double*, double*, double*);

}  // namespace flt::kernels::cpu
