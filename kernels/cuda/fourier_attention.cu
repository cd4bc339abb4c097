// Fourier attention on CUDA: forward and backward without the (L, L, D) tensor and without atomics.
//
//   forward   variants (fourier_forward_variant_name): 0 "naive", the reference: grid (query
//             blocks, B*H), a thread per query, key tiles in shared memory, online max-shift
//             normalisation in base 2 (as the CPU kernel: weight = m * 2^e); the others tile
//             queries and keys, a register tile of pairs per thread (fourier_tiled.h, shared with
//             the host emulation test). fourier_forward runs kDefaultForward where it fits.
//   backward  variants (fourier_backward_variant_name): 0 "naive": 1. dq and per-block partial dR:
//             a thread per query, key tiles in shared memory; 2. dk and dv: a thread per key,
//             query tiles in shared memory (no atomics: each thread owns its key's gradients);
//             3. dR: a deterministic sum of the partials. 1 "tiled_q32_k32": the same split
//             (dq and dR partials by query blocks, dk and dv by key blocks, then dR) with register
//             tiles of pairs (fourier_tiled.h); fourier_backward runs it where it fits.
// Any L (tiles loop over the whole length), D and Dv up to kFourierMaxDim, r always (H, D).
#include <cuda_runtime.h>

#include <climits>
#include <type_traits>

#include "flt/kernels/fourier_series.h"
#include "flt_cuda_kernels.h"
#include "fourier_tiled.h"

