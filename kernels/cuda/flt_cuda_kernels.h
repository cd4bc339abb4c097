#pragma once
// CUDA kernels of FLT (Fourier attention, the learned schedule's pass): raw device pointers and a
// stream, no LibTorch, so they compile with nvcc alone (the check target and the harness) and the
// ATen glue (aten_glue.cpp) is the only part that needs a CUDA LibTorch. Every launcher checks its
// launches and returns the first CUDA error (cudaSuccess otherwise).

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "flt/kernels/schedule_rule.h"
#include "schedule_pass.h"

namespace flt::kernels::cuda {

/// Sizes of a Fourier-attention call. Layouts (contiguous): q (B, H, Lq, D), k (B, H, Lk, D),
/// v (B, H, Lk, Dv), r (H, D) = |R| already expanded (a scalar R is expanded by the caller, so no
/// kernel ever indexes past it), out (B, H, Lq, Dv), row statistics (B, H, Lq).
struct FourierDims {
  int64_t batch = 0, heads = 0, lq = 0, lk = 0, dim = 0, dv = 0;
  int power = 4;
  int mode = 0;  ///< fourier::FactorMode
  bool causal = false;
};

/// Largest D and Dv the kernels hold in per-thread arrays.
constexpr int64_t kFourierMaxDim = 128;

/// Elements of T the forward / backward need as workspace (sin/cos tables, partial sums).
size_t fourier_forward_workspace(const FourierDims& dims);
size_t fourier_backward_workspace(const FourierDims& dims);

/// Writes out, row_max (largest base-2 weight exponent per row) and row_sum (sum of weights
/// times 2^-row_max; 0 when every weight vanished, and then the row's output is 0).
template <typename T>
cudaError_t fourier_forward(const FourierDims& dims, const T* q, const T* k, const T* v, const T* r,
                            T* out, T* row_max, T* row_sum, T* workspace, cudaStream_t stream);

/// Whether fourier_forward runs the tiled kernel for this shape and element size on the current
/// device (float, tiles within the shared memory); otherwise it runs the naive one.
bool fourier_forward_is_tiled(const FourierDims& dims, size_t element_size);

/// Gradients dq, dk, dv and dr (H, D) (with respect to |R|) from the forward's outputs.
template <typename T>
cudaError_t fourier_backward(const FourierDims& dims, const T* q, const T* k, const T* v,
                             const T* r, const T* out, const T* row_max, const T* row_sum,
                             const T* grad_out, T* dq, T* dk, T* dv, T* dr, T* workspace,
                             cudaStream_t stream);

/// The same for fourier_backward.
bool fourier_backward_is_tiled(const FourierDims& dims, size_t element_size);

/// One tensor of the learned schedule's fused pass (float32, contiguous, on the current device):
/// param, grad, the moments m and v, numel and its decisions of this step.
using ScheduleTensor = schedule_pass::Tensor;

/// Doubles of workspace a pass over these tensors needs.
size_t schedule_step_workspace(const ScheduleTensor* tensors, int count);

/// The learned schedule's per-coordinate rule (flt/kernels/schedule_rule.h) over `count` tensors
/// in place, in ceil(count / 48) pairs of launches and no host synchronisation; writes each
/// tensor's summed statistics to `sums` (count, schedule::kSums) in device memory, every sum in a
/// fixed order (schedule_pass.h): the same bits run to run.
cudaError_t schedule_step(const schedule::RuleConstants& constants, const ScheduleTensor* tensors,
                          int count, double* sums, double* workspace, cudaStream_t stream);

}  // namespace flt::kernels::cuda
