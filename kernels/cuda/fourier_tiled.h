#pragma once
// The tiled Fourier-attention forward and backward (issue 32): the arithmetic of one thread block,
// written once as __host__ __device__ code so that the CUDA kernels (fourier_attention.cu) and a
// host emulation compiled by g++ (tests/cuda_emulation) run the same tiling logic. Plain C++: no
// CUDA headers. The backward (BackwardBlock, further down) reuses the forward's pair_tile.
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

template <class Cfg, typename T, FactorMode kMode>
struct ForwardBlock {
  static constexpr int kX = Cfg::kThreadsX, kY = Cfg::kThreadsY, kR = Cfg::kRows, kK = Cfg::kKeys,
                       kU = Cfg::kValueChunks;
  static constexpr int kBQ = Cfg::kBlockQueries, kBK = Cfg::kBlockKeys;
  static constexpr bool kSigned = kMode == FactorMode::kPowerOdd || kMode == FactorMode::kRelu;
  static_assert(kR % 2 == 0 || kR == 1, "rows per thread: 1 or even (vector loads)");
  static_assert(kK % 2 == 0 || kK == 1, "keys per thread: 1 or even (vector loads)");
  static_assert(kBQ % 4 == 0 && kBK % 4 == 0, "tile sides keep shared arrays 16-byte aligned");

  /// What one thread keeps from phase to phase (registers on the device).
  struct Regs {
    T mant[kR][kK];
    int expo[kR][kK];
    T acc[kR][4 * kU];
    T part_sum[kR];  // this thread's keys' share of the row sums (scaled as acc)
    int top[kR];     // the rows' largest exponent so far (every thread of a row agrees)
  };

  /// Shared-memory layout (offsets in elements of T; the ints of pmax after the T arrays).
  static FLT_HD_INLINE int values_stride(int dv) { return (dv + 3) / 4 * 4; }
  static FLT_HD_INLINE size_t shared_elements(int dim, int dv) {
    return 3 * static_cast<size_t>(dim) * (kBQ + kBK) +
           static_cast<size_t>(kBK) * values_stride(dv) + static_cast<size_t>(kBK) * kBQ +
           static_cast<size_t>(kBQ) * kX;
  }
  static size_t shared_bytes(int dim, int dv) {
    return shared_elements(dim, dv) * sizeof(T) + static_cast<size_t>(kBQ) * kX * sizeof(int);
  }
  static bool supports(int dim, int dv) { return dim >= 1 && dv >= 1 && dv <= Cfg::kMaxValues; }

  struct Smem {
    T *qa, *qs, *qc, *ka, *ks, *kc, *v, *w, *red;
    int* pmax;
  };
  static FLT_HD_INLINE Smem carve(void* base, int dim, int dv) {
    Smem s;
    T* p = static_cast<T*>(base);
    s.qa = p, s.qs = p + dim * kBQ, s.qc = p + 2 * dim * kBQ;
    p += 3 * dim * kBQ;
    s.ka = p, s.ks = p + dim * kBK, s.kc = p + 2 * dim * kBK;
    p += 3 * dim * kBK;
    s.v = p;
    p += kBK * values_stride(dv);
    s.w = p;
    p += kBK * kBQ;
    s.red = p;
    p += kBQ * kX;
    s.pmax = reinterpret_cast<int*>(p);
    return s;
  }

  // Rows [l0, l0 + n) of a (D, L) table into a (D, width) tile; zeros past L.
  static FLT_HD_INLINE void load_table(int t, T* dst, const T* src, int64_t l0, int64_t length,
                                       int dim, int width) {
    for (int e = t; e < dim * width; e += Cfg::kThreads) {
      const int d = e / width, l = e % width;
      dst[e] = l0 + l < length ? src[d * length + l0 + l] : T(0);
    }
  }

