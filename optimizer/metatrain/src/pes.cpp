// Persistent evolution strategies (Vicol et al., 2021), antithetic: each worker's perturbations
// accumulate from its restart, so the estimate over a task's truncations is unbiased for its whole
// horizon, values only (the fused inference step).
#include <ATen/ATen.h>
#include <torch/types.h>

#include "truncated_unroll.h"

namespace flt::metatrain::detail {

using optim::LearnedOptimizerModelImpl;

torch::Tensor estimate_by_pes(LearnedOptimizerModelImpl& scratch,
                              const std::vector<torch::Tensor>& scratch_params,
                              std::vector<Worker>& workers, const std::vector<int64_t>& mine,
                              const std::vector<torch::Tensor>& params,
                              const MetaTrainOptions& options, int64_t iteration) {
  torch::NoGradGuard no_grad;
  const int64_t parameter_count = numel(params);
  auto local =
      at::zeros({static_cast<int64_t>(mine.size()), kGradient + parameter_count}, at::kDouble);
  const auto theta = torch::cat([&] {
    std::vector<torch::Tensor> flat;
    for (auto& p : params) flat.push_back(p.detach().reshape(-1));
    return flat;
  }());
  for (size_t k = 0; k < mine.size(); ++k) {
    const auto worker_start = std::chrono::steady_clock::now();
    const int64_t w = mine[k];
    auto& worker = workers[w];
    auto gen = generator_for(options.seed() ^ 0x5EED, iteration, w);
    const auto eps = at::randn(theta.sizes(), gen) * options.pes_sigma();
    worker.accumulated = worker.accumulated.defined() ? worker.accumulated + eps : eps;
    double losses[2];
    for (int sign = 0; sign < 2; ++sign) {
      const auto perturbed = theta + (sign == 0 ? eps : -eps);
      int64_t offset = 0;
      for (auto& p : scratch_params) {
        p.copy_(perturbed.narrow(0, offset, p.numel()).view(p.sizes()));
        offset += p.numel();
      }
      losses[sign] = unroll(scratch, worker, worker.particles[sign], options.unroll(),
                            /*meta_graph=*/false, options.late_emphasis())
                         .item<double>();
    }
    auto row = local[k];
    row[kLoss].fill_(0.5 * (losses[0] + losses[1]));
    row.narrow(0, kGradient, parameter_count)
        .copy_(worker.accumulated.to(at::kDouble) *
               ((losses[0] - losses[1]) / (2.0 * options.pes_sigma() * options.pes_sigma())));
    row[kSeconds].fill_(seconds_since(worker_start));
  }
  return local;
}

}  // namespace flt::metatrain::detail
