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
// The naive kernels are in fourier_naive.cuh, the tiled blocks' arithmetic in fourier_tiled*.h.
#include <cuda_runtime.h>

#include <climits>
#include <type_traits>

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

template <int N>
const char* name_of(const char* const (&names)[N], int variant) {
  return variant >= 0 && variant < N ? names[variant] : "unknown";
}

// Sizes every kernel takes and an element type they are built for (float, double).
bool any_variant_runs(const FourierDims& p, size_t element_size) {
  return check_dims(p) == cudaSuccess &&
         (element_size == sizeof(float) || element_size == sizeof(double));
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
  return name_of(kVariantNames, variant);
}

bool fourier_forward_variant_supported(int variant, const FourierDims& p, size_t element_size) {
  if (!any_variant_runs(p, element_size)) return false;
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
  return name_of(kBackwardVariantNames, variant);
}

bool fourier_backward_variant_supported(int variant, const FourierDims& p, size_t element_size) {
  if (!any_variant_runs(p, element_size)) return false;
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