  // Phase "weights": mant * 2^expo for the thread's pairs; partial row maxima into pmax.
  static FLT_HD_INLINE void pair_weights(int t, Regs& g, const Smem& s, const ForwardArgs<T>& a,
                                         int64_t i0, int64_t j0) {
    const int tx = t % kX, ty = t / kX;
    const int64_t i_base = i0 + ty * kR, j_base = j0 + tx * kK;
    pair_tile<T, kMode, Cfg::kFastDivide, kR, kK, kBQ, kBK>(
        s.qa + ty * kR, s.ka + tx * kK, a.dim, a.power,
        [&](int r, int c) { return j_base + c < a.lk && !(a.causal && j_base + c > i_base + r); },
        g.mant, g.expo);
    FLT_UNROLL
    for (int r = 0; r < kR; ++r) {
      int row_top = kNone;
      FLT_UNROLL
      for (int c = 0; c < kK; ++c) row_top = g.expo[r][c] > row_top ? g.expo[r][c] : row_top;
      s.pmax[(ty * kR + r) * kX + tx] = row_top;
    }
  }

  // Phase "scale": the rows' new top, accumulators rescaled, weights into W (keys, queries).
  static FLT_HD_INLINE void scale_weights(int t, Regs& g, const Smem& s) {
    const int tx = t % kX, ty = t / kX;
    FLT_UNROLL
    for (int r = 0; r < kR; ++r) {
      int tile_top = kNone;
      for (int x = 0; x < kX; ++x) {
        const int e = s.pmax[(ty * kR + r) * kX + x];
        tile_top = e > tile_top ? e : tile_top;
      }
      const int top = tile_top > g.top[r] ? tile_top : g.top[r];
      const T scale = g.top[r] == kNone ? T(0) : pow2_nonpositive<T>(g.top[r] - top);
      g.top[r] = top;
      g.part_sum[r] *= scale;
      FLT_UNROLL
      for (int c = 0; c < 4 * kU; ++c) g.acc[r][c] *= scale;
      FLT_UNROLL
      for (int c = 0; c < kK; ++c) {
        const T w =
            g.expo[r][c] == kNone ? T(0) : g.mant[r][c] * pow2_nonpositive<T>(g.expo[r][c] - top);
        g.part_sum[r] += w;
        s.w[(tx * kK + c) * kBQ + ty * kR + r] = w;
      }
    }
  }

  // Phase "values": acc[rows, columns] += sum over the tile's keys of W V.
  static FLT_HD_INLINE void accumulate_values(int t, Regs& g, const Smem& s, int dv) {
    const int tx = t % kX, ty = t / kX;
    const int stride = values_stride(dv);
    for (int kk = 0; kk < kBK; ++kk) {
      const auto w = load_vec<T, kR>(s.w + kk * kBQ + ty * kR);
      FLT_UNROLL
      for (int u = 0; u < kU; ++u) {
        const int col = 4 * (tx + kX * u);
        if (col < stride) {
          const auto v = load_vec<T, 4>(s.v + kk * stride + col);
          FLT_UNROLL
          for (int r = 0; r < kR; ++r) {
            FLT_UNROLL
            for (int c = 0; c < 4; ++c) g.acc[r][4 * u + c] += w.v[r] * v.v[c];
          }
        }
      }
    }
  }