namespace flt::kernels::cuda {
namespace {

using fourier::FactorMode;

constexpr int kThreads = 128;
constexpr size_t kSharedBudget = 48 * 1024;
constexpr long long kNoWeight = -(1LL << 60);  // row_max of a row whose weights all vanished

#define FLT_CUDA_TRY(expr)                        \
  do {                                            \
    const cudaError_t flt_err_ = (expr);          \
    if (flt_err_ != cudaSuccess) return flt_err_; \
  } while (0)

template <typename T>
__device__ __forceinline__ T pow2(long long n) {
  return n < -2000 ? T(0) : ldexp(T(1), static_cast<int>(n));
}

// sin and cos of r[h, d] * x for x (B, H, L, D).
template <typename T>
__global__ void sincos_kernel(int64_t total, int64_t heads, int64_t length, int64_t dim,
                              const T* __restrict__ x, const T* __restrict__ r,
                              T* __restrict__ out_sin, T* __restrict__ out_cos) {
  const int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (idx >= total) return;
  const int64_t d = idx % dim;
  const int64_t h = (idx / (dim * length)) % heads;
  const T a = r[h * dim + d] * x[idx];
  out_sin[idx] = sin(a);
  out_cos[idx] = cos(a);
}

// Weight of one (query, key) pair as mant * 2^expo (mant signed for odd powers); false when the
// weight is exactly zero. Same arithmetic as the CPU kernel: running products of |sin x| (or the
// series) and |x|, exponents moved out every few dimensions. A NaN factor (a NaN or infinite q or
// k) gives a NaN weight, never a zero one (a ReLU zero from an earlier dimension used to return
// before the NaN was seen): every row it enters comes out NaN, as in the CPU kernel.
template <typename T>
__device__ __forceinline__ bool pair_weight(const T* qi, const T* qs, const T* qc, const T* kj,
                                            const T* ks, const T* kc, const T* r, int dim,
                                            int power, int mode, T& mant, long long& expo) {
  constexpr T kSmall2 = fourier::Precision<T>::kSmall * fourier::Precision<T>::kSmall;
  constexpr int kEvery = fourier::Precision<T>::kRenormEvery;
  T num = 1, den = 1;
  long long num_exp = 0, den_exp = 0;
  bool negative = false, any_negative = false;
  for (int d = 0; d < dim; ++d) {
    const T x = r[d] * (qi[d] - kj[d]);
    const T x2 = x * x;
    const T sin_x = qs[d] * kc[d] - qc[d] * ks[d];
    const bool small = x2 < kSmall2;
    num *= small ? fourier::sinc_series(x2) : fabs(sin_x);
    den *= small ? T(1) : fabs(x);
    const bool flips = !small && ((sin_x < T(0)) != (x < T(0)));  // s(x) < 0
    negative = negative != flips;
    any_negative = any_negative || flips;
    if ((d + 1) % kEvery == 0 || d + 1 == dim) {
      int e = 0;
      num = frexp(num, &e);  // NaN and inf come back unchanged with e = 0
      num_exp += e;
      den = frexp(den, &e);
      den_exp += e;
    }
  }
  const T ratio = num / den;  // both in [1/2, 1): ratio in (1/2, 2); 0 for an infinite |x|; or NaN
  const bool nan = ratio != ratio;
  if (!nan && (ratio == T(0) || (mode == static_cast<int>(FactorMode::kRelu) && any_negative))) {
    return false;  // a zero factor, an infinite |x| (s tends to 0), or ReLU of a negative one
  }
  T m = ratio;
  for (int e = 1; e < power; ++e) m *= ratio;
  mant = (mode == static_cast<int>(FactorMode::kPowerOdd) && negative) ? -m : m;
  expo = static_cast<long long>(power) * (num_exp - den_exp);
  return true;
}

// c(x) = cot x - 1/x from x, sin x, cos x; 0 at an exact zero of sin (its weight is 0 there).
template <typename T>
__device__ __forceinline__ T cot_minus_inv(T x, T sin_x, T cos_x) {
  const T x2 = x * x;
  if (x2 < fourier::Precision<T>::kSmall * fourier::Precision<T>::kSmall) {
    return fourier::cot_minus_inv_series(x, x2);
  }
  const T denom = x * sin_x;
  return denom == T(0) ? T(0) : (x * cos_x - sin_x) / denom;
}

// Loads rows [j0, j0 + n) of a (L, width) array into shared memory.
template <typename T>
__device__ __forceinline__ void load_rows(T* dst, const T* __restrict__ src, int64_t j0, int n,
                                          int width) {
  for (int e = threadIdx.x; e < n * width; e += blockDim.x) dst[e] = src[j0 * width + e];
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    fourier_forward_kernel(FourierDims p, int tile, const T* __restrict__ q,
                           const T* __restrict__ q_sin, const T* __restrict__ q_cos,
                           const T* __restrict__ k, const T* __restrict__ k_sin,
                           const T* __restrict__ k_cos, const T* __restrict__ v,
                           const T* __restrict__ r, T* __restrict__ out, T* __restrict__ row_max,
                           T* __restrict__ row_sum) {
  extern __shared__ unsigned char shared_raw[];
  const int D = static_cast<int>(p.dim), Dv = static_cast<int>(p.dv);
  T* sk = reinterpret_cast<T*>(shared_raw);
  T* ss = sk + tile * D;
  T* sc = ss + tile * D;
  T* sv = sc + tile * D;
  const int64_t bh = blockIdx.y;
  const int64_t i = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x;
  const bool active = i < p.lq;
  const T* rh = r + (bh % p.heads) * D;
  const int64_t qoff = (bh * p.lq + (active ? i : 0)) * D;
  T acc[kFourierMaxDim];
  for (int c = 0; c < Dv; ++c) acc[c] = T(0);
  long long top = kNoWeight;
  T sum = 0;
  const int64_t block_last = min(p.lq, (blockIdx.x + 1) * static_cast<int64_t>(kThreads)) - 1;
  const int64_t key_end = p.causal ? min(p.lk, block_last + 1) : p.lk;
  for (int64_t j0 = 0; j0 < key_end; j0 += tile) {
    const int n = static_cast<int>(min(static_cast<int64_t>(tile), key_end - j0));
    __syncthreads();
    load_rows(sk, k + bh * p.lk * D, j0, n, D);
    load_rows(ss, k_sin + bh * p.lk * D, j0, n, D);
    load_rows(sc, k_cos + bh * p.lk * D, j0, n, D);
    load_rows(sv, v + bh * p.lk * Dv, j0, n, Dv);
    __syncthreads();
    if (!active) continue;
    for (int jj = 0; jj < n; ++jj) {
      if (p.causal && j0 + jj > i) break;
      T m;
      long long e;
      if (!pair_weight(q + qoff, q_sin + qoff, q_cos + qoff, sk + jj * D, ss + jj * D, sc + jj * D,
                       rh, D, p.power, p.mode, m, e)) {
        continue;
      }
      if (e > top) {  // online max shift: rescale what was accumulated
        const T scale = top == kNoWeight ? T(0) : pow2<T>(top - e);
        sum *= scale;
        for (int c = 0; c < Dv; ++c) acc[c] *= scale;
        top = e;
      }
      const T w = m * pow2<T>(e - top);
      sum += w;
      for (int c = 0; c < Dv; ++c) acc[c] += w * sv[jj * Dv + c];
    }
  }
  if (!active) return;
  const int64_t row = bh * p.lq + i;
  const T inv = sum == T(0) ? T(0) : T(1) / sum;  // vanished row: output 0
  for (int c = 0; c < Dv; ++c) out[row * Dv + c] = acc[c] * inv;
  row_max[row] = static_cast<T>(top);
  row_sum[row] = top == kNoWeight ? T(0) : sum;
}

// delta_i = grad_out_i . out_i
template <typename T>
__global__ void row_dot_kernel(int64_t rows, int64_t width, const T* __restrict__ a,
                               const T* __restrict__ b, T* __restrict__ out) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= rows) return;
  T acc = 0;
  for (int64_t c = 0; c < width; ++c) acc += a[i * width + c] * b[i * width + c];
  out[i] = acc;
}

// A_ij = mant * 2^(e - row_max) / row_sum for a visible pair (0 when the weight vanished).
template <typename T>
__device__ __forceinline__ T normalised_weight(bool nonzero, T mant, long long e, T top, T total) {
  if (!nonzero || total == T(0)) return T(0);
  return mant * pow2<T>(e - static_cast<long long>(top)) / total;
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    fourier_dq_kernel(FourierDims p, int tile, const T* __restrict__ q, const T* __restrict__ q_sin,
                      const T* __restrict__ q_cos, const T* __restrict__ k,
                      const T* __restrict__ k_sin, const T* __restrict__ k_cos,
                      const T* __restrict__ v, const T* __restrict__ r,
                      const T* __restrict__ row_max, const T* __restrict__ row_sum,
                      const T* __restrict__ delta, const T* __restrict__ grad_out,
                      T* __restrict__ dq, T* __restrict__ dr_partial) {
  extern __shared__ unsigned char shared_raw[];
  const int D = static_cast<int>(p.dim), Dv = static_cast<int>(p.dv);
  T* sk = reinterpret_cast<T*>(shared_raw);
  T* ss = sk + tile * D;
  T* sc = ss + tile * D;
  T* sv = sc + tile * D;
  const int64_t bh = blockIdx.y;
  const int64_t i = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x;
  const bool active = i < p.lq;
  const T* rh = r + (bh % p.heads) * D;
  const int64_t row = bh * p.lq + (active ? i : 0);
  const T* qi = q + row * D;
  const T* qs = q_sin + row * D;
  const T* qc = q_cos + row * D;
  const T* gi = grad_out + row * Dv;
  T dq_acc[kFourierMaxDim], dr_acc[kFourierMaxDim];
  for (int d = 0; d < D; ++d) dq_acc[d] = dr_acc[d] = T(0);
  const int64_t block_last = min(p.lq, (blockIdx.x + 1) * static_cast<int64_t>(kThreads)) - 1;
  const int64_t key_end = p.causal ? min(p.lk, block_last + 1) : p.lk;
  for (int64_t j0 = 0; j0 < key_end; j0 += tile) {
    const int n = static_cast<int>(min(static_cast<int64_t>(tile), key_end - j0));
    __syncthreads();
    load_rows(sk, k + bh * p.lk * D, j0, n, D);
    load_rows(ss, k_sin + bh * p.lk * D, j0, n, D);
    load_rows(sc, k_cos + bh * p.lk * D, j0, n, D);
    load_rows(sv, v + bh * p.lk * Dv, j0, n, Dv);
    __syncthreads();
    if (!active) continue;
    for (int jj = 0; jj < n; ++jj) {
      if (p.causal && j0 + jj > i) break;
      T m = 0;
      long long e = 0;
      const bool nonzero = pair_weight(qi, qs, qc, sk + jj * D, ss + jj * D, sc + jj * D, rh, D,
                                       p.power, p.mode, m, e);
      const T a = normalised_weight(nonzero, m, e, row_max[row], row_sum[row]);
      if (a == T(0)) continue;
      T gv = 0;
      for (int c = 0; c < Dv; ++c) gv += gi[c] * sv[jj * Dv + c];
      const T coupling = a * (gv - delta[row]);
      for (int d = 0; d < D; ++d) {
        const T diff = qi[d] - sk[jj * D + d];
        const T x = rh[d] * diff;
        const T sin_x = qs[d] * sc[jj * D + d] - qc[d] * ss[jj * D + d];
        const T cos_x = qc[d] * sc[jj * D + d] + qs[d] * ss[jj * D + d];
        const T t = coupling * cot_minus_inv(x, sin_x, cos_x);
        dq_acc[d] += t;
        dr_acc[d] += t * diff;
      }
    }
  }
  if (active) {
    for (int d = 0; d < D; ++d) dq[row * D + d] = static_cast<T>(p.power) * rh[d] * dq_acc[d];
  }
  // Block sum of dr_acc per dimension (tree in shared memory): one partial per block, no atomics.
  __syncthreads();
  T* red = reinterpret_cast<T*>(shared_raw);
  for (int d = 0; d < D; ++d) {
    red[threadIdx.x] = active ? dr_acc[d] : T(0);
    __syncthreads();
    for (int stride = kThreads / 2; stride > 0; stride /= 2) {
      if (threadIdx.x < stride) red[threadIdx.x] += red[threadIdx.x + stride];
      __syncthreads();
    }
    if (threadIdx.x == 0) dr_partial[(bh * gridDim.x + blockIdx.x) * D + d] = red[0];
    __syncthreads();
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    fourier_dkdv_kernel(FourierDims p, int tile, const T* __restrict__ q,
                        const T* __restrict__ q_sin, const T* __restrict__ q_cos,
                        const T* __restrict__ k, const T* __restrict__ k_sin,
                        const T* __restrict__ k_cos, const T* __restrict__ v,
                        const T* __restrict__ r, const T* __restrict__ row_max,
                        const T* __restrict__ row_sum, const T* __restrict__ delta,
                        const T* __restrict__ grad_out, T* __restrict__ dk, T* __restrict__ dv) {
  extern __shared__ unsigned char shared_raw[];
  const int D = static_cast<int>(p.dim), Dv = static_cast<int>(p.dv);
  T* sq = reinterpret_cast<T*>(shared_raw);
  T* ss = sq + tile * D;
  T* sc = ss + tile * D;
  T* sg = sc + tile * D;
  T* stat = sg + tile * Dv;  // delta, row_max, row_sum of the tile
  const int64_t bh = blockIdx.y;
  const int64_t j = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x;
  const bool active = j < p.lk;
  const T* rh = r + (bh % p.heads) * D;
  const int64_t key = bh * p.lk + (active ? j : 0);
  T kj[kFourierMaxDim], ks[kFourierMaxDim], kc[kFourierMaxDim], vj[kFourierMaxDim];
  T dk_acc[kFourierMaxDim], dv_acc[kFourierMaxDim];
  for (int d = 0; d < D; ++d) {
    kj[d] = k[key * D + d];
    ks[d] = k_sin[key * D + d];
    kc[d] = k_cos[key * D + d];
    dk_acc[d] = T(0);
  }
  for (int c = 0; c < Dv; ++c) {
    vj[c] = v[key * Dv + c];
    dv_acc[c] = T(0);
  }
  // Causal: only queries i >= the block's first key see any of its keys.
  const int64_t query_begin = p.causal ? blockIdx.x * static_cast<int64_t>(kThreads) : 0;
  for (int64_t i0 = query_begin; i0 < p.lq; i0 += tile) {
    const int n = static_cast<int>(min(static_cast<int64_t>(tile), p.lq - i0));
    __syncthreads();
    load_rows(sq, q + bh * p.lq * D, i0, n, D);
    load_rows(ss, q_sin + bh * p.lq * D, i0, n, D);
    load_rows(sc, q_cos + bh * p.lq * D, i0, n, D);
    load_rows(sg, grad_out + bh * p.lq * Dv, i0, n, Dv);
    for (int e = threadIdx.x; e < n; e += blockDim.x) {
      stat[e] = delta[bh * p.lq + i0 + e];
      stat[tile + e] = row_max[bh * p.lq + i0 + e];
      stat[2 * tile + e] = row_sum[bh * p.lq + i0 + e];
    }
    __syncthreads();
    if (!active) continue;
    for (int ii = 0; ii < n; ++ii) {
      if (p.causal && i0 + ii < j) continue;
      T m = 0;
      long long e = 0;
      const bool nonzero = pair_weight(sq + ii * D, ss + ii * D, sc + ii * D, kj, ks, kc, rh, D,
                                       p.power, p.mode, m, e);
      const T a = normalised_weight(nonzero, m, e, stat[tile + ii], stat[2 * tile + ii]);
      if (a == T(0)) continue;
      T gv = 0;
      for (int c = 0; c < Dv; ++c) {
        gv += sg[ii * Dv + c] * vj[c];
        dv_acc[c] += a * sg[ii * Dv + c];
      }
      const T coupling = a * (gv - stat[ii]);
      for (int d = 0; d < D; ++d) {
        const T x = rh[d] * (sq[ii * D + d] - kj[d]);
        const T sin_x = ss[ii * D + d] * kc[d] - sc[ii * D + d] * ks[d];
        const T cos_x = sc[ii * D + d] * kc[d] + ss[ii * D + d] * ks[d];
        dk_acc[d] += coupling * cot_minus_inv(x, sin_x, cos_x);
      }
    }
  }
  if (!active) return;
  for (int d = 0; d < D; ++d) dk[key * D + d] = -static_cast<T>(p.power) * rh[d] * dk_acc[d];
  for (int c = 0; c < Dv; ++c) dv[key * Dv + c] = dv_acc[c];
}

// dr[h, d] = power * sum over batches and query blocks of the partials.
template <typename T>
__global__ void dr_reduce_kernel(int64_t batch, int64_t heads, int64_t blocks, int64_t dim,
                                 int power, const T* __restrict__ partial, T* __restrict__ dr) {
  const int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (idx >= heads * dim) return;
  const int64_t h = idx / dim, d = idx % dim;
  T acc = 0;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t blk = 0; blk < blocks; ++blk)
      acc += partial[((b * heads + h) * blocks + blk) * dim + d];
  dr[idx] = static_cast<T>(power) * acc;
}

int64_t blocks_of(int64_t n, int64_t per) {
  return (n + per - 1) / per;
}

// Rows per shared-memory tile: (3 D + Dv + 3) values per row within the budget, at most 32.
template <typename T>
int tile_rows(const FourierDims& p) {
  const size_t row_bytes = (3 * p.dim + p.dv + 3) * sizeof(T);
  const size_t rows = kSharedBudget / row_bytes;
  return static_cast<int>(rows < 1 ? 1 : (rows > 32 ? 32 : rows));
}

template <typename T>
size_t tile_bytes(const FourierDims& p, int tile) {
  const size_t bytes = (3 * p.dim + p.dv + 3) * tile * sizeof(T);
  const size_t reduction = kThreads * sizeof(T);
  return bytes > reduction ? bytes : reduction;
}

cudaError_t check_dims(const FourierDims& p) {
  if (p.dim < 1 || p.dim > kFourierMaxDim || p.dv < 1 || p.dv > kFourierMaxDim ||
      p.batch * p.heads > 65535 || p.lq < 1 || p.lk < 1) {
    return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}

template <typename T>
cudaError_t launch_sincos(const FourierDims& p, const T* q, const T* k, const T* r, T* ws,
                          cudaStream_t stream) {
  const int64_t nq = p.batch * p.heads * p.lq * p.dim, nk = p.batch * p.heads * p.lk * p.dim;
  sincos_kernel<T>
      <<<blocks_of(nq, 256), 256, 0, stream>>>(nq, p.heads, p.lq, p.dim, q, r, ws, ws + nq);
  FLT_CUDA_TRY(cudaGetLastError());
  sincos_kernel<T><<<blocks_of(nk, 256), 256, 0, stream>>>(nk, p.heads, p.lk, p.dim, k, r,
                                                           ws + 2 * nq, ws + 2 * nq + nk);
  return cudaGetLastError();
}

// ---- the tiled forward (fourier_tiled.h) ----------------------------------------------------

// Tables (B*H, D, L) of a = r x, sin a, cos a for the tiled forward.
template <typename T>
__global__ void table_kernel(int64_t total, int64_t heads, int64_t length, int64_t dim,
                             const T* __restrict__ x, const T* __restrict__ r, T* __restrict__ a,
                             T* __restrict__ s, T* __restrict__ c) {
  const int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (idx >= total) return;
  tiled::table_entry(idx, heads, length, dim, x, r, a, s, c);
}

// Runs the block's phases as one thread: each phase, then a block barrier.
template <class Block>
struct DeviceExec {
  typename Block::Regs regs;
  template <class F>
  __device__ __forceinline__ void phase(F&& f) {
    f(static_cast<int>(threadIdx.x), regs);
    __syncthreads();
  }
};

// Signed modes with two value chunks keep one block per SM where two would spill (-Xptxas -v).
template <class Cfg, FactorMode kMode>
constexpr int forward_min_blocks() {
  return kMode == FactorMode::kPowerEven || Cfg::kValueChunks == 1 ? Cfg::kMinBlocks : 1;
}

template <class Cfg, typename T, FactorMode kMode>
__global__ void __launch_bounds__(Cfg::kThreads, (forward_min_blocks<Cfg, kMode>()))
    fourier_tiled_forward_kernel(tiled::ForwardArgs<T> args) {
  extern __shared__ __align__(16) unsigned char tiled_shared[];
  using Block = tiled::ForwardBlock<Cfg, T, kMode>;
  DeviceExec<Block> ex;
  Block::run(ex, tiled_shared, args, blockIdx.x, blockIdx.y);
}

// Shared memory a block may use on the current device (opt-in limit).
size_t shared_limit() {
  int device = 0, bytes = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) !=
          cudaSuccess) {
    return kSharedBudget;
  }
  return static_cast<size_t>(bytes);
}

// A tiled variant: Cfg with one value chunk (Dv <= 4 kThreadsX) and with two.
template <class Cfg1>
struct TiledVariant {
  using Cfg2 = tiled::TileConfig<Cfg1::kThreadsX, Cfg1::kThreadsY, Cfg1::kRows, Cfg1::kKeys, 2,
                                 Cfg1::kFastDivide, Cfg1::kMinBlocks>;
  template <typename T>
  static bool supported(const FourierDims& p) {
    using Block = tiled::ForwardBlock<Cfg2, T, FactorMode::kPowerEven>;
    const bool one = p.dv <= Cfg1::kMaxValues;
    const size_t bytes = one ? tiled::ForwardBlock<Cfg1, T, FactorMode::kPowerEven>::shared_bytes(
                                   static_cast<int>(p.dim), static_cast<int>(p.dv))
                             : Block::shared_bytes(static_cast<int>(p.dim), static_cast<int>(p.dv));
    return Block::supports(static_cast<int>(p.dim), static_cast<int>(p.dv)) &&
           bytes <= shared_limit();
  }

  template <class Cfg, typename T, FactorMode kMode>
  static cudaError_t launch_mode(const FourierDims& p, const tiled::ForwardArgs<T>& args,
                                 cudaStream_t stream) {
    using Block = tiled::ForwardBlock<Cfg, T, kMode>;
    const size_t bytes = Block::shared_bytes(args.dim, args.dv);
    const auto kernel = fourier_tiled_forward_kernel<Cfg, T, kMode>;
    FLT_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(bytes)));
    const dim3 grid(static_cast<unsigned>(blocks_of(p.lq, Cfg::kBlockQueries)),
                    static_cast<unsigned>(p.batch * p.heads));
    kernel<<<grid, Cfg::kThreads, bytes, stream>>>(args);
    return cudaGetLastError();
  }

