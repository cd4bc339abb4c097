// The naive Fourier-attention CUDA kernels, one thread per query (forward, dq) or key (dk, dv):
// the reference the tiled variants are checked and timed against, and the fallback for double,
// for tiles that exceed shared memory and for odd powers (fourier_attention.cu dispatches).
// Included once, by fourier_attention.cu; the kernels and launchers live in its anonymous
// namespace.
#pragma once

#include <cuda_runtime.h>

#include <climits>
#include <type_traits>

#include "flt/kernels/fourier_series.h"
#include "flt_cuda_kernels.h"

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
// k) gives a NaN weight, never a zero one (a ReLU zero in an earlier dimension does not end the
// loop before the NaN is seen): every row it enters comes out NaN, as in the CPU kernel.
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

// The keys' rows a block of query threads (one query each) shares in shared memory, a tile at a
// time: k, sin, cos (tile x D each) and v (tile x Dv).
template <typename T>
struct KeyTile {
  T* k;
  T* sin;
  T* cos;
  T* v;
  __device__ KeyTile(unsigned char* shared, int tile, int D)
      : k(reinterpret_cast<T*>(shared)),
        sin(k + tile * D),
        cos(sin + tile * D),
        v(cos + tile * D) {}
};

// Calls visit(jj) for every key j0 + jj of the tile in `keys` that query i sees (all keys, or
// those <= i when causal), tile by tile up to the block's last visible key: every thread of the
// block loads each tile, inactive ones (i >= Lq) visit nothing.
template <typename T, typename Visit>
__device__ __forceinline__ void for_each_visible_key(const FourierDims& p, int tile, int64_t bh,
                                                     int64_t i, bool active, const T* k,
                                                     const T* k_sin, const T* k_cos, const T* v,
                                                     const KeyTile<T>& keys, Visit&& visit) {
  const int D = static_cast<int>(p.dim), Dv = static_cast<int>(p.dv);
  const int64_t block_last = min(p.lq, (blockIdx.x + 1) * static_cast<int64_t>(kThreads)) - 1;
  const int64_t key_end = p.causal ? min(p.lk, block_last + 1) : p.lk;
  for (int64_t j0 = 0; j0 < key_end; j0 += tile) {
    const int n = static_cast<int>(min(static_cast<int64_t>(tile), key_end - j0));
    __syncthreads();
    load_rows(keys.k, k + bh * p.lk * D, j0, n, D);
    load_rows(keys.sin, k_sin + bh * p.lk * D, j0, n, D);
    load_rows(keys.cos, k_cos + bh * p.lk * D, j0, n, D);
    load_rows(keys.v, v + bh * p.lk * Dv, j0, n, Dv);
    __syncthreads();
    if (!active) continue;
    for (int jj = 0; jj < n; ++jj) {
      if (p.causal && j0 + jj > i) break;
      visit(jj);
    }
  }
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
  const KeyTile<T> keys(shared_raw, tile, D);
  const int64_t bh = blockIdx.y;
  const int64_t i = blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x;
  const bool active = i < p.lq;
  const T* rh = r + (bh % p.heads) * D;
  const int64_t qoff = (bh * p.lq + (active ? i : 0)) * D;
  T acc[kFourierMaxDim];
  for (int c = 0; c < Dv; ++c) acc[c] = T(0);
  long long top = kNoWeight;
  T sum = 0;
  for_each_visible_key(p, tile, bh, i, active, k, k_sin, k_cos, v, keys, [&](int jj) {
    T m;
    long long e;
    if (!pair_weight(q + qoff, q_sin + qoff, q_cos + qoff, keys.k + jj * D, keys.sin + jj * D,
                     keys.cos + jj * D, rh, D, p.power, p.mode, m, e)) {
      return;
    }
    if (e > top) {  // online max shift: rescale what was accumulated
      const T scale = top == kNoWeight ? T(0) : pow2<T>(top - e);
      sum *= scale;
      for (int c = 0; c < Dv; ++c) acc[c] *= scale;
      top = e;
    }
    const T w = m * pow2<T>(e - top);
    sum += w;
    for (int c = 0; c < Dv; ++c) acc[c] += w * keys.v[jj * Dv + c];
  });
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
  const KeyTile<T> keys(shared_raw, tile, D);
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
  for_each_visible_key(p, tile, bh, i, active, k, k_sin, k_cos, v, keys, [&](int jj) {
    const T* kj = keys.k + jj * D;
    const T* ks = keys.sin + jj * D;
    const T* kc = keys.cos + jj * D;
    T m = 0;
    long long e = 0;
    const bool nonzero = pair_weight(qi, qs, qc, kj, ks, kc, rh, D, p.power, p.mode, m, e);
    const T a = normalised_weight(nonzero, m, e, row_max[row], row_sum[row]);
    if (a == T(0)) return;
    T gv = 0;
    for (int c = 0; c < Dv; ++c) gv += gi[c] * keys.v[jj * Dv + c];
    const T coupling = a * (gv - delta[row]);
    for (int d = 0; d < D; ++d) {
      const T diff = qi[d] - kj[d];
      const T x = rh[d] * diff;
      const T sin_x = qs[d] * kc[d] - qc[d] * ks[d];
      const T cos_x = qc[d] * kc[d] + qs[d] * ks[d];
      const T t = coupling * cot_minus_inv(x, sin_x, cos_x);
      dq_acc[d] += t;
      dr_acc[d] += t * diff;
    }
  });
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
}  // namespace flt::kernels::cuda