  /// The whole block: query tile qblock of (batch, head) bh. Exec runs a phase for every thread
  /// and then waits at a barrier: `ex.phase([&](int t, Regs& g) {...})`.
  template <class Exec>
  static FLT_HD_INLINE void run(Exec& ex, void* shared, const ForwardArgs<T>& a, int64_t qblock,
                                int64_t bh) {
    const Smem s = carve(shared, a.dim, a.dv);
    const int dim = a.dim, dv = a.dv, stride = values_stride(a.dv);
    const int64_t i0 = qblock * kBQ;
    const int64_t key_end = a.causal ? (a.lk < i0 + kBQ ? a.lk : i0 + kBQ) : a.lk;
    const T* qa = a.qa + bh * dim * a.lq;
    const T* qs = a.qs + bh * dim * a.lq;
    const T* qc = a.qc + bh * dim * a.lq;
    const T* ka = a.ka + bh * dim * a.lk;
    const T* ks = a.ks + bh * dim * a.lk;
    const T* kc = a.kc + bh * dim * a.lk;
    const T* v = a.v + bh * a.lk * dv;
    ex.phase([&](int t, Regs& g) {
      FLT_UNROLL
      for (int r = 0; r < kR; ++r) {
        g.top[r] = kNone;
        g.part_sum[r] = T(0);
        FLT_UNROLL
        for (int c = 0; c < 4 * kU; ++c) g.acc[r][c] = T(0);
      }
      load_table(t, s.qa, qa, i0, a.lq, dim, kBQ);
      load_table(t, s.qs, qs, i0, a.lq, dim, kBQ);
      load_table(t, s.qc, qc, i0, a.lq, dim, kBQ);
    });
    for (int64_t j0 = 0; j0 < key_end; j0 += kBK) {
      ex.phase([&](int t, Regs&) {
        load_table(t, s.ka, ka, j0, a.lk, dim, kBK);
        load_table(t, s.ks, ks, j0, a.lk, dim, kBK);
        load_table(t, s.kc, kc, j0, a.lk, dim, kBK);
        // Element e = kk * stride + c walked without a division per element.
        const int step_rows = Cfg::kThreads / stride, step_cols = Cfg::kThreads % stride;
        int kk = t / stride, c = t % stride;
        for (int e = t; e < kBK * stride; e += Cfg::kThreads) {
          s.v[e] = j0 + kk < a.lk && c < dv ? v[(j0 + kk) * dv + c] : T(0);
          kk += step_rows, c += step_cols;
          if (c >= stride) c -= stride, ++kk;
        }
      });
      ex.phase([&](int t, Regs& g) { pair_weights(t, g, s, a, i0, j0); });
      ex.phase([&](int t, Regs& g) { scale_weights(t, g, s); });
      ex.phase([&](int t, Regs& g) { accumulate_values(t, g, s, dv); });
    }
    ex.phase([&](int t, Regs& g) {
      const int tx = t % kX, ty = t / kX;
      FLT_UNROLL
      for (int r = 0; r < kR; ++r) s.red[(ty * kR + r) * kX + tx] = g.part_sum[r];
    });
    ex.phase([&](int t, Regs& g) {
      const int tx = t % kX, ty = t / kX;
      FLT_UNROLL
      for (int r = 0; r < kR; ++r) {
        const int64_t i = i0 + ty * kR + r;
        if (i >= a.lq) continue;
        T total = 0;
        for (int x = 0; x < kX; ++x) total += s.red[(ty * kR + r) * kX + x];  // fixed order
        if (g.top[r] == kNone) total = T(0);
        const T inv = total == T(0) ? T(0) : T(1) / total;  // vanished row: output 0
        const int64_t row = bh * a.lq + i;
        FLT_UNROLL
        for (int u = 0; u < kU; ++u) {
          FLT_UNROLL
          for (int c = 0; c < 4; ++c) {
            const int col = 4 * (tx + kX * u) + c;
            if (col < dv) a.out[row * dv + col] = g.acc[r][4 * u + c] * inv;
          }
        }
        if (tx == 0) {
          a.row_max[row] = g.top[r] == kNone ? static_cast<T>(kNoneOut) : static_cast<T>(g.top[r]);
          a.row_sum[row] = total;
        }
      }
    });
  }
};

}  // namespace flt::kernels::cuda::tiled