  template <class Cfg, typename T>
  static cudaError_t launch_cfg(const FourierDims& p, const tiled::ForwardArgs<T>& args,
                                cudaStream_t stream) {
    switch (static_cast<FactorMode>(p.mode)) {
      case FactorMode::kPowerOdd:
        return launch_mode<Cfg, T, FactorMode::kPowerOdd>(p, args, stream);
      case FactorMode::kRelu: return launch_mode<Cfg, T, FactorMode::kRelu>(p, args, stream);
      default:  // kPowerEven and kAbs: |s|^p
        return launch_mode<Cfg, T, FactorMode::kPowerEven>(p, args, stream);
    }
  }

  template <typename T>
  static cudaError_t launch(const FourierDims& p, const T* q, const T* k, const T* v, const T* r,
                            T* out, T* row_max, T* row_sum, T* ws, cudaStream_t stream) {
    const int64_t nq = p.batch * p.heads * p.lq * p.dim, nk = p.batch * p.heads * p.lk * p.dim;
    table_kernel<T><<<blocks_of(nq, 256), 256, 0, stream>>>(nq, p.heads, p.lq, p.dim, q, r, ws,
                                                            ws + nq, ws + 2 * nq);
    FLT_CUDA_TRY(cudaGetLastError());
    T* kt = ws + 3 * nq;
    table_kernel<T><<<blocks_of(nk, 256), 256, 0, stream>>>(nk, p.heads, p.lk, p.dim, k, r, kt,
                                                            kt + nk, kt + 2 * nk);
    FLT_CUDA_TRY(cudaGetLastError());
    tiled::ForwardArgs<T> args;
    args.lq = p.lq, args.lk = p.lk, args.dim = static_cast<int>(p.dim);
    args.dv = static_cast<int>(p.dv), args.power = p.power, args.causal = p.causal;
    args.qa = ws, args.qs = ws + nq, args.qc = ws + 2 * nq;
    args.ka = kt, args.ks = kt + nk, args.kc = kt + 2 * nk;
    args.v = v, args.out = out, args.row_max = row_max, args.row_sum = row_sum;
    return p.dv <= Cfg1::kMaxValues ? launch_cfg<Cfg1, T>(p, args, stream)
                                    : launch_cfg<Cfg2, T>(p, args, stream);
  }
};

