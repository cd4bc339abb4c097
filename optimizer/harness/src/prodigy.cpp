#include "flt/harness/prodigy.h"

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

// ---- Prodigy ------------------------------------------------------------------------------------

void check_options(const ProdigyOptions& o) {
  check_adam_options("Prodigy", o);
  if (o.beta3().has_value()) check_beta("Prodigy", "beta3", *o.beta3());
  TORCH_CHECK(std::isfinite(o.d0()) && o.d0() > 0.0,
              "Prodigy: d0 must be finite and positive, got ", o.d0());
  TORCH_CHECK(o.growth_rate() >= 1.0, "Prodigy: growth_rate must be >= 1 (inf: unbounded), got ",
              o.growth_rate());
}

double beta3_of(const ProdigyOptions& o) {
  return o.beta3().has_value() ? *o.beta3() : std::sqrt(std::get<1>(o.betas()));
}

/// What the global estimate uses: one value for the whole model, so every group must agree.
struct ProdigyShared {
  double beta3, d0, growth_rate;
};

ProdigyShared shared_options(const std::vector<OptimizerParamGroup>& groups) {
  const auto& first = static_cast<const ProdigyOptions&>(groups.front().options());
  const ProdigyShared shared{beta3_of(first), first.d0(), first.growth_rate()};
  for (size_t g = 1; g < groups.size(); ++g) {
    const auto& o = static_cast<const ProdigyOptions&>(groups[g].options());
    const auto agree = [&](const char* name, double mine, double theirs) {
      TORCH_CHECK(mine == theirs,
                  "Prodigy: the d estimate is global, so every group needs the same ", name,
                  ": group 0 has ", theirs, ", group ", g, " has ", mine);
    };
    agree("beta3 (sqrt(beta2) when unset)", beta3_of(o), shared.beta3);
    agree("d0", o.d0(), shared.d0);
    agree("growth_rate", o.growth_rate(), shared.growth_rate);
  }
  return shared;
}

std::vector<OptimizerParamGroup> checked(std::vector<OptimizerParamGroup> groups,
                                         const ProdigyOptions& defaults) {
  check_options(defaults);
  for (const auto& group : groups) {
    if (group.has_options()) check_options(static_cast<const ProdigyOptions&>(group.options()));
  }
  return checked_parameters("Prodigy", std::move(groups));
}

/// The state of `p` in the optimizer's map, made on its first step.
template <typename States>
ProdigyParamState& prodigy_state(States& states, const torch::Tensor& p) {
  auto key = state_key(states, p);
  auto it = states.find(key);
  if (it == states.end()) {
    auto fresh = std::make_unique<ProdigyParamState>();
    fresh->exp_avg(torch::zeros_like(p, at::MemoryFormat::Preserve));
    fresh->exp_avg_sq(torch::zeros_like(p, at::MemoryFormat::Preserve));
    fresh->s(torch::zeros_like(p, at::MemoryFormat::Preserve));
    fresh->initial(p.detach().clone());
    it = states.emplace(key, std::move(fresh)).first;
  }
  return static_cast<ProdigyParamState&>(*it->second);
}

}  // namespace

// ---- Prodigy: options and state -----------------------------------------------------------------

void ProdigyOptions::serialize(torch::serialize::OutputArchive& archive) const {
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(lr);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(betas);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(beta3);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(eps);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(weight_decay);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(d0);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(growth_rate);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(use_bias_correction);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(safeguard_warmup);
}

void ProdigyOptions::serialize(torch::serialize::InputArchive& archive) {
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, lr);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(betas_t, betas);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG_OPTIONAL(double, beta3);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, eps);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, weight_decay);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, d0);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, growth_rate);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(bool, use_bias_correction);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(bool, safeguard_warmup);
}

bool operator==(const ProdigyOptions& lhs, const ProdigyOptions& rhs) {
  return lhs.lr() == rhs.lr() && lhs.betas() == rhs.betas() && lhs.beta3() == rhs.beta3() &&
         lhs.eps() == rhs.eps() && lhs.weight_decay() == rhs.weight_decay() &&
         lhs.d0() == rhs.d0() && lhs.growth_rate() == rhs.growth_rate() &&
         lhs.use_bias_correction() == rhs.use_bias_correction() &&
         lhs.safeguard_warmup() == rhs.safeguard_warmup();
}

void ProdigyParamState::serialize(torch::serialize::OutputArchive& archive) const {
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(step);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(exp_avg);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(exp_avg_sq);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(s);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(initial);
}

void ProdigyParamState::serialize(torch::serialize::InputArchive& archive) {
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(int64_t, step);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(torch::Tensor, exp_avg);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(torch::Tensor, exp_avg_sq);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(torch::Tensor, s);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(torch::Tensor, initial);
}

bool operator==(const ProdigyParamState& lhs, const ProdigyParamState& rhs) {
  return lhs.step() == rhs.step() && torch::equal(lhs.exp_avg(), rhs.exp_avg()) &&
         torch::equal(lhs.exp_avg_sq(), rhs.exp_avg_sq()) && torch::equal(lhs.s(), rhs.s()) &&
         torch::equal(lhs.initial(), rhs.initial());
}

