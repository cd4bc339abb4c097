#include "antithetic_es.h"

#include <c10/util/Exception.h>
#include <torch/optim/adam.h>

#include <vector>

namespace flt::metatrain::detail {

EsEstimate antithetic_es(const torch::Tensor& theta, const torch::Tensor& eps, double sigma,
                         EsShaping shaping,
                         const std::function<double(const torch::Tensor&)>& score) {
  TORCH_CHECK(eps.dim() == 2 && eps.size(0) >= 1 && eps.size(1) == theta.numel(),
              "antithetic_es: eps must be (pairs >= 1, ", theta.numel(), "), got ", eps.sizes());
  TORCH_CHECK(sigma > 0, "antithetic_es: sigma must be positive, got ", sigma);
  const auto directions = eps.to(theta.options());
  auto plus = torch::empty({eps.size(0), 1}, theta.options()), minus = torch::empty_like(plus);
  for (int64_t k = 0; k < eps.size(0); ++k) {
    plus[k][0] = score(theta + sigma * directions[k]);
    minus[k][0] = score(theta - sigma * directions[k]);
  }
  return antithetic_es(directions, sigma, shaping, plus, minus);
}

EsEstimate antithetic_es(const torch::Tensor& eps, double sigma, EsShaping shaping,
                         const torch::Tensor& plus, const torch::Tensor& minus) {
  TORCH_CHECK(eps.dim() == 2 && eps.size(0) >= 1 && plus.dim() == 2 &&
                  plus.size(0) == eps.size(0) && plus.size(1) >= 1 && minus.sizes() == plus.sizes(),
              "antithetic_es: need (pairs, instances) plus and minus scores for eps ", eps.sizes(),
              ", got ", plus.sizes(), " and ", minus.sizes());
  TORCH_CHECK(sigma > 0, "antithetic_es: sigma must be positive, got ", sigma);
  const auto differences = (plus - minus).to(eps.options());  // (K, n)
  torch::Tensor weights;
  if (shaping == EsShaping::kSign) {
    weights = differences.sign().mean(1);
  } else {
    const auto mean = differences.mean(1);
    weights = mean / (mean.pow(2).mean().sqrt() + 1e-12);
  }
  EsEstimate estimate;
  estimate.gradient = (weights.unsqueeze(1) * eps).mean(0) / (2.0 * sigma);
  estimate.mean_score = 0.5 * (plus.mean() + minus.mean()).item<double>();
  return estimate;
}

void adam_step(torch::Tensor& theta, torch::Tensor& exp_avg, torch::Tensor& exp_avg_sq,
               int64_t steps_before, const torch::Tensor& gradient, double lr) {
  TORCH_CHECK(gradient.sizes() == theta.sizes() && exp_avg.sizes() == theta.sizes() &&
                  exp_avg_sq.sizes() == theta.sizes(),
              "adam_step: theta ", theta.sizes(), ", moments ", exp_avg.sizes(), " and ",
              exp_avg_sq.sizes(), ", gradient ", gradient.sizes(), " must agree");
  torch::NoGradGuard no_grad;
  auto param = theta.detach().clone();
  torch::optim::Adam adam({param}, torch::optim::AdamOptions(lr));
  auto restored = std::make_unique<torch::optim::AdamParamState>();
  restored->step(steps_before);
  restored->exp_avg(exp_avg.detach().clone());
  restored->exp_avg_sq(exp_avg_sq.detach().clone());
  // torch::optim::Adam keys a parameter's state by its TensorImpl's address.
  const auto key = c10::guts::to_string(param.unsafeGetTensorImpl());
  adam.state()[key] = std::move(restored);
  param.mutable_grad() = gradient.detach().to(param.dtype());
  adam.step();
  const auto& state = static_cast<const torch::optim::AdamParamState&>(*adam.state().at(key));
  exp_avg = state.exp_avg();
  exp_avg_sq = state.exp_avg_sq();
  theta = param.detach();
}

}  // namespace flt::metatrain::detail
