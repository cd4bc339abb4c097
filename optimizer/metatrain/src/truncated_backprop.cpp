// Truncated back-propagation through the inner runs: the exact gradient of each truncation's
// meta-loss, biased towards short horizons (what happens after the truncation is not seen).
#include <torch/autograd.h>

#include "truncated_unroll.h"

namespace flt::metatrain::detail {

using optim::LearnedOptimizerModelImpl;

torch::Tensor estimate_by_backprop(LearnedOptimizerModelImpl& model, std::vector<Worker>& workers,
                                   const std::vector<int64_t>& mine,
                                   const std::vector<torch::Tensor>& params,
                                   const MetaTrainOptions& options) {
  auto local =
      at::zeros({static_cast<int64_t>(mine.size()), kGradient + numel(params)}, at::kDouble);
  for (size_t k = 0; k < mine.size(); ++k) {
    const auto worker_start = std::chrono::steady_clock::now();
    auto& worker = workers[mine[k]];
    auto row = local[k];
    const auto loss = unroll(model, worker, worker.particles[0], options.unroll(),
                             /*meta_graph=*/true, options.late_emphasis());
    row[kLoss].fill_(loss.item<double>());
    if (loss.requires_grad()) {  // else diverged: no graph, no gradient
      const auto grads = torch::autograd::grad({loss}, params, {}, /*retain_graph=*/false,
                                               /*create_graph=*/false, /*allow_unused=*/true);
      for (size_t i = 0, offset = kGradient; i < params.size(); offset += params[i++].numel()) {
        if (grads[i].defined())
          row.narrow(0, offset, params[i].numel()).copy_(grads[i].reshape(-1));
      }
    }
    row[kSeconds].fill_(seconds_since(worker_start));
  }
  return local;
}

}  // namespace flt::metatrain::detail
