#pragma once
// A baseline of the swarm: uniform random search on a box, deterministic for a seed.

#include <torch/types.h>

#include <cstdint>
#include <string>

#include "flt/optim/seeded_box_search.h"

namespace flt::optim {

/// Uniform random points in the box, `batch` per ask.
class RandomSearch : public SeededBoxSearch {
 public:
  explicit RandomSearch(int64_t batch = 16, uint64_t seed = 0);
  void reset(const SearchBox& box) override;
  torch::Tensor ask() override;
  void tell(const torch::Tensor& values, const torch::Tensor& gradients = {}) override;
  std::string name() const override { return "random"; }

 private:
  int64_t batch_;
  torch::Tensor asked_;
};

}  // namespace flt::optim