// The variants: (threads x, threads y, rows, keys per thread, value chunks, fast divide, blocks
// per SM). 8 pairs per thread fit 128 registers: two blocks of 256 threads per SM, which the
// shared memory allows at D = 64 (about 100 KB each); 16 pairs per thread take one block.
using TiledQ32K64 = TiledVariant<tiled::TileConfig<16, 16, 2, 4, 1, false, 2>>;
using TiledQ64K64 = TiledVariant<tiled::TileConfig<16, 16, 4, 4, 1, false>>;
using TiledQ64K32 = TiledVariant<tiled::TileConfig<16, 16, 4, 2, 1, false, 2>>;
using TiledQ32K64T128 = TiledVariant<tiled::TileConfig<16, 8, 4, 4, 1, false, 2>>;
using TiledQ32K64Fast = TiledVariant<tiled::TileConfig<16, 16, 2, 4, 1, true, 2>>;
using TiledQ64K64Fast = TiledVariant<tiled::TileConfig<16, 16, 4, 4, 1, true>>;
// Double (variant 1 only): 64-bit registers; two blocks per SM would spill (odd and ReLU modes).
using TiledQ32K64Double = TiledVariant<tiled::TileConfig<16, 16, 2, 4, 1, false, 1>>;

constexpr int kVariants = 7;
constexpr const char* kVariantNames[kVariants] = {"naive",
                                                  "tiled_q32_k64_2x4",
                                                  "tiled_q64_k64_4x4",
                                                  "tiled_q64_k32_4x2",
                                                  "tiled_q32_k64_4x4_t128",
                                                  "tiled_q32_k64_2x4_fastdiv",
                                                  "tiled_q64_k64_4x4_fastdiv"};
