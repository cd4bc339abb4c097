#include "flt/harness/schedule_free_adamw.h"

#include <ATen/ATen.h>
#include <torch/optim/serialize.h>

#include <algorithm>
#include <cmath>

#include "baseline_checks.h"
#include "flt/detail/optimizer_state.h"

namespace flt::harness {

namespace {

using namespace detail;  // the baselines' shared checks (baseline_checks.h)
using flt::detail::state_key;
using torch::optim::OptimizerParamGroup;

// ---- Schedule-Free AdamW ------------------------------------------------------------------------

void check_options(const ScheduleFreeAdamWOptions& o) {
  const char* who = "ScheduleFreeAdamW";
  check_adam_options(who, o);
  TORCH_CHECK(o.warmup_steps() >= 0, "ScheduleFreeAdamW: warmup_steps must be >= 0 (0: none), got ",
              o.warmup_steps());
  check_finite_at_least(who, "r", o.r(), 0.0);
  check_finite_at_least(who, "weight_lr_power", o.weight_lr_power(), 0.0);
}

std::vector<OptimizerParamGroup> checked(std::vector<OptimizerParamGroup> groups,
                                         const ScheduleFreeAdamWOptions& defaults) {
  check_options(defaults);
  for (const auto& group : groups) {
    if (group.has_options()) {
      check_options(static_cast<const ScheduleFreeAdamWOptions&>(group.options()));
    }
  }
  return checked_parameters("ScheduleFreeAdamW", std::move(groups));
}

/// y = (1 - beta1) z + beta1 x written into the parameter: the one place y is formed, so train()
/// restores exactly the y that step() left.
void write_y(const torch::Tensor& p, const ScheduleFreeAdamWParamState& st, double beta1) {
  auto y = p.detach();
  at::lerp_out(y, st.z(), st.x(), beta1);
}

}  // namespace

// ---- Schedule-Free AdamW: options and state -----------------------------------------------------

void ScheduleFreeAdamWOptions::serialize(torch::serialize::OutputArchive& archive) const {
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(lr);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(betas);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(eps);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(weight_decay);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(warmup_steps);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(r);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(weight_lr_power);
}

void ScheduleFreeAdamWOptions::serialize(torch::serialize::InputArchive& archive) {
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, lr);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(betas_t, betas);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, eps);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, weight_decay);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(int64_t, warmup_steps);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, r);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, weight_lr_power);
}

bool operator==(const ScheduleFreeAdamWOptions& lhs, const ScheduleFreeAdamWOptions& rhs) {
  return lhs.lr() == rhs.lr() && lhs.betas() == rhs.betas() && lhs.eps() == rhs.eps() &&
         lhs.weight_decay() == rhs.weight_decay() && lhs.warmup_steps() == rhs.warmup_steps() &&
         lhs.r() == rhs.r() && lhs.weight_lr_power() == rhs.weight_lr_power();
}

void ScheduleFreeAdamWParamState::serialize(torch::serialize::OutputArchive& archive) const {
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(step);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(z);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(x);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(exp_avg_sq);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(weight_sum);
}

void ScheduleFreeAdamWParamState::serialize(torch::serialize::InputArchive& archive) {
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(int64_t, step);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(torch::Tensor, z);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(torch::Tensor, x);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(torch::Tensor, exp_avg_sq);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, weight_sum);
}

bool operator==(const ScheduleFreeAdamWParamState& lhs, const ScheduleFreeAdamWParamState& rhs) {
  return lhs.step() == rhs.step() && lhs.weight_sum() == rhs.weight_sum() &&
         torch::equal(lhs.z(), rhs.z()) && torch::equal(lhs.x(), rhs.x()) &&
         torch::equal(lhs.exp_avg_sq(), rhs.exp_avg_sq());
}

// ---- Schedule-Free AdamW: the optimizer ---------------------------------------------------------

ScheduleFreeAdamW::ScheduleFreeAdamW(std::vector<OptimizerParamGroup> param_groups,
                                     ScheduleFreeAdamWOptions defaults)
    : Optimizer(checked(std::move(param_groups), defaults),
                std::make_unique<ScheduleFreeAdamWOptions>(defaults)) {}

