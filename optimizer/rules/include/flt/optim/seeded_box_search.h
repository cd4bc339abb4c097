#pragma once
// The base of the swarm's baselines (random search, PSO, CMA-ES, Adam with restarts): the box they
// search, clipping to it, and a generator restarted from their seed at every reset, so that a run
// is a function of the seed.

#include <ATen/core/Generator.h>
#include <torch/types.h>

#include <cstdint>

#include "flt/optim/population.h"

namespace flt::optim {

/// What the baselines share: the box they search and a generator restarted from their seed at
/// every reset, so that a run is a function of the seed.
class SeededBoxSearch : public PopulationSearch {
 protected:
  explicit SeededBoxSearch(uint64_t seed) : seed_(seed) {}
  /// The first thing every reset does: checks `box` (naming `fn`), keeps it and restarts the
  /// generator.
  void start(const SearchBox& box, const char* fn);
  /// `count` uniform points of the box, from the generator. -> (count, n) double
  torch::Tensor uniform(int64_t count);
  /// x with every coordinate clipped to the box. x: (..., n)
  torch::Tensor clip(const torch::Tensor& x) const;
  /// Throws, naming `fn` and `what`, unless value >= least.
  static void check_count(const char* fn, const char* what, int64_t value, int64_t least);

  uint64_t seed_;
  SearchBox box_;
  at::Generator generator_;
};

}  // namespace flt::optim
