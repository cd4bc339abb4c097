#pragma once
// The swarm's baselines, as PopulationSearch searchers on a box: random search,
// particle swarm optimisation, CMA-ES and Adam with random restarts. All keep their points inside
// the box (clipped) and are deterministic for a seed.

#include <torch/types.h>

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

  uint64_t seed_;
  SearchBox box_;
  at::Generator generator_;
};

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

/// CMA-ES (mu/mu_w, lambda) with rank-one and rank-mu updates and cumulative step-size adaptation,
/// from Hansen's tutorial (arXiv:1604.00772, Table 1 defaults). lambda = 4 + floor(3 ln n) unless
/// given; sigma_0 = 0.3 of the box width, mean at a uniform point of the box. Samples are clipped
/// to the box before evaluation and the clipped points enter the update.
class CmaEs : public SeededBoxSearch {
 public:
  explicit CmaEs(int64_t lambda = 0, uint64_t seed = 0);
  void reset(const SearchBox& box) override;
  torch::Tensor ask() override;
  void tell(const torch::Tensor& values, const torch::Tensor& gradients = {}) override;
  std::string name() const override { return "cma-es"; }
  const torch::Tensor& mean() const { return mean_; }  ///< (n)
  double sigma() const { return sigma_; }

 private:
  int64_t lambda_option_, lambda_ = 0, mu_ = 0;
  torch::Tensor weights_, mean_, path_sigma_, path_c_, covariance_, basis_, scales_, asked_;
  double sigma_ = 0.0, mu_eff_ = 0.0, c_sigma_ = 0.0, d_sigma_ = 0.0, c_c_ = 0.0, c_1_ = 0.0,
         c_mu_ = 0.0, chi_n_ = 0.0;
  int64_t generation_ = 0;
};

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
