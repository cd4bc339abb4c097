#pragma once
// The tiled Fourier-attention kernels: what the forward (fourier_tiled_forward.h) and
// the backward (fourier_tiled_backward.h) share: tile shapes, number helpers and pair_tile, the
// weights of a register tile of (query, key) pairs. Written as __host__ __device__ code so that the
// CUDA kernels (fourier_attention.cu) and a host emulation compiled by g++ (tests/cuda_emulation)
// run the same tiling logic. Plain C++: no CUDA headers.
//
// Forward: a block owns kBlockQueries queries of one (batch, head) and loops over tiles of
// kBlockKeys keys. Threads form a (kThreadsY, kThreadsX) grid; thread (ty, tx) owns the kRows x
// kKeys register tile of (query, key) pairs with queries ty * kRows + r and keys tx * kKeys + c.
// Per key tile:
//   load     the key tables (x = r k, sin x, cos x; transposed: (D, keys)) and the values V
//   weights  every pair's weight as mant * 2^expo over all D dimensions; partial row maxima
//   scale    each row's new largest exponent (online, base 2); weights w = mant * 2^(expo - top)
//            stored as W (keys, queries); the accumulators rescaled
//   values   out[rows, 4 columns per chunk] += W^T V (the thread keeps rows ty * kRows + r)
// Each phase ends at a block barrier (the executor's `phase`).
//
// Per (query, key, dimension) the weight needs 9 FP32 operations: x = a_i - b_j, x^2,
// sin x = s_i c_j - c_i s_j (2), and the running products
//   num *= max(|sin x|, t (1 - x^2 / 6)),   den *= max(|x|, t)      (t = kTiny, a power of 2)
// For |x| >= t this is |sin x| / |x|: t (1 - x^2/6) < |sin x| there (equal to first order at t,
// decreasing, negative beyond sqrt 6 < pi). For |x| < t it is the series t s(x) / t, truncated
// below the type's rounding error (x^4 / 120 < 2^-27 for float), and x = 0 gives 1, not 0/0.
// No select and no branch per dimension. The closed form near t loses eps / t relative (float:
// 2^-24 / 2^-5 = 2^-19) from the cancellation in sin x; the CPU kernel's series up to |x| = 1 is
// more accurate there, and the tests against the double reference bound the difference.
// Exponents move out of num and den every kRenormEvery dimensions, as the CPU kernel does (its
// Precision constants): den by masking its exponent bits (den >= t > 0, finite); num by
// multiplying with 2^-exponent, which keeps an exact 0 at 0 and a NaN NaN (a NaN or infinite
// r q or r k makes the tables NaN, so the weight and the rows that see it come out NaN).

#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "flt/kernels/fourier_series.h"

#if defined(__CUDACC__)
#define FLT_HD_INLINE __host__ __device__ __forceinline__
#else
#define FLT_HD_INLINE inline
#endif
#if defined(__CUDA_ARCH__)
#define FLT_UNROLL _Pragma("unroll")
#else
#define FLT_UNROLL
#endif

