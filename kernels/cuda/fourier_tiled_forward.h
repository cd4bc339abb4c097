#pragma once
// The tiled Fourier-attention forward's thread block (ForwardBlock): the phases described in
// fourier_tiled_common.h, run by the CUDA kernel (fourier_attention.cu) and the host emulation.

#include "fourier_tiled_common.h"

namespace flt::kernels::cuda::tiled {

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
    add_weighted_rows<T, kR, kU, kX>(g.acc, s.w + ty * kR, kBQ, s.v, stride, kBK, tx);
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