torch::Tensor ScheduleFreeAdamW::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  TORCH_CHECK(training_,
              "ScheduleFreeAdamW: step() in eval mode (the parameters hold x, not y); call train() "
              "first");
  const torch::Tensor loss = flt::detail::closure_loss(closure);
  for (auto& group : param_groups_) {
    const auto& o = static_cast<const ScheduleFreeAdamWOptions&>(group.options());
    check_options(o);  // a group's options can be edited between steps
    const auto [beta1, beta2] = o.betas();
    for (auto& p : group.params()) {
      const auto g = dense_grad("ScheduleFreeAdamW", p);
      if (!g.defined()) continue;
      auto key = state_key(state_, p);
      auto it = state_.find(key);
      if (it == state_.end()) {
        // z_1 = x_1 = y_1: the parameter as given.
        auto fresh = std::make_unique<ScheduleFreeAdamWParamState>();
        fresh->z(p.detach().clone());
        fresh->x(p.detach().clone());
        fresh->exp_avg_sq(torch::zeros_like(p, at::MemoryFormat::Preserve));
        it = state_.emplace(key, std::move(fresh)).first;
      }
      auto& st = static_cast<ScheduleFreeAdamWParamState&>(*it->second);
      // Algorithm 1 (The Road Less Scheduled), step t; the parameter holds
      // y_t = (1 - beta1) z_t + beta1 x_t, where g_t was taken:
      //   v_t     = beta2 v_{t-1} + (1 - beta2) g_t^2
      //   gamma_t = gamma sqrt(1 - beta2^t) min(1, t / T_warmup)  (bias correction, warm-up)
      //   z_{t+1} = z_t - gamma_t g_t / (sqrt(v_t) + eps) - gamma_t lambda y_t
      //   c_{t+1} = w_t / sum_{i<=t} w_i,  w_t = t^r gamma_t^p    (r = 0, p = 2: the paper's)
      //   x_{t+1} = (1 - c_{t+1}) x_t + c_{t+1} z_{t+1}
      const int64_t t = st.step() + 1;
      const double td = static_cast<double>(t);
      st.exp_avg_sq().mul_(beta2).addcmul_(g, g, 1.0 - beta2);
      const double warmup =
          o.warmup_steps() > 0 ? std::min(1.0, td / static_cast<double>(o.warmup_steps())) : 1.0;
      const double gamma = o.lr() * std::sqrt(1.0 - std::pow(beta2, td)) * warmup;
      const auto y = p.detach();
      if (o.weight_decay() != 0.0) st.z().add_(y, -gamma * o.weight_decay());
      st.z().addcdiv_(g, st.exp_avg_sq().sqrt().add_(o.eps()), -gamma);
      const double weight = std::pow(td, o.r()) * std::pow(gamma, o.weight_lr_power());
      st.weight_sum(st.weight_sum() + weight);
      // No weight yet (lr 0 so far): x stays.
      const double c = st.weight_sum() > 0.0 ? weight / st.weight_sum() : 0.0;
      st.x().lerp_(st.z(), c);
      write_y(p, st, beta1);
      st.step(t);
    }
  }
  return loss;
}

void ScheduleFreeAdamW::eval() {
  if (!training_) return;
  torch::NoGradGuard no_grad;
  for (auto& group : param_groups_) {
    for (auto& p : group.params()) {
      const auto it = state_.find(state_key(state_, p));
      if (it == state_.end()) continue;  // never stepped: x = y = the parameter
      p.detach().copy_(static_cast<const ScheduleFreeAdamWParamState&>(*it->second).x());
    }
  }
  training_ = false;
}

void ScheduleFreeAdamW::train() {
  if (training_) return;
  torch::NoGradGuard no_grad;
  for (auto& group : param_groups_) {
    const double beta1 =
        std::get<0>(static_cast<const ScheduleFreeAdamWOptions&>(group.options()).betas());
    for (auto& p : group.params()) {
      const auto it = state_.find(state_key(state_, p));
      if (it == state_.end()) continue;
      write_y(p, static_cast<const ScheduleFreeAdamWParamState&>(*it->second), beta1);
    }
  }
  training_ = true;
}

void ScheduleFreeAdamW::save(torch::serialize::OutputArchive& archive) const {
  torch::optim::serialize<ScheduleFreeAdamWParamState, ScheduleFreeAdamWOptions>(archive, *this);
  write_kind(archive, "ScheduleFreeAdamW");
  archive.write("schedule_free_training", torch::IValue(training_));
}

void ScheduleFreeAdamW::load(torch::serialize::InputArchive& archive) {
  check_kind(archive, "ScheduleFreeAdamW");
  torch::IValue training;
  TORCH_CHECK(archive.try_read("schedule_free_training", training),
              "ScheduleFreeAdamW::load: the archive lacks the mode (schedule_free_training)");
  torch::optim::serialize<ScheduleFreeAdamWParamState, ScheduleFreeAdamWOptions>(archive, *this);
  // The mode the state was saved in: after a load in eval mode, train() writes the saved y.
  training_ = training.toBool();
}

}  // namespace flt::harness