// What fourier_forward runs where it fits (else the naive kernel). The tiled variants have passed
// only the host emulation of their block code; until a device run of scripts/cuda-harness has
// checked and timed them, the default stays the naive kernel that the GPU suite has verified
// (then: 1, the 2x4 tile, which keeps two blocks per SM at D = 64, or the harness's fastest).
constexpr int kDefaultForward = 0;
// The same for fourier_backward (1: the tiled q32/k32 pair).
constexpr int kDefaultBackward = 0;

// ---- the tiled backward (fourier_tiled.h) ---------------------------------------------------

constexpr int64_t kMinQueryBlock = 16;  // the smallest query block of a tiled dq kernel

// Signed modes keep a sign word per pair: one block per SM (more registers) where two would spill.
template <class Cfg, FactorMode kMode>
constexpr int backward_min_blocks() {
  return kMode == FactorMode::kPowerEven ? Cfg::kMinBlocks : 1;
}

template <class Cfg, typename T, FactorMode kMode, bool kOwnKeys>
__global__ void __launch_bounds__(Cfg::kThreads, (backward_min_blocks<Cfg, kMode>()))
    fourier_tiled_backward_kernel(tiled::BackwardArgs<T> args) {
  extern __shared__ __align__(16) unsigned char tiled_shared[];
  using Block = tiled::BackwardBlock<Cfg, T, kMode, kOwnKeys>;
  DeviceExec<Block> ex;
  Block::run(ex, tiled_shared, args, blockIdx.x, blockIdx.y);
}

template <typename T>
__global__ void tiled_dr_kernel(int64_t batch, int64_t heads, int64_t blocks, int dim, int power,
                                const T* __restrict__ partial, const T* __restrict__ r,
                                T* __restrict__ dr) {
  const int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (idx >= heads * dim) return;
  tiled::dr_entry(idx, batch, heads, blocks, dim, power, partial, r, dr);
}

