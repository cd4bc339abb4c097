#include "flt/optim/swarm_baselines.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/util/Exception.h>

#include <cmath>

namespace flt::optim {
namespace {

torch::Tensor uniform_in(const SearchBox& box, int64_t count, at::Generator& generator) {
  const auto unit = at::rand({count, box.dims()}, generator, torch::kDouble);
  return box.lower + unit * (box.upper - box.lower);
}

torch::Tensor clip_to(const SearchBox& box, const torch::Tensor& x) {
  return torch::max(torch::min(x, box.upper), box.lower);
}

void check_count(const char* fn, const char* what, int64_t value, int64_t least) {
  TORCH_CHECK(value >= least, fn, ": ", what, " must be >= ", least, ", got ", value);
}

}  // namespace

void SeededBoxSearch::start(const SearchBox& box, const char* fn) {
  box.check(fn);
  box_ = box;
  generator_ = at::make_generator<at::CPUGeneratorImpl>(seed_);
}

// ---- random search ------------------------------------------------------------------------------

RandomSearch::RandomSearch(int64_t batch, uint64_t seed) : SeededBoxSearch(seed), batch_(batch) {
  check_count("RandomSearch", "batch", batch, 1);
}

void RandomSearch::reset(const SearchBox& box) {
  start(box, "RandomSearch::reset");
  best_x_ = torch::Tensor();
  best_value_ = INFINITY;
}

torch::Tensor RandomSearch::ask() {
  asked_ = uniform_in(box_, batch_, generator_);
  return asked_;
}

void RandomSearch::tell(const torch::Tensor& values, const torch::Tensor& gradients) {
  check_tell(values, gradients, batch_, box_.dims());
  record(asked_, values);
}

// ---- PSO ----------------------------------------------------------------------------------------

namespace {
// Clerc & Kennedy (2002): phi = c1 + c2 = 4.1, chi = 2 / |2 - phi - sqrt(phi^2 - 4 phi)|.
constexpr double kPhi = 4.1;
const double kChi = 2.0 / std::abs(2.0 - kPhi - std::sqrt(kPhi * kPhi - 4.0 * kPhi));
constexpr double kAcceleration = kPhi / 2.0;
}  // namespace

ParticleSwarm::ParticleSwarm(int64_t particles, uint64_t seed)
    : SeededBoxSearch(seed), particles_(particles) {
  check_count("ParticleSwarm", "particles", particles, 2);
}

void ParticleSwarm::reset(const SearchBox& box) {
  start(box, "ParticleSwarm::reset");
  x_ = uniform_in(box_, particles_, generator_);
  // Initial velocities: half the way to another uniform point of the box (SPSO 2011).
  v_ = (uniform_in(box_, particles_, generator_) - x_) * 0.5;
  personal_best_ = x_.clone();
  personal_value_ = torch::full({particles_}, INFINITY, torch::kDouble);
  best_x_ = torch::Tensor();
  best_value_ = INFINITY;
  first_ = true;
}

torch::Tensor ParticleSwarm::ask() {
  return x_;
}

void ParticleSwarm::tell(const torch::Tensor& values, const torch::Tensor& gradients) {
  check_tell(values, gradients, particles_, box_.dims());
  record(x_, values);
  // NaN never compares less: such a particle keeps its personal best.
  const auto better = values < personal_value_;
  personal_value_ = torch::where(better, values, personal_value_);
  personal_best_ = torch::where(better.unsqueeze(1), x_, personal_best_);
  const auto width = box_.upper - box_.lower;
  const auto global = best_x_.defined() ? best_x_ : personal_best_[0];
  const auto r1 = at::rand(x_.sizes(), generator_, torch::kDouble);
  const auto r2 = at::rand(x_.sizes(), generator_, torch::kDouble);
  v_ = kChi * (v_ + kAcceleration * r1 * (personal_best_ - x_) +
               kAcceleration * r2 * (global.unsqueeze(0) - x_));
  v_ = torch::max(torch::min(v_, width), -width);
  x_ = clip_to(box_, x_ + v_);
  first_ = false;
}

// ---- CMA-ES -------------------------------------------------------------------------------------

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
  mean_ = uniform_in(box_, 1, generator_)[0];
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
  asked_ = clip_to(box_, mean_ + sigma_ * y * width);
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

// ---- Adam restarts ------------------------------------------------------------------------------

AdamRestarts::AdamRestarts(int64_t particles, double lr, int64_t patience, uint64_t seed)
    : SeededBoxSearch(seed), particles_(particles), patience_(patience), lr_(lr) {
  check_count("AdamRestarts", "particles", particles, 1);
  check_count("AdamRestarts", "patience", patience, 1);
  TORCH_CHECK(std::isfinite(lr) && lr > 0, "AdamRestarts: lr must be positive and finite, got ",
              lr);
}

void AdamRestarts::reset(const SearchBox& box) {
  start(box, "AdamRestarts::reset");
  x_ = uniform_in(box_, particles_, generator_);
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
  const auto fresh = uniform_in(box_, particles_, generator_);
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
  x_ = clip_to(box_, x_ - lr_ * (box_.upper - box_.lower) * m_hat / (v_hat.sqrt() + kEps));
  // A run restarts when it stalls, or when its point gave no finite value.
  restart((stale_ >= static_cast<double>(patience_)) | ~values.isfinite());
}

}  // namespace flt::optim
