#include "flt/optim/cma_es.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <cmath>

namespace flt::optim {

CmaEs::CmaEs(int64_t lambda, uint64_t seed) : SeededBoxSearch(seed), lambda_option_(lambda) {
  TORCH_CHECK(lambda == 0 || lambda >= 2, "CmaEs: lambda must be 0 (default) or >= 2, got ",
              lambda);
}

void CmaEs::reset(const SearchBox& box) {
  start(box, "CmaEs::reset");
  const int64_t n = box.dims();
  const double nd = static_cast<double>(n);
  // Hansen's tutorial, Table 1 (default strategy parameters).
  lambda_ = lambda_option_ > 0 ? lambda_option_
                               : 4 + static_cast<int64_t>(std::floor(3.0 * std::log(nd)));
  mu_ = lambda_ / 2;
  const auto rank = torch::arange(1, mu_ + 1, torch::kDouble);
  weights_ = std::log((static_cast<double>(lambda_) + 1.0) / 2.0) - rank.log();
  weights_ = weights_ / weights_.sum();
  mu_eff_ = 1.0 / weights_.pow(2).sum().item<double>();
  c_sigma_ = (mu_eff_ + 2.0) / (nd + mu_eff_ + 5.0);
  d_sigma_ = 1.0 + 2.0 * std::max(0.0, std::sqrt((mu_eff_ - 1.0) / (nd + 1.0)) - 1.0) + c_sigma_;
  c_c_ = (4.0 + mu_eff_ / nd) / (nd + 4.0 + 2.0 * mu_eff_ / nd);
  c_1_ = 2.0 / ((nd + 1.3) * (nd + 1.3) + mu_eff_);
  c_mu_ = std::min(1.0 - c_1_,
                   2.0 * (mu_eff_ - 2.0 + 1.0 / mu_eff_) / ((nd + 2.0) * (nd + 2.0) + mu_eff_));
  chi_n_ = std::sqrt(nd) * (1.0 - 1.0 / (4.0 * nd) + 1.0 / (21.0 * nd * nd));  // E|N(0, I)|
  // The box may be anisotropic: search in unit coordinates scaled by the width.
  mean_ = uniform(1)[0];
  sigma_ = 0.3;
  path_sigma_ = torch::zeros({n}, torch::kDouble);
  path_c_ = torch::zeros({n}, torch::kDouble);
  covariance_ = torch::eye(n, torch::kDouble);
  basis_ = torch::eye(n, torch::kDouble);
  scales_ = torch::ones({n}, torch::kDouble);
  generation_ = 0;
  best_x_ = torch::Tensor();
  best_value_ = INFINITY;
}

torch::Tensor CmaEs::ask() {
  const auto width = box_.upper - box_.lower;
  const auto z = at::randn({lambda_, box_.dims()}, generator_, torch::kDouble);
  const auto y = (z * scales_).matmul(basis_.t());  // B D z per row
  asked_ = clip(mean_ + sigma_ * y * width);
  return asked_;
}

void CmaEs::tell(const torch::Tensor& values, const torch::Tensor& gradients) {
  check_tell(values, gradients, lambda_, box_.dims());
  record(asked_, values);
  const double nd = static_cast<double>(box_.dims());
  const auto width = box_.upper - box_.lower;
  const auto order = finite_or_worst(values).argsort();
  const auto selected = asked_.index_select(0, order.narrow(0, 0, mu_));  // (mu, n)
  const auto y = (selected - mean_) / width / sigma_;                     // (mu, n)
  const auto y_w = (weights_.unsqueeze(1) * y).sum(0);
  mean_ = mean_ + sigma_ * y_w * width;
  const auto inv_sqrt_c = basis_.matmul(torch::diag(1.0 / scales_)).matmul(basis_.t());
  path_sigma_ = (1.0 - c_sigma_) * path_sigma_ +
                std::sqrt(c_sigma_ * (2.0 - c_sigma_) * mu_eff_) * inv_sqrt_c.matmul(y_w);
  ++generation_;
  const double ps_norm = path_sigma_.norm().item<double>();
  const double h_sigma =
      ps_norm / std::sqrt(1.0 - std::pow(1.0 - c_sigma_, 2.0 * static_cast<double>(generation_))) <
              (1.4 + 2.0 / (nd + 1.0)) * chi_n_
          ? 1.0
          : 0.0;
  path_c_ = (1.0 - c_c_) * path_c_ + h_sigma * std::sqrt(c_c_ * (2.0 - c_c_) * mu_eff_) * y_w;
  const double delta = (1.0 - h_sigma) * c_c_ * (2.0 - c_c_);
  const auto rank_mu = (y.t() * weights_).matmul(y);
  covariance_ = (1.0 + c_1_ * delta - c_1_ - c_mu_) * covariance_ +
                c_1_ * torch::outer(path_c_, path_c_) + c_mu_ * rank_mu;
  covariance_ = 0.5 * (covariance_ + covariance_.t());
  sigma_ *= std::exp(c_sigma_ / d_sigma_ * (ps_norm / chi_n_ - 1.0));
  sigma_ = std::min(std::max(sigma_, 1e-14), 10.0);
  const auto eig = at::linalg_eigh(covariance_);
  scales_ = std::get<0>(eig).clamp_min(1e-20).sqrt();
  basis_ = std::get<1>(eig);
}

}  // namespace flt::optim