// The tiled backward: dq (and dR's partial sums) with query blocks of CfgQ, dk and dv with key
// blocks of CfgK; the wide pair (D or Dv above 64) where the narrow one cannot hold the shape.
template <class CfgQ, class CfgK, class CfgQWide, class CfgKWide>
struct TiledBackward {
  static_assert(CfgQ::kBlockOwned >= kMinQueryBlock && CfgQWide::kBlockOwned >= kMinQueryBlock,
                "fourier_backward_workspace holds dR's partial sums of kMinQueryBlock queries");
  template <class Cfg, bool kOwnKeys, typename T>
  static bool fits(const FourierDims& p) {
    using Block = tiled::BackwardBlock<Cfg, T, FactorMode::kPowerEven, kOwnKeys>;
    const int dim = static_cast<int>(p.dim), dv = static_cast<int>(p.dv);
    return Block::supports(dim, dv) && Block::shared_bytes(dim, dv) <= shared_limit();
  }
  static bool narrow(const FourierDims& p) {
    return p.dim <= CfgQ::kMaxDim && p.dv <= CfgQ::kMaxValues && p.dim <= CfgK::kMaxDim &&
           p.dv <= CfgK::kMaxValues;
  }
  template <typename T>
  static bool supported(const FourierDims& p) {
    return narrow(p) ? fits<CfgQ, false, T>(p) && fits<CfgK, true, T>(p)
                     : fits<CfgQWide, false, T>(p) && fits<CfgKWide, true, T>(p);
  }

  template <class Cfg, bool kOwnKeys, typename T, FactorMode kMode>
  static cudaError_t launch_mode(const FourierDims& p, const tiled::BackwardArgs<T>& args,
                                 cudaStream_t stream) {
    using Block = tiled::BackwardBlock<Cfg, T, kMode, kOwnKeys>;
    const size_t bytes = Block::shared_bytes(args.dim, args.dv);
    const auto kernel = fourier_tiled_backward_kernel<Cfg, T, kMode, kOwnKeys>;
    FLT_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(bytes)));
    const dim3 grid(static_cast<unsigned>(blocks_of(kOwnKeys ? p.lk : p.lq, Cfg::kBlockOwned)),
                    static_cast<unsigned>(p.batch * p.heads));
    kernel<<<grid, Cfg::kThreads, bytes, stream>>>(args);
    return cudaGetLastError();
  }

  template <class Cfg, bool kOwnKeys, typename T>
  static cudaError_t launch_block(const FourierDims& p, const tiled::BackwardArgs<T>& args,
                                  cudaStream_t stream) {
    switch (static_cast<FactorMode>(p.mode)) {
      case FactorMode::kPowerOdd:
        return launch_mode<Cfg, kOwnKeys, T, FactorMode::kPowerOdd>(p, args, stream);
      case FactorMode::kRelu:
        return launch_mode<Cfg, kOwnKeys, T, FactorMode::kRelu>(p, args, stream);
      default:  // kPowerEven and kAbs: |s|^p
        return launch_mode<Cfg, kOwnKeys, T, FactorMode::kPowerEven>(p, args, stream);
    }
  }

  template <typename T>
  static cudaError_t launch(const FourierDims& p, const T* q, const T* k, const T* v, const T* r,
                            const T* out, const T* row_max, const T* row_sum, const T* grad_out,
                            T* dq, T* dk, T* dv, T* dr, T* ws, cudaStream_t stream) {
    const int64_t nq = p.batch * p.heads * p.lq * p.dim, nk = p.batch * p.heads * p.lk * p.dim;
    const int64_t rows = p.batch * p.heads * p.lq;
    T* kt = ws + 3 * nq;
    T* delta = ws + fourier_forward_workspace(p);
    T* partial = delta + rows;
    table_kernel<T><<<blocks_of(nq, 256), 256, 0, stream>>>(nq, p.heads, p.lq, p.dim, q, r, ws,
                                                            ws + nq, ws + 2 * nq);
    FLT_CUDA_TRY(cudaGetLastError());
    table_kernel<T><<<blocks_of(nk, 256), 256, 0, stream>>>(nk, p.heads, p.lk, p.dim, k, r, kt,
                                                            kt + nk, kt + 2 * nk);
    FLT_CUDA_TRY(cudaGetLastError());
    row_dot_kernel<T><<<blocks_of(rows, 256), 256, 0, stream>>>(rows, p.dv, grad_out, out, delta);
    FLT_CUDA_TRY(cudaGetLastError());
    tiled::BackwardArgs<T> args;
    args.heads = p.heads, args.lq = p.lq, args.lk = p.lk, args.dim = static_cast<int>(p.dim);
    args.dv = static_cast<int>(p.dv), args.power = p.power, args.causal = p.causal;
    args.qa = ws, args.qs = ws + nq, args.qc = ws + 2 * nq;
    args.ka = kt, args.ks = kt + nk, args.kc = kt + 2 * nk;
    args.v = v, args.g = grad_out, args.row_max = row_max, args.row_sum = row_sum;
    args.delta = delta, args.r = r, args.dv_out = dv, args.dr_partial = partial;
    const bool is_narrow = narrow(p);
    args.grad = dq;
    const cudaError_t dq_err = is_narrow ? launch_block<CfgQ, false, T>(p, args, stream)
                                         : launch_block<CfgQWide, false, T>(p, args, stream);
    FLT_CUDA_TRY(dq_err);
    args.grad = dk;
    const cudaError_t dk_err = is_narrow ? launch_block<CfgK, true, T>(p, args, stream)
                                         : launch_block<CfgKWide, true, T>(p, args, stream);
    FLT_CUDA_TRY(dk_err);
    const int64_t query_blocks =
        blocks_of(p.lq, is_narrow ? CfgQ::kBlockOwned : CfgQWide::kBlockOwned);
    tiled_dr_kernel<T><<<blocks_of(p.heads * p.dim, 256), 256, 0, stream>>>(
        p.batch, p.heads, query_blocks, static_cast<int>(p.dim), p.power, partial, r, dr);
    return cudaGetLastError();
  }
};

// (threads x, threads y, owned rows, streamed columns per thread, dims per thread, dv chunks,
// fast divide, blocks per SM). dq: 32 queries x 64 keys; dk, dv: 32 keys x 32 queries (both
// about 100 KB of shared memory at D = 64: two blocks per SM in float).
using TiledBackwardFloat = TiledBackward<tiled::BackwardConfig<16, 16, 2, 4, 4, 1, false, 2>,
                                         tiled::BackwardConfig<16, 16, 2, 2, 4, 1, false, 2>,
                                         tiled::BackwardConfig<16, 16, 2, 4, 8, 2, false, 1>,
                                         tiled::BackwardConfig<16, 16, 2, 2, 8, 2, false, 1>>;
