#pragma once
// A baseline of the swarm: particle swarm optimisation on a box, deterministic for a seed.

#include <torch/types.h>

#include <cstdint>
#include <string>

#include "flt/optim/seeded_box_search.h"

namespace flt::optim {

/// Global-best PSO with Clerc-Kennedy constriction: v <- chi (v + c1 r1 (p - x) + c2 r2 (g - x)),
/// chi = 0.7298, c1 = c2 = 2.05 (the inertia-weight form w = 0.7298, c = 1.4962); velocities
/// clamped to the box width, positions clipped to the box.
class ParticleSwarm : public SeededBoxSearch {
 public:
  explicit ParticleSwarm(int64_t particles = 16, uint64_t seed = 0);
  void reset(const SearchBox& box) override;
  torch::Tensor ask() override;
  void tell(const torch::Tensor& values, const torch::Tensor& gradients = {}) override;
  std::string name() const override { return "pso"; }
  const torch::Tensor& positions() const { return x_; }  ///< (P, n)

 private:
  int64_t particles_;
  torch::Tensor x_, v_, personal_best_, personal_value_;
  bool first_ = true;
};

}  // namespace flt::optim