namespace flt::kernels::cuda::tiled {

using fourier::FactorMode;

/// Largest exponent of a row none of whose weights is nonzero (int32 arithmetic: differences of
/// real exponents and kNone never overflow).
constexpr int kNone = INT_MIN / 4;
/// row_max written for such a row: the naive kernel's value, -2^60.
constexpr double kNoneOut = -1152921504606846976.0;

/// A tile shape and its arithmetic options. kThreadsX threads share a query row (and split its
/// keys); kValueChunks chunks of 4 output columns per kThreadsX threads (Dv <= 4 kThreadsX
/// kValueChunks); kFastDivide: num / den per pair by the approximate division (__fdividef);
/// kMinBlocks: blocks per SM the kernel's register budget must allow (__launch_bounds__).
template <int kThreadsX_, int kThreadsY_, int kRows_, int kKeys_, int kValueChunks_,
          bool kFastDivide_, int kMinBlocks_ = 1>
struct TileConfig {
  static constexpr int kMinBlocks = kMinBlocks_;
  static constexpr int kThreadsX = kThreadsX_, kThreadsY = kThreadsY_;
  static constexpr int kThreads = kThreadsX * kThreadsY;
  static constexpr int kRows = kRows_, kKeys = kKeys_, kValueChunks = kValueChunks_;
  static constexpr int kBlockQueries = kThreadsY * kRows, kBlockKeys = kThreadsX * kKeys;
  static constexpr int kMaxValues = 4 * kThreadsX * kValueChunks;
  static constexpr bool kFastDivide = kFastDivide_;
};

/// The bits of a float or double and the constants of the weight arithmetic.
template <typename T>
struct Num;
template <>
struct Num<float> {
  using Bits = uint32_t;
  static constexpr Bits kExpField = 0x7f800000u, kMantField = 0x007fffffu, kOne = 0x3f800000u;
  static constexpr Bits kTwoBias = 0x7f000000u;  // 254 << 23: 2^-e has field 254 - field(2^e)
  static constexpr int kMantBits = 23, kBias = 127;
  static constexpr float kTiny = 0.03125f;  // 2^-5: x^4 / 120 < 2^-27 below it
};
template <>
struct Num<double> {
  using Bits = uint64_t;
  static constexpr Bits kExpField = 0x7ff0000000000000ull, kMantField = 0x000fffffffffffffull;
  static constexpr Bits kOne = 0x3ff0000000000000ull, kTwoBias = 0x7fe0000000000000ull;
  static constexpr int kMantBits = 52, kBias = 1023;
  static constexpr double kTiny = 0.000244140625;  // 2^-12: x^4 / 120 < 2^-56 below it
};

template <typename T>
FLT_HD_INLINE typename Num<T>::Bits bits_of(T x) {
#if defined(__CUDA_ARCH__)
  if constexpr (sizeof(T) == 4) {
    return __float_as_uint(x);
  } else {
    return static_cast<uint64_t>(__double_as_longlong(x));
  }
#else
  typename Num<T>::Bits b;
  std::memcpy(&b, &x, sizeof b);
  return b;
#endif
}

template <typename T>
FLT_HD_INLINE T from_bits(typename Num<T>::Bits b) {
#if defined(__CUDA_ARCH__)
  if constexpr (sizeof(T) == 4) {
    return __uint_as_float(b);
  } else {
    return __longlong_as_double(static_cast<long long>(b));
  }
#else
  T x;
  std::memcpy(&x, &b, sizeof x);
  return x;
#endif
}

template <typename T>
FLT_HD_INLINE T hd_fmax(T a, T b) {
#if defined(__CUDA_ARCH__)
  return fmax(a, b);
#else
  return std::fmax(a, b);
#endif
}

template <typename T>
FLT_HD_INLINE T hd_fabs(T a) {
#if defined(__CUDA_ARCH__)
  return fabs(a);
#else
  return std::fabs(a);
#endif
}

// 2^n for n <= 0; 0 below the normal range.
template <typename T>
FLT_HD_INLINE T pow2_nonpositive(int n) {
  using N = Num<T>;
  return n <= -N::kBias ? T(0)
                        : from_bits<T>(static_cast<typename N::Bits>(n + N::kBias) << N::kMantBits);
}

template <typename T, bool kFast>
FLT_HD_INLINE T divide(T a, T b) {
#if defined(__CUDA_ARCH__)
  if constexpr (kFast && sizeof(T) == 4) return __fdividef(a, b);
#endif
  return a / b;
}

/// Table entry idx of (B*H, D, L) (L fastest): a = r_d x_d (NaN when not finite), sin a, cos a,
/// from x (B*H, L, D) and r (H, D).
template <typename T>
FLT_HD_INLINE void table_entry(int64_t idx, int64_t heads, int64_t length, int64_t dim, const T* x,
                               const T* r, T* a_t, T* sin_t, T* cos_t) {
  const int64_t l = idx % length;
  const int64_t d = (idx / length) % dim;
  const int64_t bh = idx / (length * dim);
  T a = r[(bh % heads) * dim + d] * x[(bh * length + l) * dim + d];
  a = a - a == T(0) ? a : a - a;  // inf -> NaN, so that x = a_i - b_j is NaN as well
  a_t[idx] = a;
#if defined(__CUDA_ARCH__)
  sin_t[idx] = sin(a);
  cos_t[idx] = cos(a);
#else
  sin_t[idx] = std::sin(a);
  cos_t[idx] = std::cos(a);
#endif
}

/// Operands of the tiled forward. Tables (B*H, D, L) from table_entry; v (B*H, Lk, Dv);
/// out (B*H, Lq, Dv); row_max, row_sum (B*H, Lq) as in fourier_forward.
template <typename T>
struct ForwardArgs {
  int64_t lq = 0, lk = 0;
  int dim = 0, dv = 0, power = 4;
  bool causal = false;
  const T *qa = nullptr, *qs = nullptr, *qc = nullptr;
  const T *ka = nullptr, *ks = nullptr, *kc = nullptr;
  const T* v = nullptr;
  T *out = nullptr, *row_max = nullptr, *row_sum = nullptr;
};

/// N values of T loaded or stored at once (LDS.128 / STS.128 in shared memory).
template <typename T, int N>
struct alignas(sizeof(T) * N <= 16 ? sizeof(T) * N : 16) Vec {
  T v[N];
};

template <typename T, int N>
FLT_HD_INLINE Vec<T, N> load_vec(const T* p) {
  return *reinterpret_cast<const Vec<T, N>*>(p);
}

/// The weights of a register tile of kR x kK pairs (rows against columns) as mant * 2^expo, the
/// arithmetic the header describes. Tables in shared memory: a row's x = r q at rows[d *
/// kRowStride], its sin and cos dim * kRowStride and 2 dim * kRowStride further (columns likewise).
/// The weight is even in x, so rows may be queries or keys. valid(r, c) false, a zero factor, or
/// (kRelu) a negative one give mant 0 and expo kNone.
template <typename T, FactorMode kMode, bool kFast, int kR, int kK, int kRowStride, int kColStride,
          class Valid>
FLT_HD_INLINE void pair_tile(const T* rows, const T* cols, int dim, int power, Valid valid,
                             T (&mant)[kR][kK], int (&expo)[kR][kK]) {
  constexpr bool kSigned = kMode == FactorMode::kPowerOdd || kMode == FactorMode::kRelu;
  using N = Num<T>;
  using Bits = typename N::Bits;
  constexpr int kEvery = fourier::Precision<T>::kRenormEvery;
  constexpr T kTiny = N::kTiny, kPoly = -N::kTiny / 6;
  constexpr T kTiny2 = N::kTiny * N::kTiny;
  T num[kR][kK], den[kR][kK];
  int ex[kR][kK];
  Bits neg[kR][kK];  // the sign bit: an odd number of negative factors (kRelu: any)
  FLT_UNROLL
  for (int r = 0; r < kR; ++r) {
    FLT_UNROLL
    for (int c = 0; c < kK; ++c) num[r][c] = den[r][c] = T(1), ex[r][c] = 0, neg[r][c] = 0;
  }
  // One dimension for every pair of the register tile (row tables at q, column tables at k).
  auto dimension = [&](const T* q, const T* k, int u) {
    const auto qa = load_vec<T, kR>(q + u * kRowStride);
    const auto qs = load_vec<T, kR>(q + (u + dim) * kRowStride);
    const auto qc = load_vec<T, kR>(q + (u + 2 * dim) * kRowStride);
    const auto ka = load_vec<T, kK>(k + u * kColStride);
    const auto ks = load_vec<T, kK>(k + (u + dim) * kColStride);
    const auto kc = load_vec<T, kK>(k + (u + 2 * dim) * kColStride);
    FLT_UNROLL
    for (int r = 0; r < kR; ++r) {
      FLT_UNROLL
      for (int c = 0; c < kK; ++c) {
        const T x = qa.v[r] - ka.v[c];
        const T x2 = x * x;
        const T sin_x = qs.v[r] * kc.v[c] - qc.v[r] * ks.v[c];
        num[r][c] *= hd_fmax(hd_fabs(sin_x), x2 * kPoly + kTiny);
        den[r][c] *= hd_fmax(hd_fabs(x), kTiny);
        if constexpr (kSigned) {
          // The sign bit of s(x): sin x and x differ in sign, counted where |x| >= t (the sign
          // bit of x^2 - t^2 clear); below t, s > 0 whatever the rounding of sin x. Integer
          // bits, not bools: 3 instructions and no predicate registers.
          const Bits flip = (bits_of(sin_x) ^ bits_of(x)) & ~bits_of(x2 - kTiny2);
          if constexpr (kMode == FactorMode::kPowerOdd) {
            neg[r][c] ^= flip;
          } else {
            neg[r][c] |= flip;
          }
        }
      }
    }
  };
  // The tables are (3 D, tile) arrays (a, sin, cos one after another: carve), walked by pointer
  // so that every load of a group is an immediate offset from one register.
  const T* q = rows;
  const T* k = cols;
  for (int d0 = 0; d0 < dim; d0 += kEvery, q += kEvery * kRowStride, k += kEvery * kColStride) {
    if (d0 + kEvery <= dim) {
      FLT_UNROLL
      for (int u = 0; u < kEvery; ++u) dimension(q, k, u);
    } else {
      for (int u = 0; u < dim - d0; ++u) dimension(q, k, u);  // the last, partial group
    }
    FLT_UNROLL
    for (int r = 0; r < kR; ++r) {
      FLT_UNROLL
      for (int c = 0; c < kK; ++c) {
        const Bits nb = bits_of(num[r][c]) & N::kExpField;
        num[r][c] *= from_bits<T>(N::kTwoBias - nb);  // 0 stays 0, NaN stays NaN
        const Bits db = bits_of(den[r][c]);
        den[r][c] = from_bits<T>((db & N::kMantField) | N::kOne);
        ex[r][c] += static_cast<int>(nb >> N::kMantBits) - static_cast<int>(db >> N::kMantBits);
      }
    }
  }
  FLT_UNROLL
  for (int r = 0; r < kR; ++r) {
    FLT_UNROLL
    for (int c = 0; c < kK; ++c) {
      const T ratio = divide<T, kFast>(num[r][c], den[r][c]);
      T m = ratio;
      for (int e = 1; e < power; ++e) m *= ratio;
      const bool nan = m != m;
      bool zero = m == T(0) || !valid(r, c);
      const bool negative = (neg[r][c] >> (8 * sizeof(Bits) - 1)) != 0;
      if constexpr (kMode == FactorMode::kRelu) zero = zero || (negative && !nan);
      if constexpr (kMode == FactorMode::kPowerOdd) m = negative ? -m : m;
      mant[r][c] = zero ? T(0) : m;
      expo[r][c] = zero ? kNone : power * ex[r][c];
    }
  }
}

/// acc[r][4 u + c] += w_i[r] x_i[4 (tx + kX u) + c] over `count` rows i of weights (kR per row,
/// rows `w_stride` apart) and of values (rows `stride` apart, columns below `stride`): the product
/// of a weight tile and a value tile, the forward's W^T V and the backward's dv.
template <typename T, int kR, int kU, int kX>
FLT_HD_INLINE void add_weighted_rows(T (&acc)[kR][4 * kU], const T* w, int w_stride, const T* x,
                                     int stride, int count, int tx) {
  for (int i = 0; i < count; ++i) {
    const auto wi = load_vec<T, kR>(w + i * w_stride);
    FLT_UNROLL
    for (int u = 0; u < kU; ++u) {
      const int col = 4 * (tx + kX * u);
      if (col < stride) {
        const auto xi = load_vec<T, 4>(x + i * stride + col);
        FLT_UNROLL
        for (int r = 0; r < kR; ++r) {
          FLT_UNROLL
          for (int c = 0; c < 4; ++c) acc[r][4 * u + c] += wi.v[r] * xi.v[c];
        }
      }
    }
  }
}

}  // namespace flt::kernels::cuda::tiled
