#include "truncated_unroll.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/autograd.h>

#include <algorithm>
#include <cmath>

#include "learned_rule.h"
#include "learned_step_fused.h"

namespace flt::metatrain::detail {

using optim::LearnedOptimizerModelImpl;
namespace {

constexpr double kMinLoss = 1e-12, kMaxLoss = 1e30;

/// The meta-loss weight of inner step t (1..horizon): the density (p + 1) x^p integrated over the
/// step's share ((t - 1) / T, t / T] of the horizon, times T, so the weights' mean is exactly 1.
double step_weight(double late_emphasis, int64_t t, int64_t horizon) {
  if (late_emphasis == 0.0) return 1.0;
  const double T = static_cast<double>(horizon);
  return T * (std::pow(t / T, late_emphasis + 1.0) - std::pow((t - 1) / T, late_emphasis + 1.0));
}

/// log(loss) - log(initial), with the loss clamped so a diverging task cannot produce inf.
torch::Tensor meta_term(const torch::Tensor& loss, double log_initial) {
  return at::log(loss.clamp(kMinLoss, kMaxLoss)) - log_initial;
}

}  // namespace

double clamped_log(double loss) {
  return std::log(std::clamp(loss, kMinLoss, kMaxLoss));
}

at::Generator generator_for(uint64_t seed, uint64_t a, uint64_t b) {
  // splitmix-style mixing keeps the streams of (seed, a, b) independent and reproducible.
  uint64_t x = seed * 0x9E3779B97F4A7C15ULL ^ (a + 0x632BE59BD9B4E019ULL) * 0xBF58476D1CE4E5B9ULL ^
               (b + 1) * 0x94D049BB133111EBULL;
  x ^= x >> 31;
  return at::make_generator<at::CPUGeneratorImpl>(x);
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int64_t numel(const std::vector<torch::Tensor>& params) {
  int64_t n = 0;
  for (const auto& p : params) n += p.numel();
  return n;
}

torch::Tensor unroll(LearnedOptimizerModelImpl& model, const Worker& worker, Particle& particle,
                     int64_t steps, bool meta_graph, double late_emphasis) {
  at::AutoGradMode inner_gradients(true);
  const Task& task = *worker.task;
  auto total = at::zeros({});
  if (particle.diverged) return total;
  auto p = particle.params.detach().requires_grad_(true);
  auto state = particle.state;
  auto controller = particle.controller;
  const auto numels = worker.segment_sizes.to(at::kFloat);
  const int64_t segments = worker.segment_sizes.size(0);
  auto loss = task.loss(p, particle.noise);
  for (int64_t u = 0; u < steps; ++u) {
    const auto grad =
        torch::autograd::grad({loss}, {p}, {}, /*retain_graph=*/meta_graph)[0].detach();
    if (!at::isfinite(grad).all().item<bool>() || !std::isfinite(loss.item<double>())) {
      particle.diverged = true;
      break;
    }
    if (!particle.slot_major.empty()) {
      // Values only (PES): the fused step, tensor by tensor, 3x faster than the composite
      // in one measurement (4 iterations on real-data families: 9 s instead of 28 s).
      torch::NoGradGuard no_grad;
      const auto sizes = model.tensor_step_size(controller, particle.t + 1).to(at::kDouble);
      auto flat = p.detach();
      auto sums = at::zeros({segments, optim::detail::kStatistics}, at::kDouble);
      const auto size_of = sizes.accessor<double, 1>();
      std::vector<optim::detail::FusedTensor> tensors;
      for (int64_t i = 0, offset = 0; i < segments; ++i) {
        const int64_t n = particle.slot_major[i].size(1);
        tensors.push_back({flat.narrow(0, offset, n),
                           grad.narrow(0, offset, n),
                           particle.slot_major[i],
                           size_of[i],
                           {}});
        offset += n;
      }
      optim::detail::LearnedModelInternals::fused_steps_(
          model, *optim::detail::LearnedModelInternals::prepare_fused_step(model, particle.t + 1),
          tensors);
      auto sums_of = sums.accessor<double, 2>();
      for (int64_t i = 0; i < segments; ++i) {
        for (int64_t j = 0; j < optim::detail::kStatistics; ++j)
          sums_of[i][j] = tensors[i].result.statistics[j];
      }
      controller = model.next_tensor_state(controller, sums, numels);
    } else {
      at::AutoGradMode meta(meta_graph);
      const auto step_size =
          model.tensor_step_size(controller, particle.t + 1).index_select(0, worker.segment_ids);
      auto result = model.step(grad, p, state, particle.t + 1, step_size);
      const auto next_p = (meta_graph ? p : p.detach()) + result.update;
      const auto sums =
          at::zeros({segments, optim::detail::kStatistics}, at::kDouble)
              .index_add(
                  0, worker.segment_ids,
                  LearnedOptimizerModelImpl::step_statistics(grad, state, next_p).to(at::kDouble));
      controller = model.next_tensor_state(controller, sums, numels);
      if (meta_graph) {
        p = next_p;
        state = result.state;
      } else {
        p = next_p.detach().requires_grad_(true);
        state = result.state.detach();
        controller = controller.detach();
      }
    }
    ++particle.t;
    loss = task.loss(p, particle.noise);
    const auto scored = task.has_validation() ? task.validation_loss(p, particle.noise) : loss;
    total = total + meta_term(meta_graph ? scored : scored.detach(), worker.log_initial) *
                        step_weight(late_emphasis, particle.t, worker.horizon);
  }
  particle.params = p.detach();
  if (state.defined()) particle.state = state.detach();
  particle.controller = controller.detach();
  return total / static_cast<double>(steps);
}

}  // namespace flt::metatrain::detail