namespace flt::kernels::cuda::tiled {

/// A backward tile shape: the pair tile as TileConfig (kRows owned rows by kKeys streamed columns
/// per thread), kDims dimensions per thread in the gradient pass (D <= kThreadsX kDims) and
/// kValueChunks chunks of 4 dv columns (Dv <= 4 kThreadsX kValueChunks).
template <int kThreadsX_, int kThreadsY_, int kRows_, int kKeys_, int kDims_, int kValueChunks_,
          bool kFastDivide_, int kMinBlocks_ = 1>
struct BackwardConfig {
  static constexpr int kThreadsX = kThreadsX_, kThreadsY = kThreadsY_;
  static constexpr int kThreads = kThreadsX * kThreadsY;
  static constexpr int kRows = kRows_, kKeys = kKeys_, kDims = kDims_;
  static constexpr int kValueChunks = kValueChunks_, kMinBlocks = kMinBlocks_;
  static constexpr int kBlockOwned = kThreadsY * kRows, kBlockStreamed = kThreadsX * kKeys;
  static constexpr int kMaxDim = kThreadsX * kDims, kMaxValues = 4 * kThreadsX * kValueChunks;
  static constexpr bool kFastDivide = kFastDivide_;
};

/// Operands of the tiled backward: the forward's tables, v, grad_out g (B*H, Lq, Dv), the
/// forward's row_max and row_sum, delta = g . out (B*H, Lq), r (H, D).
template <typename T>
struct BackwardArgs {
  int64_t heads = 0, lq = 0, lk = 0;
  int dim = 0, dv = 0, power = 4;
  bool causal = false;
  const T *qa = nullptr, *qs = nullptr, *qc = nullptr;
  const T *ka = nullptr, *ks = nullptr, *kc = nullptr;
  const T *v = nullptr, *g = nullptr, *row_max = nullptr, *row_sum = nullptr, *delta = nullptr;
  const T* r = nullptr;
  T* grad = nullptr;        ///< dq (B*H, Lq, D) (queries owned) or dk (B*H, Lk, D) (keys owned)
  T* dv_out = nullptr;      ///< dv (B*H, Lk, Dv) (keys owned)
  T* dr_partial = nullptr;  ///< (B*H, query blocks, D): sum of G c(x) x per block (queries owned)
};

/// c(x) = cot x - 1/x from x, sin x, cos x: the series below t (the closed form cancels there),
/// 0 at an exact zero of x sin x (a zero weight: its coupling is 0).
template <typename T, bool kFast>
FLT_HD_INLINE T cot_minus_inv_tile(T x, T x2, T sin_x, T cos_x) {
  constexpr T kTiny2 = Num<T>::kTiny * Num<T>::kTiny;
  const T series = x * (T(-1.0 / 3) + x2 * T(-1.0 / 45));  // next term 2 x^5 / 945
  const T denom = x * sin_x;
  const T closed = denom == T(0) ? T(0) : divide<T, kFast>(x * cos_x - sin_x, denom);
  return x2 < kTiny2 ? series : closed;
}

/// The backward's two kernels as one block: kOwnKeys false, the block owns kBlockOwned queries
/// (dq, and dR's partial sums) and streams key tiles; true, it owns keys (dk, dv) and streams query
/// tiles. Both recompute the weights (no (L, L) matrix kept) and need no atomics. Per tile:
///   load      the streamed tables, dot operand (v or g) and, keys owned, g and the queries' stats
///   coupling  the pair tile's weights A = w / row_sum, G = A (g . v - delta) into shared memory
///   gradient  thread (ty, tx) owns rows ty kRows + r and dimensions tx + kThreadsX u:
///             acc += G c(x) over the tile (x = owned - streamed: c is odd, so dk = p r acc too);
///             keys owned: dv += A g (columns 4 (tx + kThreadsX u) ...)
template <class Cfg, typename T, FactorMode kMode, bool kOwnKeys>
struct BackwardBlock {
  static constexpr int kX = Cfg::kThreadsX, kY = Cfg::kThreadsY, kR = Cfg::kRows, kK = Cfg::kKeys,
                       kU = Cfg::kValueChunks, kDims = Cfg::kDims;
  static constexpr int kBO = Cfg::kBlockOwned, kBS = Cfg::kBlockStreamed;
  static_assert(3 * kBS >= kBO, "dR's reduction fits over the streamed tables");
  static_assert((kBS & (kBS - 1)) == 0, "the gradient pass rotates within a power-of-2 tile");
  static_assert(kBO % 4 == 0 && kBS % 4 == 0, "tile sides keep shared arrays 16-byte aligned");

