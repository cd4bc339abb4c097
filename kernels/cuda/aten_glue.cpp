// ATen glue of the CUDA kernels: tensors in, raw pointers and the current stream to the launchers.
// Compiled only in builds with CUDA (FLT_CUDA_ENABLED: nvcc and a CUDA LibTorch).
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>

#include "../src/kernel_dispatch.h"
#include "flt_cuda_kernels.h"

namespace flt::kernels::detail {
namespace {

void check_cuda(cudaError_t err, const char* what) {
  TORCH_CHECK(err == cudaSuccess, what, ": ", cudaGetErrorString(err));
}

cuda::FourierDims dims_of(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          int64_t power, fourier::FactorMode mode, bool causal) {
  TORCH_CHECK(q.size(3) <= cuda::kFourierMaxDim && v.size(3) <= cuda::kFourierMaxDim,
              "fourier_attention (CUDA): D and Dv must be <= ", cuda::kFourierMaxDim, ", got ",
              q.size(3), " and ", v.size(3));
  cuda::FourierDims d;
  d.batch = q.size(0);
  d.heads = q.size(1);
  d.lq = q.size(2);
  d.lk = k.size(2);
  d.dim = q.size(3);
  d.dv = v.size(3);
  d.power = static_cast<int>(power);
  d.mode = static_cast<int>(mode);
  d.causal = causal;
  return d;
}

}  // namespace

std::vector<at::Tensor> fourier_forward_cuda(const at::Tensor& q, const at::Tensor& k,
                                             const at::Tensor& v, const at::Tensor& r,
                                             int64_t power, fourier::FactorMode mode, bool causal) {
  const c10::cuda::CUDAGuard guard(q.device());
  const auto dims = dims_of(q, k, v, power, mode, causal);
  auto out = at::empty({q.size(0), q.size(1), q.size(2), v.size(3)}, q.options());
  auto row_max = at::empty({q.size(0), q.size(1), q.size(2)}, q.options());
  auto row_sum = at::empty_like(row_max);
  auto ws = at::empty({static_cast<int64_t>(cuda::fourier_forward_workspace(dims))}, q.options());
  const auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "fourier_forward_cuda", [&] {
    check_cuda(cuda::fourier_forward<scalar_t>(
                   dims, q.data_ptr<scalar_t>(), k.data_ptr<scalar_t>(), v.data_ptr<scalar_t>(),
                   r.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), row_max.data_ptr<scalar_t>(),
                   row_sum.data_ptr<scalar_t>(), ws.data_ptr<scalar_t>(), stream),
               "fourier_attention forward (CUDA)");
  });
  return {out, row_max, row_sum};
}

std::vector<at::Tensor> fourier_backward_cuda(const at::Tensor& q, const at::Tensor& k,
                                              const at::Tensor& v, const at::Tensor& r,
                                              const at::Tensor& out, const at::Tensor& row_max,
                                              const at::Tensor& row_sum, const at::Tensor& grad_out,
                                              int64_t power, fourier::FactorMode mode,
                                              bool causal) {
  const c10::cuda::CUDAGuard guard(q.device());
  const auto dims = dims_of(q, k, v, power, mode, causal);
  auto dq = at::empty_like(q), dk = at::empty_like(k), dv = at::empty_like(v);
  auto dr = at::empty_like(r);
  auto ws = at::empty({static_cast<int64_t>(cuda::fourier_backward_workspace(dims))}, q.options());
  const auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "fourier_backward_cuda", [&] {
    check_cuda(cuda::fourier_backward<scalar_t>(
                   dims, q.data_ptr<scalar_t>(), k.data_ptr<scalar_t>(), v.data_ptr<scalar_t>(),
                   r.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), row_max.data_ptr<scalar_t>(),
                   row_sum.data_ptr<scalar_t>(), grad_out.data_ptr<scalar_t>(),
                   dq.data_ptr<scalar_t>(), dk.data_ptr<scalar_t>(), dv.data_ptr<scalar_t>(),
                   dr.data_ptr<scalar_t>(), ws.data_ptr<scalar_t>(), stream),
               "fourier_attention backward (CUDA)");
  });
  return {dq, dk, dv, dr};
}

at::Tensor schedule_step_cuda(const std::vector<at::Tensor>& params,
                              const std::vector<at::Tensor>& grads,
                              const std::vector<at::Tensor>& moments,
                              const schedule::RuleConstants& constants,
                              const std::vector<schedule::TensorDecision>& decisions) {
  const c10::cuda::CUDAGuard guard(params[0].device());
  std::vector<cuda::ScheduleTensor> tensors;
  for (size_t s = 0; s < params.size(); ++s) {
    float* m = moments[s].data_ptr<float>();
    tensors.push_back({params[s].data_ptr<float>(), grads[s].data_ptr<float>(), m,
                       m + params[s].numel(), params[s].numel(), decisions[s]});
  }
  const int count = static_cast<int>(tensors.size());
  const auto doubles = params[0].options().dtype(at::kDouble);
  auto workspace =
      at::empty({std::max<int64_t>(
                    1, static_cast<int64_t>(cuda::schedule_step_workspace(tensors.data(), count)))},
                doubles);
  auto sums = at::empty({count, schedule::kSums}, doubles);
  check_cuda(cuda::schedule_step(constants, tensors.data(), count, sums.data_ptr<double>(),
                                 workspace.data_ptr<double>(), at::cuda::getCurrentCUDAStream()),
             "learned schedule step (CUDA)");
  // The one synchronisation of the step: the per-tensor network reads the sums on the CPU.
  return sums.cpu();
}

}  // namespace flt::kernels::detail
