#include "flt/optim/particle_swarm.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <cmath>

namespace flt::optim {

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
  x_ = uniform(particles_);
  // Initial velocities: half the way to another uniform point of the box (SPSO 2011).
  v_ = (uniform(particles_) - x_) * 0.5;
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
  x_ = clip(x_ + v_);
  first_ = false;
}

}  // namespace flt::optim
