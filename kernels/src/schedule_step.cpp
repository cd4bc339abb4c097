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

// One tensor (or one row of a stacked parameter) of a pass: where its coordinates, gradient and
// moments are, and its decision.
struct Segment {
  float* p;
  const float* gr;
  float* m_all;
  float* v_all;
  int64_t n;
  schedule::TensorDecision decision;
};

// Every segment in blocks of a fixed size, the blocks of all segments shared among the threads;
// each segment's statistics summed in block order, so they do not depend on the thread count.
// sums: (segments, kSums), added to.
void schedule_step_cpu(const std::vector<Segment>& segments,
                       const schedule::RuleConstants& constants, double* sums) {
  constexpr int64_t kBlock = 16384;
  struct Block {
    size_t segment;
    int64_t begin, end;
  };
  std::vector<Block> blocks;
  int64_t coordinates = 0;
  for (size_t s = 0; s < segments.size(); ++s) {
    for (int64_t begin = 0; begin < segments[s].n; begin += kBlock)
      blocks.push_back({s, begin, std::min(segments[s].n, begin + kBlock)});
    coordinates += segments[s].n;
  }
  if (blocks.empty()) return;
  std::vector<Sums> partial(blocks.size());
  // About two full blocks of coordinates per task: smaller work does not pay for a thread.
  const int64_t count = static_cast<int64_t>(blocks.size());
  const int64_t grain =
      std::max<int64_t>(1, count * 2 * kBlock / std::max<int64_t>(1, coordinates));
  at::parallel_for(0, count, grain, [&](int64_t first, int64_t last) {
    for (int64_t k = first; k < last; ++k) {
      const auto& b = blocks[static_cast<size_t>(k)];
      const auto& seg = segments[b.segment];
      partial[static_cast<size_t>(k)] = coordinate_block(constants, seg.decision, seg.gr, seg.p,
                                                         seg.m_all, seg.v_all, b.begin, b.end);
    }
  });
  for (size_t k = 0; k < blocks.size(); ++k)
    for (int j = 0; j < schedule::kSums; ++j)
      sums[blocks[k].segment * schedule::kSums + j] += partial[k][j];
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
    std::vector<Segment> segments;
    for (size_t s = 0; s < count; ++s) {
      float* m_all = moments[s].data_ptr<float>();
      const int64_t n = params[s].numel();
      segments.push_back({params[s].data_ptr<float>(), grads[s].data_ptr<float>(), m_all, m_all + n,
                          n, decisions[s]});
    }
    schedule_step_cpu(segments, constants, sums.data_ptr<double>());
    return sums;
  }
#if defined(FLT_WITH_CUDA)
  return detail::schedule_step_cuda(params, grads, moments, constants, decisions);
#else
  TORCH_CHECK(false, "schedule_step_: unreachable (no CUDA pass in this build)");
#endif
}

torch::Tensor schedule_step_rows_(const torch::Tensor& params, const torch::Tensor& grads,
                                  const torch::Tensor& moments,
                                  const schedule::RuleConstants& constants,
                                  const std::vector<schedule::TensorDecision>& decisions) {
  TORCH_CHECK(params.dim() == 2, "schedule_step_rows_: params must be (R, N), got ",
              params.sizes());
  const int64_t rows = params.size(0), n = params.size(1);
  const bool device_has_pass = params.is_cpu() || (params.is_cuda() && detail::kCudaKernels);
  TORCH_CHECK(device_has_pass && params.scalar_type() == at::kFloat && params.is_contiguous() &&
                  grads.scalar_type() == at::kFloat && grads.is_contiguous() &&
                  grads.sizes() == params.sizes() && grads.device() == params.device() &&
                  moments.scalar_type() == at::kFloat && moments.is_contiguous() &&
                  moments.dim() == 3 && moments.size(0) == rows && moments.size(1) == 2 &&
                  moments.size(2) == n && moments.device() == params.device(),
              "schedule_step_rows_: expected float32 contiguous params (R, N), grads (R, N) and "
              "moments (R, 2, N) on one device that has the pass, got params ",
              params.sizes(), " ", params.scalar_type(), " on ", params.device(), ", grads ",
              grads.sizes(), " ", grads.scalar_type(), ", moments ", moments.sizes(), " ",
              moments.scalar_type());
  TORCH_CHECK(static_cast<int64_t>(decisions.size()) == rows,
              "schedule_step_rows_: expected one decision per row (", rows, "), got ",
              decisions.size());
  if (!params.is_cpu()) {
    // Each row is a tensor of the list pass (few launches on CUDA).
    std::vector<torch::Tensor> p, g, m;
    for (int64_t r = 0; r < rows; ++r) {
      p.push_back(params[r]);
      g.push_back(grads[r]);
      m.push_back(moments[r]);
    }
    return schedule_step_(p, g, m, constants, decisions);
  }
  auto sums = torch::zeros({rows, schedule::kSums}, torch::kDouble);
  std::vector<Segment> segments;
  float* p = params.data_ptr<float>();
  const float* g = grads.data_ptr<float>();
  float* m = moments.data_ptr<float>();
  for (int64_t r = 0; r < rows; ++r)
    segments.push_back({p + r * n, g + r * n, m + 2 * r * n, m + (2 * r + 1) * n, n,
                        decisions[static_cast<size_t>(r)]});
  schedule_step_cpu(segments, constants, sums.data_ptr<double>());
  return sums;
}

}  // namespace flt::kernels
