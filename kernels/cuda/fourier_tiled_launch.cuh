// The tiled Fourier-attention kernels' launchers: the CUDA kernels around the block code of
// fourier_tiled.h and the templates that size, check and launch one tile configuration. Included by
// the library (fourier_attention.cu: the shipped configurations) and by the harness
// (dev/cuda-harness/fourier_variants.cu: every configuration tried); like fourier_naive.cuh,
// everything lives in an anonymous namespace of the including file.
#pragma once

#include <cuda_runtime.h>

#include "flt/kernels/fourier_series.h"
#include "flt_cuda_kernels.h"
#include "fourier_naive.cuh"
#include "fourier_tiled.h"

namespace flt::kernels::cuda {
namespace {

using fourier::FactorMode;

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

}  // namespace
}  // namespace flt::kernels::cuda
