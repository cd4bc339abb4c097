#pragma once
// Schedule-Free AdamW (Defazio et al. 2024, "The Road Less Scheduled", Algorithm 1) as a
// torch::optim::Optimizer: no schedule; gradients are taken at y = (1 - beta1) z + beta1 x, where z
// takes AdamW's steps and x is an lr^2-weighted average of the z iterates. The model's parameters
// hold y while training; `eval()` puts x in them for evaluation, `train()` puts y back.
//
//   flt::harness::ScheduleFreeAdamW opt(model->parameters());
//   for (...) { opt.zero_grad(); loss.backward(); opt.step(); }
//   opt.eval();   // parameters = x (with BatchNorm: a few forward passes in train mode first)
//   evaluate(model);
//   opt.train();  // parameters = y again
//
// A baseline of the harness (not installed): what the learned optimizer is judged against.

#include <c10/util/Optional.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/archive.h>

#include <cmath>
#include <tuple>
#include <vector>

namespace flt::harness {

// ---- Schedule-Free AdamW ------------------------------------------------------------------------

struct ScheduleFreeAdamWOptions
    : public torch::optim::OptimizerCloneableOptions<ScheduleFreeAdamWOptions> {
  using betas_t = std::tuple<double, double>;
  ScheduleFreeAdamWOptions(double lr = 0.0025) : lr_(lr) {}
  /// gamma, the step of z; default 0.0025 (the authors').
  TORCH_ARG(double, lr) = 0.0025;
  /// beta1: where gradients are taken, y = (1 - beta1) z + beta1 x (the method's momentum);
  /// beta2: the decay of the second moment v. Default (0.9, 0.999).
  TORCH_ARG(betas_t, betas) = std::make_tuple(0.9, 0.999);
  /// Added to sqrt(v); default 1e-8.
  TORCH_ARG(double, eps) = 1e-8;
  /// Decoupled weight decay, applied at y: z -= gamma_t weight_decay y; default 0.
  TORCH_ARG(double, weight_decay) = 0.0;
  /// Linear warm-up of gamma_t over this many steps (min(1, t / warmup_steps)); default 0: none.
  TORCH_ARG(int64_t, warmup_steps) = 0;
  /// The average's weights are w_t = t^r gamma_t^weight_lr_power; defaults r = 0 and power 2,
  /// the paper's c_{t+1} = gamma_t^2 / sum_{i<=t} gamma_i^2.
  TORCH_ARG(double, r) = 0.0;
  TORCH_ARG(double, weight_lr_power) = 2.0;

 public:
  void serialize(torch::serialize::InputArchive& archive) override;
  void serialize(torch::serialize::OutputArchive& archive) const override;
  friend bool operator==(const ScheduleFreeAdamWOptions& lhs, const ScheduleFreeAdamWOptions& rhs);
  double get_lr() const override { return lr(); }
  void set_lr(const double lr) override { this->lr(lr); }
};

struct ScheduleFreeAdamWParamState
    : public torch::optim::OptimizerCloneableParamState<ScheduleFreeAdamWParamState> {
  /// t: steps taken on this parameter.
  TORCH_ARG(int64_t, step) = 0;
  /// z and x of the parameter's shape: the iterate AdamW steps and its weighted average.
  TORCH_ARG(torch::Tensor, z);
  TORCH_ARG(torch::Tensor, x);
  /// v of the parameter's shape: the decayed mean of g^2.
  TORCH_ARG(torch::Tensor, exp_avg_sq);
  /// sum_{i<=t} w_i, the average's total weight.
  TORCH_ARG(double, weight_sum) = 0.0;

 public:
  void serialize(torch::serialize::InputArchive& archive) override;
  void serialize(torch::serialize::OutputArchive& archive) const override;
  friend bool operator==(const ScheduleFreeAdamWParamState& lhs,
                         const ScheduleFreeAdamWParamState& rhs);
};

class ScheduleFreeAdamW : public torch::optim::Optimizer {
 public:
  explicit ScheduleFreeAdamW(std::vector<torch::optim::OptimizerParamGroup> param_groups,
                             ScheduleFreeAdamWOptions defaults = {});
  explicit ScheduleFreeAdamW(std::vector<torch::Tensor> params,
                             ScheduleFreeAdamWOptions defaults = {})
      : ScheduleFreeAdamW({torch::optim::OptimizerParamGroup(std::move(params))},
                          std::move(defaults)) {}

  /// Throws in eval mode: gradients must be taken at y.
  torch::Tensor step(LossClosure closure = nullptr) override;
  /// Per-parameter state (z, x, v, weights), options and the mode, so `load` continues exactly.
  void save(torch::serialize::OutputArchive& archive) const override;
  /// Throws naming what the archive holds when `save` of a ScheduleFreeAdamW did not write it.
  void load(torch::serialize::InputArchive& archive) override;

  /// Puts x, the average, in the parameters (for evaluation); does nothing in eval mode.
  void eval();
  /// Puts y back in the parameters (for training); does nothing in train mode.
  void train();
  /// True in train mode (the parameters hold y), the mode after construction.
  bool training() const { return training_; }

 private:
  bool training_ = true;
};

}  // namespace flt::harness
