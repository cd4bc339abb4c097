#include "flt/communicator.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace flt {

void Communicator::allreduce(torch::Tensor& tensor) {
  TORCH_CHECK(tensor.is_contiguous(), "Communicator::allreduce: the tensor must be contiguous");
  const auto parts = allgather(tensor);
  // Rank order, whatever rank adds: every rank computes the same sum.
  auto sum = parts.front().clone();
  for (size_t r = 1; r < parts.size(); ++r) sum.add_(parts[r]);
  tensor.copy_(sum);
}

void average_gradients(Communicator& communicator, const std::vector<torch::Tensor>& parameters) {
  const int world_size = communicator.world_size();
  // One flat buffer per (dtype, device), its gradients in parameter order.
  std::map<std::pair<int, std::string>, std::vector<torch::Tensor>> buckets;
  for (size_t i = 0; i < parameters.size(); ++i) {
    const auto& grad = parameters[i].grad();
    TORCH_CHECK(grad.defined(), "average_gradients: parameter ", i, " (shape ",
                parameters[i].sizes(), ") has no gradient on rank ", communicator.rank(),
                ": every rank must give every parameter a gradient (a parameter no loss reaches "
                "is left out of the list, or given a zero gradient on every rank)");
    TORCH_CHECK(!grad.is_sparse(), "average_gradients: parameter ", i,
                " has a sparse gradient; only dense gradients are averaged");
    buckets[{static_cast<int>(grad.scalar_type()), grad.device().str()}].push_back(grad);
  }
  if (world_size == 1) return;
  for (auto& [key, grads] : buckets) {
    std::vector<torch::Tensor> flat;
    for (const auto& g : grads) flat.push_back(g.reshape({-1}));
    auto buffer = at::cat(flat);  // (sum of numels)
    communicator.allreduce(buffer);
    buffer.div_(world_size);
    int64_t offset = 0;
    for (auto& g : grads) {
      g.copy_(buffer.narrow(0, offset, g.numel()).view(g.sizes()));
      offset += g.numel();
    }
  }
}

}  // namespace flt