  struct Regs {
    T oa[kR][kDims], os[kR][kDims], oc[kR][kDims];  // owned tables: the thread's rows and dims
    T acc[kR][kDims];                               // sum of G c(x)
    T acc_r[kR][kDims];                             // queries owned: sum of G c(x) x
    T acc_v[kR][4 * kU];                            // keys owned: dv
    int top[kR];                                    // queries owned: row_max, row_sum, delta
    T inv_sum[kR], delta[kR];
  };

  static FLT_HD_INLINE int values_stride(int dv) { return (dv + 3) / 4 * 4; }
  static FLT_HD_INLINE size_t shared_elements(int dim, int dv) {
    const size_t tables = 3 * static_cast<size_t>(dim) * (kBO + kBS);
    const size_t dots = static_cast<size_t>(dv) * (kBO + kBS);
    const size_t keys_owned = kOwnKeys ? static_cast<size_t>(kBS) * values_stride(dv) + 3 * kBS +
                                             static_cast<size_t>(kBS) * kBO
                                       : 0;
    return tables + dots + keys_owned + static_cast<size_t>(kBO) * kBS;
  }
  static size_t shared_bytes(int dim, int dv) { return shared_elements(dim, dv) * sizeof(T); }
  static bool supports(int dim, int dv) {
    return dim >= 1 && dim <= Cfg::kMaxDim && dv >= 1 && dv <= Cfg::kMaxValues;
  }

  struct Smem {
    T *ot, *st, *od, *sd, *sgr, *sstat, *coupling, *weights;
    T* red;  // (kBO, D), over st (3 D kBS >= kBO D)
  };
  static FLT_HD_INLINE Smem carve(void* base, int dim, int dv) {
    Smem s;
    T* p = static_cast<T*>(base);
    s.ot = p, p += 3 * dim * kBO;
    s.st = p, p += 3 * dim * kBS;
    s.od = p, p += dv * kBO;
    s.sd = p, p += dv * kBS;
    s.coupling = p, p += kBO * kBS;
    s.red = s.st;  // dR's reduction after the last tile: the streamed tables are free by then
    s.sgr = s.sstat = s.weights = nullptr;
    if (kOwnKeys) {
      s.sgr = p, p += kBS * values_stride(dv);
      s.weights = p, p += kBS * kBO;
      s.sstat = p;
    }
    return s;
  }

  // Rows [l0, l0 + width) of the three (D, L) tables into (3 D, width) with rows `stride` apart;
  // zeros past L.
  static FLT_HD_INLINE void load_tables(int t, T* dst, const T* a, const T* sn, const T* cs,
                                        int64_t l0, int64_t length, int dim, int width,
                                        int stride) {
    for (int e = t; e < 3 * dim * width; e += Cfg::kThreads) {
      const int row = e / width, which = row / dim, d = row % dim, l = e % width;
      const T* src = which == 0 ? a : (which == 1 ? sn : cs);
      dst[row * stride + l] = l0 + l < length ? src[d * length + l0 + l] : T(0);
    }
  }
  // Rows [l0, l0 + width) of a (L, dv) array transposed into (dv, width); zeros past L.
  static FLT_HD_INLINE void load_transposed(int t, T* dst, const T* src, int64_t l0, int64_t length,
                                            int dv, int width) {
    for (int e = t; e < dv * width; e += Cfg::kThreads) {
      const int c = e / width, l = e % width;
      dst[e] = l0 + l < length ? src[(l0 + l) * dv + c] : T(0);
    }
  }

