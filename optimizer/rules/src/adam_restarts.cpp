#include "flt/optim/adam_restarts.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <cmath>

namespace flt::optim {

AdamRestarts::AdamRestarts(int64_t particles, double lr, int64_t patience, uint64_t seed)
    : SeededBoxSearch(seed), particles_(particles), patience_(patience), lr_(lr) {
  check_count("AdamRestarts", "particles", particles, 1);
  check_count("AdamRestarts", "patience", patience, 1);
  TORCH_CHECK(std::isfinite(lr) && lr > 0, "AdamRestarts: lr must be positive and finite, got ",
              lr);
}

void AdamRestarts::reset(const SearchBox& box) {
  start(box, "AdamRestarts::reset");
  x_ = uniform(particles_);
  m_ = torch::zeros_like(x_);
  v_ = torch::zeros_like(x_);
  steps_ = torch::zeros({particles_}, torch::kDouble);
  run_best_ = torch::full({particles_}, INFINITY, torch::kDouble);
  stale_ = torch::zeros({particles_}, torch::kDouble);
  best_x_ = torch::Tensor();
  best_value_ = INFINITY;
}

torch::Tensor AdamRestarts::ask() {
  return x_;
}

void AdamRestarts::restart(const torch::Tensor& which) {
  const auto fresh = uniform(particles_);
  const auto w = which.unsqueeze(1);
  x_ = torch::where(w, fresh, x_);
  m_ = torch::where(w, torch::zeros_like(m_), m_);
  v_ = torch::where(w, torch::zeros_like(v_), v_);
  steps_ = torch::where(which, torch::zeros_like(steps_), steps_);
  run_best_ = torch::where(which, torch::full_like(run_best_, INFINITY), run_best_);
  stale_ = torch::where(which, torch::zeros_like(stale_), stale_);
}

void AdamRestarts::tell(const torch::Tensor& values, const torch::Tensor& gradients) {
  check_tell(values, gradients, particles_, box_.dims());
  record(x_, values);
  constexpr double kBeta1 = 0.9, kBeta2 = 0.999, kEps = 1e-8;
  const auto improved = values < run_best_;
  run_best_ = torch::where(improved, values, run_best_);
  stale_ = torch::where(improved, torch::zeros_like(stale_), stale_ + 1.0);
  const auto g = torch::where(gradients.isfinite(), gradients, torch::zeros_like(gradients));
  steps_ = steps_ + 1.0;
  m_ = kBeta1 * m_ + (1.0 - kBeta1) * g;
  v_ = kBeta2 * v_ + (1.0 - kBeta2) * g * g;
  const auto t = steps_.unsqueeze(1);
  const auto m_hat = m_ / (1.0 - torch::pow(kBeta1, t));
  const auto v_hat = v_ / (1.0 - torch::pow(kBeta2, t));
  x_ = clip(x_ - lr_ * (box_.upper - box_.lower) * m_hat / (v_hat.sqrt() + kEps));
  // A run restarts when it stalls, or when its point gave no finite value.
  restart((stale_ >= static_cast<double>(patience_)) | ~values.isfinite());
}

}  // namespace flt::optim
