#pragma once
// Prodigy (Mishchenko & Defazio 2023, "Prodigy: An Expeditiously Adaptive Parameter-Free Learner",
// Sec. 5, the Adam version) as a torch::optim::Optimizer: Adam whose step is scaled by an online
// estimate d of the distance from the start to the solution, so lr 1 is the method's own step. The
// estimate is one number over every tensor and group, as in the paper. A baseline of the harness
// (not installed): what the learned optimizer is judged against.

#include <c10/util/Optional.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/archive.h>

#include <cmath>
#include <tuple>
#include <vector>

namespace flt::harness {

// ---- Prodigy ------------------------------------------------------------------------------------

struct ProdigyOptions : public torch::optim::OptimizerCloneableOptions<ProdigyOptions> {
  using betas_t = std::tuple<double, double>;
  ProdigyOptions(double lr = 1.0) : lr_(lr) {}
  /// gamma_k, the multiplier on the estimated step d; default 1 (the method's own step). A
  /// schedule scales it (the authors recommend cosine annealing over the run).
  TORCH_ARG(double, lr) = 1.0;
  /// Decays of Adam's moments m and v; default (0.9, 0.999).
  TORCH_ARG(betas_t, betas) = std::make_tuple(0.9, 0.999);
  /// Decay of the d estimate's sums r and s; unset (default) = sqrt(beta2), the paper's. The
  /// estimate is global, so every group must have the same.
  TORCH_ARG(c10::optional<double>, beta3) = c10::nullopt;
  /// Added to sqrt(v) in units of d (sqrt(v) + d eps, as v holds d^2 g^2); default 1e-8.
  TORCH_ARG(double, eps) = 1e-8;
  /// Decoupled (AdamW) weight decay: x -= lr d weight_decay x each step; default 0.
  TORCH_ARG(double, weight_decay) = 0.0;
  /// The first estimate d_0 of the distance to the solution; default 1e-6 (the same in every
  /// group).
  TORCH_ARG(double, d0) = 1e-6;
  /// The most d may grow by in one step, as a factor; default inf (unbounded, the paper's). The
  /// same in every group.
  TORCH_ARG(double, growth_rate) = INFINITY;
  /// Adam's bias correction sqrt(1 - beta2^k) / (1 - beta1^k) on lr; default false (the authors'
  /// default).
  TORCH_ARG(bool, use_bias_correction) = false;
  /// Leave lr out of s (the estimate's denominator), so that a warm-up from lr near 0 does not
  /// inflate d; default false.
  TORCH_ARG(bool, safeguard_warmup) = false;

 public:
  void serialize(torch::serialize::InputArchive& archive) override;
  void serialize(torch::serialize::OutputArchive& archive) const override;
  friend bool operator==(const ProdigyOptions& lhs, const ProdigyOptions& rhs);
  double get_lr() const override { return lr(); }
  void set_lr(const double lr) override { this->lr(lr); }
};

struct ProdigyParamState : public torch::optim::OptimizerCloneableParamState<ProdigyParamState> {
  /// Steps taken on this parameter.
  TORCH_ARG(int64_t, step) = 0;
  /// m and v of the parameter's shape: Adam's moments of d g (m) and d^2 g^2 (v).
  TORCH_ARG(torch::Tensor, exp_avg);
  TORCH_ARG(torch::Tensor, exp_avg_sq);
  /// s of the parameter's shape: the decayed sum of lr d^2 g whose L1 norm (over every
  /// parameter) is the estimate's denominator.
  TORCH_ARG(torch::Tensor, s);
  /// x_0: the parameter at its first step (the estimate measures the distance from it).
  TORCH_ARG(torch::Tensor, initial);

 public:
  void serialize(torch::serialize::InputArchive& archive) override;
  void serialize(torch::serialize::OutputArchive& archive) const override;
  friend bool operator==(const ProdigyParamState& lhs, const ProdigyParamState& rhs);
};

class Prodigy : public torch::optim::Optimizer {
 public:
  explicit Prodigy(std::vector<torch::optim::OptimizerParamGroup> param_groups,
                   ProdigyOptions defaults = {});
  explicit Prodigy(std::vector<torch::Tensor> params, ProdigyOptions defaults = {})
      : Prodigy({torch::optim::OptimizerParamGroup(std::move(params))}, std::move(defaults)) {}

  torch::Tensor step(LossClosure closure = nullptr) override;
  /// Per-parameter state, options and the global estimate (d, r, steps), so `load` continues
  /// exactly.
  void save(torch::serialize::OutputArchive& archive) const override;
  /// Throws naming what the archive holds when `save` of a Prodigy did not write it.
  void load(torch::serialize::InputArchive& archive) override;

  /// d_k: the current estimate of the distance to the solution (d_0 before the first step). It
  /// never decreases.
  double d() const { return d_; }
  /// Steps taken (k).
  int64_t steps() const { return steps_; }

 private:
  double d_ = 0.0;          ///< d_k
  double numerator_ = 0.0;  ///< r_k, the estimate's numerator
  int64_t steps_ = 0;
};

}  // namespace flt::harness