// The same with c(x)'s division and the weight's num / den by __fdividef.
using TiledBackwardFloatFast = TiledBackward<tiled::BackwardConfig<16, 16, 2, 4, 4, 1, true, 2>,
                                             tiled::BackwardConfig<16, 16, 2, 2, 4, 1, true, 2>,
                                             tiled::BackwardConfig<16, 16, 2, 4, 8, 2, true, 1>,
                                             tiled::BackwardConfig<16, 16, 2, 2, 8, 2, true, 1>>;
// Double: one owned row per thread (64-bit registers; two rows spill).
using TiledBackwardDouble = TiledBackward<tiled::BackwardConfig<16, 16, 1, 4, 4, 1, false, 1>,
                                          tiled::BackwardConfig<16, 16, 1, 2, 4, 1, false, 1>,
                                          tiled::BackwardConfig<16, 16, 1, 4, 8, 2, false, 1>,
                                          tiled::BackwardConfig<16, 16, 1, 2, 8, 2, false, 1>>;
constexpr int kBackwardVariants = 3;
constexpr const char* kBackwardVariantNames[kBackwardVariants] = {"naive", "tiled_q32_k32",
                                                                  "tiled_q32_k32_fastdiv"};

template <typename T>
cudaError_t launch_naive_forward(const FourierDims& p, const T* q, const T* k, const T* v,
                                 const T* r, T* out, T* row_max, T* row_sum, T* ws,
                                 cudaStream_t stream) {
  FLT_CUDA_TRY(launch_sincos(p, q, k, r, ws, stream));
  const int64_t nq = p.batch * p.heads * p.lq * p.dim, nk = p.batch * p.heads * p.lk * p.dim;
  const int tile = tile_rows<T>(p);
  const dim3 grid(static_cast<unsigned>(blocks_of(p.lq, kThreads)),
                  static_cast<unsigned>(p.batch * p.heads));
  fourier_forward_kernel<T><<<grid, kThreads, tile_bytes<T>(p, tile), stream>>>(
      p, tile, q, ws, ws + nq, k, ws + 2 * nq, ws + 2 * nq + nk, v, r, out, row_max, row_sum);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_naive_backward(const FourierDims& p, const T* q, const T* k, const T* v,
                                  const T* r, const T* out, const T* row_max, const T* row_sum,
                                  const T* grad_out, T* dq, T* dk, T* dv, T* dr, T* ws,
                                  cudaStream_t stream) {
  FLT_CUDA_TRY(launch_sincos(p, q, k, r, ws, stream));
  const int64_t nq = p.batch * p.heads * p.lq * p.dim, nk = p.batch * p.heads * p.lk * p.dim;
  const T* q_sin = ws;
  const T* q_cos = ws + nq;
  const T* k_sin = ws + 2 * nq;
  const T* k_cos = ws + 2 * nq + nk;
  T* delta = ws + fourier_forward_workspace(p);
  T* partial = delta + p.batch * p.heads * p.lq;
  const int64_t rows = p.batch * p.heads * p.lq;
  row_dot_kernel<T><<<blocks_of(rows, 256), 256, 0, stream>>>(rows, p.dv, grad_out, out, delta);
  FLT_CUDA_TRY(cudaGetLastError());
  const int tile = tile_rows<T>(p);
  const size_t shared = tile_bytes<T>(p, tile);
  const int64_t query_blocks = blocks_of(p.lq, kThreads);
  const dim3 grid_q(static_cast<unsigned>(query_blocks), static_cast<unsigned>(p.batch * p.heads));
  fourier_dq_kernel<T><<<grid_q, kThreads, shared, stream>>>(p, tile, q, q_sin, q_cos, k, k_sin,
                                                             k_cos, v, r, row_max, row_sum, delta,
                                                             grad_out, dq, partial);
  FLT_CUDA_TRY(cudaGetLastError());
  const dim3 grid_k(static_cast<unsigned>(blocks_of(p.lk, kThreads)),
                    static_cast<unsigned>(p.batch * p.heads));
  fourier_dkdv_kernel<T><<<grid_k, kThreads, shared, stream>>>(
      p, tile, q, q_sin, q_cos, k, k_sin, k_cos, v, r, row_max, row_sum, delta, grad_out, dk, dv);
  FLT_CUDA_TRY(cudaGetLastError());
  dr_reduce_kernel<T><<<blocks_of(p.heads * p.dim, 256), 256, 0, stream>>>(
      p.batch, p.heads, query_blocks, p.dim, p.power, partial, dr);
  return cudaGetLastError();
}

}  // namespace

size_t fourier_forward_workspace(const FourierDims& p) {
  return 3 * p.batch * p.heads * (p.lq + p.lk) * p.dim;  // tiled: a, sin, cos; naive: sin, cos
}

size_t fourier_backward_workspace(const FourierDims& p) {
  // Tables, delta, and dR's partial sums per query block (kMinQueryBlock: the smallest block
  // of the tiled dq kernels; the naive one uses kThreads).
  return fourier_forward_workspace(p) + p.batch * p.heads * p.lq +
         p.batch * p.heads * blocks_of(p.lq, kMinQueryBlock) * p.dim;
}

int fourier_forward_variants() {
  return kVariants;
}

const char* fourier_forward_variant_name(int variant) {
  return variant >= 0 && variant < kVariants ? kVariantNames[variant] : "unknown";
}

bool fourier_forward_variant_supported(int variant, const FourierDims& p, size_t element_size) {
  if (check_dims(p) != cudaSuccess ||
      (element_size != sizeof(float) && element_size != sizeof(double))) {
    return false;
  }
  const bool single = element_size == sizeof(float);
  switch (variant) {
    case 0: return true;
    case 1:
      return single ? TiledQ32K64::supported<float>(p) : TiledQ32K64Double::supported<double>(p);
    case 2: return single && TiledQ64K64::supported<float>(p);
    case 3: return single && TiledQ64K32::supported<float>(p);
    case 4: return single && TiledQ32K64T128::supported<float>(p);
    case 5: return single && TiledQ32K64Fast::supported<float>(p);
    case 6: return single && TiledQ64K64Fast::supported<float>(p);
    default: return false;
  }
}