  template <class Exec>
  static FLT_HD_INLINE void run(Exec& ex, void* shared, const BackwardArgs<T>& a, int64_t oblock,
                                int64_t bh) {
    const Smem s = carve(shared, a.dim, a.dv);
    const int dim = a.dim, dv = a.dv, stride = values_stride(a.dv);
    const int64_t owned_len = kOwnKeys ? a.lk : a.lq, streamed_len = kOwnKeys ? a.lq : a.lk;
    const int64_t o0 = oblock * kBO;
    // Owned and streamed tables of this (batch, head).
    const int64_t qoff = bh * dim * a.lq, koff = bh * dim * a.lk;
    const T* oa = kOwnKeys ? a.ka + koff : a.qa + qoff;
    const T* os = kOwnKeys ? a.ks + koff : a.qs + qoff;
    const T* oc = kOwnKeys ? a.kc + koff : a.qc + qoff;
    const T* sa = kOwnKeys ? a.qa + qoff : a.ka + koff;
    const T* ss = kOwnKeys ? a.qs + qoff : a.ks + koff;
    const T* sc = kOwnKeys ? a.qc + qoff : a.kc + koff;
    // Dot operands: g . v with g on the query side.
    const T* g = a.g + bh * a.lq * dv;
    const T* v = a.v + bh * a.lk * dv;
    const T* stats_max = a.row_max + bh * a.lq;
    const T* stats_sum = a.row_sum + bh * a.lq;
    const T* stats_delta = a.delta + bh * a.lq;
    const T* rh = a.r + (bh % a.heads) * dim;
    // Causal: queries >= keys; skip the streamed tiles no pair of the block sees.
    int64_t s_begin = 0, s_end = streamed_len;
    if (a.causal) {
      if (kOwnKeys) {
        s_begin = o0 / kBS * kBS;
      } else {
        s_end = a.lk < o0 + kBO ? a.lk : o0 + kBO;
      }
    }
    ex.phase([&](int t, Regs& reg) {
      const int tx = t % kX, ty = t / kX;
      FLT_UNROLL
      for (int r = 0; r < kR; ++r) {
        const int64_t o = o0 + ty * kR + r;
        FLT_UNROLL
        for (int u = 0; u < kDims; ++u) {
          const int d = tx + kX * u;
          const bool in = o < owned_len && d < dim;
          reg.oa[r][u] = in ? oa[d * owned_len + o] : T(0);
          reg.os[r][u] = in ? os[d * owned_len + o] : T(0);
          reg.oc[r][u] = in ? oc[d * owned_len + o] : T(0);
          reg.acc[r][u] = reg.acc_r[r][u] = T(0);
        }
        FLT_UNROLL
        for (int c = 0; c < 4 * kU; ++c) reg.acc_v[r][c] = T(0);
        if (!kOwnKeys) {
          const bool in = o < owned_len;
          const T sum = in ? stats_sum[o] : T(0);
          reg.top[r] = sum == T(0) ? 0 : static_cast<int>(stats_max[o]);
          reg.inv_sum[r] = sum == T(0) ? T(0) : T(1) / sum;
          reg.delta[r] = in ? stats_delta[o] : T(0);
        }
      }
      load_tables(t, s.ot, oa, os, oc, o0, owned_len, dim, kBO, kBO);
      load_transposed(t, s.od, kOwnKeys ? v : g, o0, owned_len, dv, kBO);
    });
    for (int64_t s0 = s_begin; s0 < s_end; s0 += kBS) {
      ex.phase([&](int t, Regs&) {
        load_tables(t, s.st, sa, ss, sc, s0, streamed_len, dim, kBS, kBS);
        load_transposed(t, s.sd, kOwnKeys ? g : v, s0, streamed_len, dv, kBS);
        if (kOwnKeys) {
          for (int e = t; e < kBS * stride; e += Cfg::kThreads) {
            const int i = e / stride, c = e % stride;
            s.sgr[e] = s0 + i < streamed_len && c < dv ? g[(s0 + i) * dv + c] : T(0);
          }
          for (int i = t; i < kBS; i += Cfg::kThreads) {
            const bool in = s0 + i < streamed_len;
            const T sum = in ? stats_sum[s0 + i] : T(0);
            s.sstat[i] = sum == T(0) ? T(0) : stats_max[s0 + i];
            s.sstat[kBS + i] = sum == T(0) ? T(0) : T(1) / sum;
            s.sstat[2 * kBS + i] = in ? stats_delta[s0 + i] : T(0);
          }
        }
      });
      ex.phase([&](int t, Regs& reg) { coupling(t, reg, s, a, o0, s0, owned_len, streamed_len); });
      ex.phase([&](int t, Regs& reg) { gradient(t, reg, s, dim, stride); });
    }
    // Write the owned rows' gradients; queries owned: dR's partial sums over the block's rows.
    ex.phase([&](int t, Regs& reg) {
      const int tx = t % kX, ty = t / kX;
      FLT_UNROLL
      for (int r = 0; r < kR; ++r) {
        const int64_t o = o0 + ty * kR + r;
        FLT_UNROLL
        for (int u = 0; u < kDims; ++u) {
          const int d = tx + kX * u;
          if (d >= dim) continue;
          if (o < owned_len) {
            a.grad[(bh * owned_len + o) * dim + d] =
                static_cast<T>(a.power) * rh[d] * reg.acc[r][u];
          }
          if (!kOwnKeys) s.red[(ty * kR + r) * dim + d] = reg.acc_r[r][u];
        }
        if (kOwnKeys && o < owned_len) {
          FLT_UNROLL
          for (int u = 0; u < kU; ++u) {
            FLT_UNROLL
            for (int c = 0; c < 4; ++c) {
              const int col = 4 * (tx + kX * u) + c;
              if (col < dv) a.dv_out[(bh * owned_len + o) * dv + col] = reg.acc_v[r][4 * u + c];
            }
          }
        }
      }
    });
    if (!kOwnKeys) {
      ex.phase([&](int t, Regs&) {
        const int64_t blocks = (owned_len + kBO - 1) / kBO;
        for (int d = t; d < dim; d += Cfg::kThreads) {
          T sum = 0;
          for (int o = 0; o < kBO; ++o) sum += s.red[o * dim + d];  // fixed order
          a.dr_partial[(bh * blocks + oblock) * dim + d] = sum;
        }
      });
    }
  }

