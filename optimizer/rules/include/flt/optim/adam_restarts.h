#pragma once
// A baseline of the swarm: Adam with random restarts on a box, deterministic for a seed.

#include <torch/types.h>

#include <cstdint>
#include <string>

#include "flt/optim/seeded_box_search.h"

namespace flt::optim {

/// P independent Adam runs from uniform random starts; a run restarts from a new random point when
/// its value has not improved for `patience` steps. Needs gradients. lr is in box widths per step.
class AdamRestarts : public SeededBoxSearch {
 public:
  explicit AdamRestarts(int64_t particles = 16, double lr = 0.01, int64_t patience = 50,
                        uint64_t seed = 0);
  void reset(const SearchBox& box) override;
  torch::Tensor ask() override;
  void tell(const torch::Tensor& values, const torch::Tensor& gradients = {}) override;
  bool needs_gradients() const override { return true; }
  std::string name() const override { return "adam-restarts"; }
  const torch::Tensor& positions() const { return x_; }  ///< (P, n)

 private:
  void restart(const torch::Tensor& which);
  int64_t particles_, patience_;
  double lr_;
  torch::Tensor x_, m_, v_, steps_, run_best_, stale_;
};

}  // namespace flt::optim