template <typename T>
cudaError_t fourier_forward_variant(int variant, const FourierDims& p, const T* q, const T* k,
                                    const T* v, const T* r, T* out, T* row_max, T* row_sum, T* ws,
                                    cudaStream_t stream) {
  if (!fourier_forward_variant_supported(variant, p, sizeof(T))) return cudaErrorInvalidValue;
  if constexpr (sizeof(T) == sizeof(double)) {
    if (variant == 1) {
      return TiledQ32K64Double::launch<T>(p, q, k, v, r, out, row_max, row_sum, ws, stream);
    }
  } else {
    switch (variant) {
      case 1: return TiledQ32K64::launch<T>(p, q, k, v, r, out, row_max, row_sum, ws, stream);
      case 2: return TiledQ64K64::launch<T>(p, q, k, v, r, out, row_max, row_sum, ws, stream);
      case 3: return TiledQ64K32::launch<T>(p, q, k, v, r, out, row_max, row_sum, ws, stream);
      case 4: return TiledQ32K64T128::launch<T>(p, q, k, v, r, out, row_max, row_sum, ws, stream);
      case 5: return TiledQ32K64Fast::launch<T>(p, q, k, v, r, out, row_max, row_sum, ws, stream);
      case 6: return TiledQ64K64Fast::launch<T>(p, q, k, v, r, out, row_max, row_sum, ws, stream);
      default: break;
    }
  }
  return launch_naive_forward(p, q, k, v, r, out, row_max, row_sum, ws, stream);
}

template <typename T>
cudaError_t fourier_forward(const FourierDims& p, const T* q, const T* k, const T* v, const T* r,
                            T* out, T* row_max, T* row_sum, T* ws, cudaStream_t stream) {
  FLT_CUDA_TRY(check_dims(p));
  const int variant =
      fourier_forward_variant_supported(kDefaultForward, p, sizeof(T)) ? kDefaultForward : 0;
  return fourier_forward_variant<T>(variant, p, q, k, v, r, out, row_max, row_sum, ws, stream);
}

int fourier_backward_variants() {
  return kBackwardVariants;
}

const char* fourier_backward_variant_name(int variant) {
  return variant >= 0 && variant < kBackwardVariants ? kBackwardVariantNames[variant] : "unknown";
}

bool fourier_backward_variant_supported(int variant, const FourierDims& p, size_t element_size) {
  if (check_dims(p) != cudaSuccess ||
      (element_size != sizeof(float) && element_size != sizeof(double))) {
    return false;
  }
  switch (variant) {
    case 0: return true;
    case 1:
      return element_size == sizeof(float) ? TiledBackwardFloat::supported<float>(p)
                                           : TiledBackwardDouble::supported<double>(p);
    case 2: return element_size == sizeof(float) && TiledBackwardFloatFast::supported<float>(p);
    default: return false;
  }
}

template <typename T>
cudaError_t fourier_backward_variant(int variant, const FourierDims& p, const T* q, const T* k,
                                     const T* v, const T* r, const T* out, const T* row_max,
                                     const T* row_sum, const T* grad_out, T* dq, T* dk, T* dv,
                                     T* dr, T* ws, cudaStream_t stream) {
  if (!fourier_backward_variant_supported(variant, p, sizeof(T))) return cudaErrorInvalidValue;
  if (variant == 1) {
    using Tiled =
        std::conditional_t<sizeof(T) == sizeof(float), TiledBackwardFloat, TiledBackwardDouble>;
    return Tiled::template launch<T>(p, q, k, v, r, out, row_max, row_sum, grad_out, dq, dk, dv, dr,
                                     ws, stream);
  }
  if constexpr (sizeof(T) == sizeof(float)) {
    if (variant == 2) {
      return TiledBackwardFloatFast::launch<T>(p, q, k, v, r, out, row_max, row_sum, grad_out, dq,
                                               dk, dv, dr, ws, stream);
    }
  }
  return launch_naive_backward(p, q, k, v, r, out, row_max, row_sum, grad_out, dq, dk, dv, dr, ws,
                               stream);
}

template <typename T>
cudaError_t fourier_backward(const FourierDims& p, const T* q, const T* k, const T* v, const T* r,
                             const T* out, const T* row_max, const T* row_sum, const T* grad_out,
                             T* dq, T* dk, T* dv, T* dr, T* ws, cudaStream_t stream) {
  FLT_CUDA_TRY(check_dims(p));
  const int variant =
      fourier_backward_variant_supported(kDefaultBackward, p, sizeof(T)) ? kDefaultBackward : 0;
  return fourier_backward_variant<T>(variant, p, q, k, v, r, out, row_max, row_sum, grad_out, dq,
                                     dk, dv, dr, ws, stream);
}

template cudaError_t fourier_forward<float>(const FourierDims&, const float*, const float*,
                                            const float*, const float*, float*, float*, float*,
                                            float*, cudaStream_t);
template cudaError_t fourier_forward<double>(const FourierDims&, const double*, const double*,
                                             const double*, const double*, double*, double*,
                                             double*, double*, cudaStream_t);
template cudaError_t fourier_forward_variant<float>(int, const FourierDims&, const float*,
                                                    const float*, const float*, const float*,
                                                    float*, float*, float*, float*, cudaStream_t);
template cudaError_t fourier_forward_variant<double>(int, const FourierDims&, const double*,
                                                     const double*, const double*, const double*,
                                                     double*, double*, double*, double*,
                                                     cudaStream_t);
template cudaError_t fourier_backward_variant<float>(int, const FourierDims&, const float*,
                                                     const float*, const float*, const float*,
                                                     const float*, const float*, const float*,
                                                     const float*, float*, float*, float*, float*,
                                                     float*, cudaStream_t);
template cudaError_t fourier_backward_variant<double>(int, const FourierDims&, const double*,
                                                      const double*, const double*, const double*,
                                                      const double*, const double*, const double*,
                                                      const double*, double*, double*, double*,
                                                      double*, double*, cudaStream_t);
template cudaError_t fourier_backward<float>(const FourierDims&, const float*, const float*,
                                             const float*, const float*, const float*, const float*,
                                             const float*, const float*, float*, float*, float*,
                                             float*, float*, cudaStream_t);
template cudaError_t fourier_backward<double>(const FourierDims&, const double*, const double*,
                                              const double*, const double*, const double*,
                                              const double*, const double*, const double*, double*,
                                              double*, double*, double*, double*, cudaStream_t);

}  // namespace flt::kernels::cuda
