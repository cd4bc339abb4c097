#pragma once
// The tiled Fourier-attention forward (issue 32): the arithmetic of one thread block, written once
// as __host__ __device__ code so that the CUDA kernel (fourier_attention.cu) and a host emulation
// compiled by g++ (tests/cuda_emulation) run the same tiling logic. Plain C++: no CUDA headers.
//
// A block owns kBlockQueries queries of one (batch, head) and loops over tiles of kBlockKeys keys.
// Threads form a (kThreadsY, kThreadsX) grid; thread (ty, tx) owns the kRows x kKeys register tile
// of (query, key) pairs with queries ty * kRows + r and keys tx * kKeys + c. Per key tile:
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
    using N = Num<T>;
    using Bits = typename N::Bits;
    constexpr int kEvery = fourier::Precision<T>::kRenormEvery;
    constexpr T kTiny = N::kTiny, kPoly = -N::kTiny / 6;
    constexpr T kTiny2 = N::kTiny * N::kTiny;
    const int tx = t % kX, ty = t / kX;
    T num[kR][kK], den[kR][kK];
    int ex[kR][kK];
    Bits neg[kR][kK];  // the sign bit: an odd number of negative factors (kRelu: any)
    FLT_UNROLL
    for (int r = 0; r < kR; ++r) {
      FLT_UNROLL
      for (int c = 0; c < kK; ++c) num[r][c] = den[r][c] = T(1), ex[r][c] = 0, neg[r][c] = 0;
    }
    // One dimension for every pair of the register tile; tables at q + u * kBQ, k + u * kBK.
    auto dimension = [&](const T* q, const T* k, int u) {
      const auto qa = load_vec<T, kR>(q + u * kBQ);
      const auto qs = load_vec<T, kR>(q + (u + a.dim) * kBQ);
      const auto qc = load_vec<T, kR>(q + (u + 2 * a.dim) * kBQ);
      const auto ka = load_vec<T, kK>(k + u * kBK);
      const auto ks = load_vec<T, kK>(k + (u + a.dim) * kBK);
      const auto kc = load_vec<T, kK>(k + (u + 2 * a.dim) * kBK);
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
    const T* q = s.qa + ty * kR;
    const T* k = s.ka + tx * kK;
    for (int d0 = 0; d0 < a.dim; d0 += kEvery, q += kEvery * kBQ, k += kEvery * kBK) {
      if (d0 + kEvery <= a.dim) {
        FLT_UNROLL
        for (int u = 0; u < kEvery; ++u) dimension(q, k, u);
      } else {
        for (int u = 0; u < a.dim - d0; ++u) dimension(q, k, u);  // the last, partial group
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
    const int64_t i_base = i0 + ty * kR, j_base = j0 + tx * kK;
    FLT_UNROLL
    for (int r = 0; r < kR; ++r) {
      int row_top = kNone;
      FLT_UNROLL
      for (int c = 0; c < kK; ++c) {
        const T ratio = divide<T, Cfg::kFastDivide>(num[r][c], den[r][c]);
        T m = ratio;
        for (int e = 1; e < a.power; ++e) m *= ratio;
        const bool nan = m != m;
        bool zero = m == T(0) || j_base + c >= a.lk || (a.causal && j_base + c > i_base + r);
        const bool negative = (neg[r][c] >> (8 * sizeof(Bits) - 1)) != 0;
        if constexpr (kMode == FactorMode::kRelu) zero = zero || (negative && !nan);
        if constexpr (kMode == FactorMode::kPowerOdd) m = negative ? -m : m;
        g.mant[r][c] = zero ? T(0) : m;
        g.expo[r][c] = zero ? kNone : a.power * ex[r][c];
        row_top = g.expo[r][c] > row_top ? g.expo[r][c] : row_top;
      }
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
