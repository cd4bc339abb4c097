#pragma once
// Tensor-level entry points of the fused kernels per device (internal to the library). The CUDA
// ones exist only in builds with CUDA (kernels/cuda/aten_glue.cpp).

#include <ATen/ATen.h>

#include <vector>

#include "flt/kernels/fourier_series.h"
#include "flt/kernels/schedule_rule.h"

namespace flt::kernels::detail {

/// q: (B, H, Lq, D)  k: (B, H, Lk, D)  v: (B, H, Lk, Dv)  r: (H, D) -> {out (B, H, Lq, Dv), and
/// two tensors the same device's backward takes: CPU {weights A (B, H, Lq, Lk), row_sum
/// (B, H, Lq)}, CUDA {row_max (B, H, Lq), row_sum (B, H, Lq)}}; contiguous, one dtype.
using FourierForwardFn = std::vector<at::Tensor> (*)(const at::Tensor& q, const at::Tensor& k,
                                                     const at::Tensor& v, const at::Tensor& r,
                                                     int64_t power, fourier::FactorMode mode,
                                                     bool causal);
/// ... + out and the forward's two saved tensors, grad_out (B, H, Lq, Dv) -> {dq, dk, dv, dr (H,
/// D)}
using FourierBackwardFn = std::vector<at::Tensor> (*)(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& r,
    const at::Tensor& out, const at::Tensor& row_max, const at::Tensor& row_sum,
    const at::Tensor& grad_out, int64_t power, fourier::FactorMode mode, bool causal);

std::vector<at::Tensor> fourier_forward_cpu(const at::Tensor& q, const at::Tensor& k,
                                            const at::Tensor& v, const at::Tensor& r, int64_t power,
                                            fourier::FactorMode mode, bool causal);
std::vector<at::Tensor> fourier_backward_cpu(const at::Tensor& q, const at::Tensor& k,
                                             const at::Tensor& v, const at::Tensor& r,
                                             const at::Tensor& out, const at::Tensor& weights,
                                             const at::Tensor& row_sum, const at::Tensor& grad_out,
                                             int64_t power, fourier::FactorMode mode, bool causal);

/// The causal prefix scan out_i = q_i^T sum_{j <= i} k_j v_j^T (j >= i when `reverse`). With
/// `carry`, the sum starts from *carry (the keys before this block) and ends there (+= every k_j
/// v_j^T of the block), in the order of one scan over the whole sequence.
/// q: (B, H, L, M)  k: (B, H, L, M)  v: (B, H, L, E)  carry: (B, H, M, E) -> (B, H, L, E);
/// contiguous, one dtype.
at::Tensor causal_linear_scan_cpu(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                  bool reverse, at::Tensor* carry = nullptr);

/// Whether this build has the CUDA kernels.
#if defined(FLT_WITH_CUDA)
constexpr bool kCudaKernels = true;
#else
constexpr bool kCudaKernels = false;
#endif

#if defined(FLT_WITH_CUDA)
std::vector<at::Tensor> fourier_forward_cuda(const at::Tensor& q, const at::Tensor& k,
                                             const at::Tensor& v, const at::Tensor& r,
                                             int64_t power, fourier::FactorMode mode, bool causal);
std::vector<at::Tensor> fourier_backward_cuda(const at::Tensor& q, const at::Tensor& k,
                                              const at::Tensor& v, const at::Tensor& r,
                                              const at::Tensor& out, const at::Tensor& row_max,
                                              const at::Tensor& row_sum, const at::Tensor& grad_out,
                                              int64_t power, fourier::FactorMode mode, bool causal);
/// The learned schedule's fused pass over tensors of one CUDA device (schedule_step.h's contract,
/// checked by the caller) -> (S, schedule::kSums) float64 on the CPU.
at::Tensor schedule_step_cuda(const std::vector<at::Tensor>& params,
                              const std::vector<at::Tensor>& grads,
                              const std::vector<at::Tensor>& moments,
                              const schedule::RuleConstants& constants,
                              const std::vector<schedule::TensorDecision>& decisions);
#endif

}  // namespace flt::kernels::detail
