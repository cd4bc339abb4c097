#include "flt/kernels/schedule_step.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <array>

#include "flt/detail/cpu_clones.h"  // FLT_CLONES_AVX512
#include "kernel_dispatch.h"

namespace flt::kernels {
namespace {

using Sums = std::array<double, schedule::kSums>;

// Coordinates [begin, end) of one tensor. Cloned per micro-architecture (AVX-512 first: 16 float
// lanes per register), and kept free of OpenMP so the clones are plain vector loops.
FLT_CLONES_AVX512 Sums coordinate_block(const schedule::RuleConstants& c,
                                        const schedule::TensorDecision& decision,
                                        const float* __restrict gr, float* __restrict p,
                                        float* __restrict m_all, float* __restrict v_all,
                                        int64_t begin, int64_t end) {
  // The count of skipped coordinates is a double reduction like the sums, added after them: GCC
  // 12 vectorises this loop neither with an integer reduction beside the double ones nor with the
  // count added before the sums ("no vectype"), and then it runs scalar, 13x Adam's step on one
  // thread.
  double s_gd = 0, s_g2 = 0, s_d2 = 0, s_p2 = 0, skipped = 0;
#pragma omp simd reduction(+ : s_gd, s_g2, s_d2, s_p2, skipped)
  for (int64_t i = begin; i < end; ++i) {
    const auto x = schedule::step_coordinate(c, decision, gr[i], p[i], m_all[i], v_all[i]);
    p[i] = x.param;
    m_all[i] = x.m;
    v_all[i] = x.v;
    const double gd = x.grad, dd = x.d_prev, pd = x.param;
    s_gd += gd * dd;
    s_g2 += gd * gd;
    s_d2 += dd * dd;
    s_p2 += pd * pd;
    skipped += static_cast<double>(x.ok ? 0.0f : 1.0f);
  }
  return {s_gd, s_g2, s_d2, s_p2, skipped};
}

void schedule_step_cpu(const std::vector<at::Tensor>& params, const std::vector<at::Tensor>& grads,
                       const std::vector<at::Tensor>& moments,
                       const schedule::RuleConstants& constants,
                       const std::vector<schedule::TensorDecision>& decisions, double* sums) {
  // Blocks of a fixed size, summed in block order: the statistics do not depend on the thread
  // count.
  constexpr int64_t kBlock = 16384;
  for (size_t s = 0; s < params.size(); ++s) {
    const int64_t n = params[s].numel();
    float* p = params[s].data_ptr<float>();
    const float* gr = grads[s].data_ptr<float>();
    float* m_all = moments[s].data_ptr<float>();
    float* v_all = m_all + n;
    const int64_t blocks = (n + kBlock - 1) / kBlock;
    std::vector<Sums> partial(static_cast<size_t>(blocks));
    at::parallel_for(0, blocks, /*grain_size=*/2, [&](int64_t first, int64_t last) {
      for (int64_t k = first; k < last; ++k)
        partial[k] = coordinate_block(constants, decisions[s], gr, p, m_all, v_all, k * kBlock,
                                      std::min(n, (k + 1) * kBlock));
    });
    for (const auto& block : partial)
      for (int j = 0; j < schedule::kSums; ++j) sums[s * schedule::kSums + j] += block[j];
  }
}

}  // namespace

bool schedule_step_supported(const torch::Tensor& param, const torch::Tensor& grad,
                             const torch::Tensor& moments) {
  const bool device_has_pass = param.is_cpu() || (param.is_cuda() && detail::kCudaKernels);
  return device_has_pass && param.scalar_type() == at::kFloat && param.is_contiguous() &&
         grad.scalar_type() == at::kFloat && grad.is_contiguous() &&
         grad.numel() == param.numel() && grad.device() == param.device() &&
         moments.scalar_type() == at::kFloat && moments.is_contiguous() && moments.dim() == 2 &&
         moments.size(0) == 2 && moments.size(1) == param.numel() &&
         moments.device() == param.device();
}

torch::Tensor schedule_step_(const std::vector<torch::Tensor>& params,
                             const std::vector<torch::Tensor>& grads,
                             const std::vector<torch::Tensor>& moments,
                             const schedule::RuleConstants& constants,
                             const std::vector<schedule::TensorDecision>& decisions) {
  const size_t count = params.size();
  TORCH_CHECK(grads.size() == count && moments.size() == count && decisions.size() == count,
              "schedule_step_: expected as many gradients, moments and decisions as parameters (",
              count, "), got ", grads.size(), ", ", moments.size(), " and ", decisions.size());
  auto sums = torch::zeros({static_cast<int64_t>(count), schedule::kSums}, torch::kDouble);
  if (count == 0) return sums;
  const auto device = params[0].device();
  for (size_t s = 0; s < count; ++s) {
    TORCH_CHECK(
        params[s].device() == device && schedule_step_supported(params[s], grads[s], moments[s]),
        "schedule_step_: tensor ", s,
        " is not one the fused pass takes (float32 contiguous param (N) and grad (N), moments "
        "(2, N), all on ",
        device, "): param ", params[s].sizes(), " ", params[s].scalar_type(), " on ",
        params[s].device(), ", grad ", grads[s].sizes(), " ", grads[s].scalar_type(), ", moments ",
        moments[s].sizes(), " ", moments[s].scalar_type());
  }
  if (device.is_cpu()) {
    schedule_step_cpu(params, grads, moments, constants, decisions, sums.data_ptr<double>());
    return sums;
  }
#if defined(FLT_WITH_CUDA)
  return detail::schedule_step_cuda(params, grads, moments, constants, decisions);
#else
  TORCH_CHECK(false, "schedule_step_: unreachable (no CUDA pass in this build)");
#endif
}

}  // namespace flt::kernels