  // Phase "coupling": A and G = A (g . v - delta) of the thread's pairs into shared memory.
  static FLT_HD_INLINE void coupling(int t, Regs& reg, const Smem& s, const BackwardArgs<T>& a,
                                     int64_t o0, int64_t s0, int64_t owned_len,
                                     int64_t streamed_len) {
    const int tx = t % kX, ty = t / kX;
    const int64_t o_base = o0 + ty * kR, s_base = s0 + tx * kK;
    T mant[kR][kK];
    int expo[kR][kK];
    pair_tile<T, kMode, Cfg::kFastDivide, kR, kK, kBO, kBS>(
        s.ot + ty * kR, s.st + tx * kK, a.dim, a.power,
        [&](int r, int c) {
          const int64_t o = o_base + r, i = s_base + c;
          const int64_t query = kOwnKeys ? i : o, key = kOwnKeys ? o : i;
          return o < owned_len && i < streamed_len && !(a.causal && key > query);
        },
        mant, expo);
    T gv[kR][kK];
    FLT_UNROLL
    for (int r = 0; r < kR; ++r) {
      FLT_UNROLL
      for (int c = 0; c < kK; ++c) gv[r][c] = T(0);
    }
    for (int cc = 0; cc < a.dv; ++cc) {
      const auto ov = load_vec<T, kR>(s.od + cc * kBO + ty * kR);
      const auto sv = load_vec<T, kK>(s.sd + cc * kBS + tx * kK);
      FLT_UNROLL
      for (int r = 0; r < kR; ++r) {
        FLT_UNROLL
        for (int c = 0; c < kK; ++c) gv[r][c] += ov.v[r] * sv.v[c];
      }
    }
    FLT_UNROLL
    for (int r = 0; r < kR; ++r) {
      FLT_UNROLL
      for (int c = 0; c < kK; ++c) {
        const int col = tx * kK + c;
        const int top = kOwnKeys ? static_cast<int>(s.sstat[col]) : reg.top[r];
        const T inv_sum = kOwnKeys ? s.sstat[kBS + col] : reg.inv_sum[r];
        const T delta = kOwnKeys ? s.sstat[2 * kBS + col] : reg.delta[r];
        const T w = expo[r][c] == kNone ? T(0) : mant[r][c] * pow2_nonpositive<T>(expo[r][c] - top);
        const T attn = w * inv_sum;
        s.coupling[(ty * kR + r) * kBS + col] = attn * (gv[r][c] - delta);
        if (kOwnKeys) s.weights[col * kBO + ty * kR + r] = attn;
      }
    }
  }

