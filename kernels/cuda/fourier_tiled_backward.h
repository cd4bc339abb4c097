#pragma once
// The tiled Fourier-attention backward's thread blocks (BackwardBlock: query blocks give dq and
// partial dR, key blocks dk and dv) and dR's deterministic sum; the weights are recomputed with
// the forward's pair_tile (fourier_tiled_common.h).

#include "fourier_tiled_common.h"

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
    // Load the owned rows' tables into registers (thread t: rows ty kR + r, dimensions
    // tx + kX u) and zero the accumulators.
    ex.phase([&](int t, Regs& reg) {
      FLT_UNROLL
      for (int r = 0; r < kR; ++r) {
        const int64_t o = o0 + (t / kX) * kR + r;
        FLT_UNROLL
        for (int u = 0; u < kDims; ++u) {
          const int d = t % kX + kX * u;
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
      add_weighted_rows<T, kR, kU, kX>(reg.acc_v, s.weights + ty * kR, kBO, s.sgr, stride, kBS, tx);
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