// ---- Prodigy: the optimizer ---------------------------------------------------------------------

Prodigy::Prodigy(std::vector<OptimizerParamGroup> param_groups, ProdigyOptions defaults)
    : Optimizer(checked(std::move(param_groups), defaults),
                std::make_unique<ProdigyOptions>(defaults)) {
  d_ = shared_options(param_groups_).d0;
}

torch::Tensor Prodigy::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  const torch::Tensor loss = flt::detail::closure_loss(closure);
  for (const auto& group : param_groups_) {
    check_options(static_cast<const ProdigyOptions&>(group.options()));  // editable between steps
  }
  const auto shared = shared_options(param_groups_);
  // Prodigy, Adam version (Sec. 5), step k with the estimate d = d_k and gamma_k = lr:
  //   m_{k+1} = beta1 m_k + (1 - beta1) d g_k,     v_{k+1} = beta2 v_k + (1 - beta2) d^2 g_k^2
  //   r_{k+1} = beta3 r_k + (1 - beta3) gamma_k d^2 <g_k, x_0 - x_k>
  //   s_{k+1} = beta3 s_k + (1 - beta3) gamma_k d^2 g_k
  //   x_{k+1} = x_k - gamma_k d m_{k+1} / (sqrt(v_{k+1}) + d eps)
  //   d_{k+1} = max(d_k, r_{k+1} / ||s_{k+1}||_1)
  // r and ||s||_1 sum over every tensor of every group: one estimate for the whole model.
  const double d = d_;
  double numerator = shared.beta3 * numerator_;
  double denominator = 0.0;  // ||s_{k+1}||_1
  bool stepped = false;
  const double k = static_cast<double>(steps_ + 1);
  for (auto& group : param_groups_) {
    const auto& o = static_cast<const ProdigyOptions&>(group.options());
    const auto [beta1, beta2] = o.betas();
    // The authors' bias correction multiplies gamma_k wherever it appears.
    const double bias_correction =
        o.use_bias_correction() ? std::sqrt(1.0 - std::pow(beta2, k)) / (1.0 - std::pow(beta1, k))
                                : 1.0;
    const double gamma = o.lr() * bias_correction;
    // safeguard_warmup: s without gamma, so a small warm-up lr does not shrink the denominator.
    const double s_rate = (1.0 - shared.beta3) * (o.safeguard_warmup() ? 1.0 : gamma) * d * d;
    for (auto& p : group.params()) {
      const auto g = dense_grad("Prodigy", p);
      if (!g.defined()) continue;
      auto& st = prodigy_state(state_, p);
      auto x = p.detach();
      // <g_k, x_0 - x_k> at x_k, before this step moves it; summed in double.
      numerator += (1.0 - shared.beta3) * gamma * d * d *
                   (g * (st.initial() - x)).sum(at::kDouble).item<double>();
      st.exp_avg().mul_(beta1).add_(g, (1.0 - beta1) * d);
      st.exp_avg_sq().mul_(beta2).addcmul_(g, g, (1.0 - beta2) * d * d);
      st.s().mul_(shared.beta3).add_(g, s_rate);
      denominator += st.s().abs().sum(at::kDouble).item<double>();
      // Decoupled weight decay (the authors' AdamW form) at x_k, then the step, both with d_k.
      if (o.weight_decay() != 0.0) x.mul_(1.0 - gamma * d * o.weight_decay());
      x.addcdiv_(st.exp_avg(), st.exp_avg_sq().sqrt().add_(d * o.eps()), -gamma * d);
      st.step(st.step() + 1);
      stepped = true;
    }
  }
  if (!stepped) return loss;  // no gradient anywhere: nothing moves, the estimate neither
  ++steps_;
  numerator_ = numerator;
  // d_hat = r / ||s||_1 is undefined while every gradient so far was zero; growth_rate caps
  // d_{k+1} / d_k (inf: the paper's max alone).
  if (denominator > 0.0) {
    d_ = std::max(d, std::min(numerator / denominator, shared.growth_rate * d));
  }
  return loss;
}

void Prodigy::save(torch::serialize::OutputArchive& archive) const {
  torch::optim::serialize<ProdigyParamState, ProdigyOptions>(archive, *this);
  write_kind(archive, "Prodigy");
  archive.write("prodigy_d", torch::IValue(d_));
  archive.write("prodigy_numerator", torch::IValue(numerator_));
  archive.write("prodigy_steps", torch::IValue(steps_));
}

void Prodigy::load(torch::serialize::InputArchive& archive) {
  check_kind(archive, "Prodigy");
  torch::IValue d, numerator, steps;
  TORCH_CHECK(archive.try_read("prodigy_d", d) &&
                  archive.try_read("prodigy_numerator", numerator) &&
                  archive.try_read("prodigy_steps", steps),
              "Prodigy::load: the archive lacks the d estimate (prodigy_d, prodigy_numerator, "
              "prodigy_steps)");
  torch::optim::serialize<ProdigyParamState, ProdigyOptions>(archive, *this);
  d_ = d.toDouble();
  numerator_ = numerator.toDouble();
  steps_ = steps.toInt();
}

}  // namespace flt::harness