  // Phase "gradient": acc += G c(x) over the tile's streamed rows; keys owned: dv += A g.
  // Streamed rows in groups of kGroup (vector loads); 2 for double, whose registers are 64-bit.
  static constexpr int kGroup = sizeof(T) == 4 ? 4 : 2;
  static FLT_HD_INLINE void gradient(int t, Regs& reg, const Smem& s, int dim, int stride) {
    const int tx = t % kX, ty = t / kX;
    // The 16 threads of a row read 16 dimensions' rows of the streamed tables at once; rows kBS
    // floats apart share a bank group, so each thread starts kGroup tx items further on (2-way
    // instead of 16-way conflicts; the coupling loads stop being broadcasts).
    for (int step = 0; step < kBS; step += kGroup) {
      const int i0 = (step + kGroup * tx) & (kBS - 1);
      Vec<T, kGroup> cpl[kR];
      FLT_UNROLL
      for (int r = 0; r < kR; ++r) {
        cpl[r] = load_vec<T, kGroup>(s.coupling + (ty * kR + r) * kBS + i0);
      }
      FLT_UNROLL
      for (int u = 0; u < kDims; ++u) {
        const int d = tx + kX * u;
        if (d >= dim) continue;
        const auto sa = load_vec<T, kGroup>(s.st + d * kBS + i0);
        const auto ss = load_vec<T, kGroup>(s.st + (dim + d) * kBS + i0);
        const auto sc = load_vec<T, kGroup>(s.st + (2 * dim + d) * kBS + i0);
        FLT_UNROLL
        for (int r = 0; r < kR; ++r) {
          FLT_UNROLL
          for (int i = 0; i < kGroup; ++i) {
            const T x = reg.oa[r][u] - sa.v[i];
            const T x2 = x * x;
            const T sin_x = reg.os[r][u] * sc.v[i] - reg.oc[r][u] * ss.v[i];
            const T cos_x = reg.oc[r][u] * sc.v[i] + reg.os[r][u] * ss.v[i];
            const T term =
                cpl[r].v[i] * cot_minus_inv_tile<T, Cfg::kFastDivide>(x, x2, sin_x, cos_x);
            reg.acc[r][u] += term;
            if (!kOwnKeys) reg.acc_r[r][u] += term * x;
          }
        }
      }
    }
    if (kOwnKeys) {
      for (int i = 0; i < kBS; ++i) {
        const auto w = load_vec<T, kR>(s.weights + i * kBO + ty * kR);
        FLT_UNROLL
        for (int u = 0; u < kU; ++u) {
          const int col = 4 * (tx + kX * u);
          if (col < stride) {
            const auto gv = load_vec<T, 4>(s.sgr + i * stride + col);
            FLT_UNROLL
            for (int r = 0; r < kR; ++r) {
              FLT_UNROLL
              for (int c = 0; c < 4; ++c) reg.acc_v[r][4 * u + c] += w.v[r] * gv.v[c];
            }
          }
        }
      }
    }
  }
};

/// dr[h, d] = p / r_d sum over batches and query blocks of the partial sums of G c(x) x
/// (x = r_d (q_d - k_d)); 0 where r_d = 0 (there x = 0 and c(0) = 0).
template <typename T>
FLT_HD_INLINE void dr_entry(int64_t idx, int64_t batch, int64_t heads, int64_t blocks, int dim,
                            int power, const T* partial, const T* r, T* dr) {
  const int64_t h = idx / dim, d = idx % dim;
  T acc = 0;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t blk = 0; blk < blocks; ++blk)
      acc += partial[((b * heads + h) * blocks + blk) * dim + d];
  dr[idx] = r[idx] == T(0) ? T(0) : static_cast<T>(power) * acc / r[idx];
}

}  // namespace flt::kernels::cuda::tiled
