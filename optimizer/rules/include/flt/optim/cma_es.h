#pragma once
// A baseline of the swarm: CMA-ES on a box, deterministic for a seed.

#include <torch/types.h>

#include <cstdint>
#include <string>

#include "flt/optim/seeded_box_search.h"

namespace flt::optim {

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

}  // namespace flt::optim
