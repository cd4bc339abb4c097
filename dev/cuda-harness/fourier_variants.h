#pragma once
// The Fourier kernels' candidate configurations side by side, for the harness to check and time
// (dev/cuda-harness/fourier_variants.cu). The library runs one of each kind (fourier_forward,
// fourier_backward in flt_cuda_kernels.h).

#include "flt_cuda_kernels.h"

namespace flt::kernels::cuda {

/// Forward variants: 0 "naive", a thread per query (the reference); the others tile queries and
/// keys in shared memory with a register tile of (query, key) pairs per thread (fourier_tiled.h).
int fourier_forward_variants();
const char* fourier_forward_variant_name(int variant);
/// Whether `variant` runs this shape and element type on the current device (shared memory, Dv).
bool fourier_forward_variant_supported(int variant, const FourierDims& dims, size_t element_size);
/// fourier_forward through one variant; cudaErrorInvalidValue where it is not supported.
template <typename T>
cudaError_t fourier_forward_variant(int variant, const FourierDims& dims, const T* q, const T* k,
                                    const T* v, const T* r, T* out, T* row_max, T* row_sum,
                                    T* workspace, cudaStream_t stream);

/// Backward variants: 0 "naive" (a thread per query, then per key: the reference), 1
/// "tiled_q32_k32" (register tiles of pairs, the weights recomputed, no atomics), 2 the same with
/// __fdividef (float only).
int fourier_backward_variants();
const char* fourier_backward_variant_name(int variant);
bool fourier_backward_variant_supported(int variant, const FourierDims& dims, size_t element_size);
/// fourier_backward through one variant; cudaErrorInvalidValue where it is not supported.
template <typename T>
cudaError_t fourier_backward_variant(int variant, const FourierDims& dims, const T* q, const T* k,
                                     const T* v, const T* r, const T* out, const T* row_max,
                                     const T* row_sum, const T* grad_out, T* dq, T* dk, T* dv,
                                     T* dr, T* workspace, cudaStream_t stream);

}  // namespace flt::kernels::cuda
