#pragma once
// Honest comparison of optimizers on held-out tasks: every optimizer runs through the
// torch::optim::Optimizer interface on the same starts and the same gradient noise; the baselines'
// learning rates are tuned per task family on a 7-point log grid using tuning seeds that are
// disjoint from the evaluation seeds.

#include <torch/optim/optimizer.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "flt/metatrain/tasks.h"

namespace flt::harness {

/// Makes an optimizer over the given parameters.
using OptimizerFactory =
    std::function<std::unique_ptr<torch::optim::Optimizer>(std::vector<torch::Tensor> params)>;

/// Learning-rate schedule a loop applies to every parameter group's lr (run_optimizer,
/// run_training).
enum class Schedule {
  kConstant,  ///< the optimizer's lr throughout
  kCosine,    ///< lr * (1 + cos(pi t / steps)) / 2 before update t: decays to 0 over the run
  kWarmup,    ///< lr * min(1, (t + 1) / W) before update t, W = 5% of the steps: a linear warm-up
};

/// The factor `schedule` puts on lr before update t (0-based) of a run of `steps`.
double schedule_factor(Schedule schedule, int64_t t, int64_t steps);

/// What a loop does around each evaluation for an optimizer that trains at one point and is judged
/// at another (Schedule-Free AdamW trains at y and is evaluated at x). Empty: nothing.
struct EvaluationHook {
  /// Moves the parameters to the evaluation point (e.g. ScheduleFreeAdamW::eval).
  std::function<void(torch::optim::Optimizer&)> before;
  /// Moves them back (e.g. ScheduleFreeAdamW::train).
  std::function<void(torch::optim::Optimizer&)> after;
  /// run_training: after `before`, BatchNorm layers' running statistics are recomputed at the
  /// evaluation point from this many training batches (forward in train mode, no gradient), as
  /// Schedule-Free's authors direct; 0: kept as training left them.
  int64_t batch_norm_batches = 0;
};

/// Noise-free losses of one run: losses[s] after s steps (s = 0..steps). A run whose loss becomes
/// non-finite or exceeds 1e6 x its start stops; its remaining entries are +inf and `diverged` is
/// set.
struct RunCurve {
  std::vector<double> losses;
  bool diverged = false;
};

/// Runs `steps` steps of the optimizer from `start` on `task`; the gradient noise (mini-batches)
/// comes from a generator seeded with `noise_seed`, identical for every optimizer. `schedule`
/// scales lr as the loop goes; `evaluation` wraps each loss evaluation.
RunCurve run_optimizer(const metatrain::Task& task, const torch::Tensor& start, int64_t steps,
                       uint64_t noise_seed, const OptimizerFactory& factory,
                       Schedule schedule = Schedule::kConstant,
                       const EvaluationHook& evaluation = {});

/// A held-out evaluation task: a generator of instances and a step budget.
struct EvalTask {
  std::string name;
  std::function<std::unique_ptr<metatrain::Task>(at::Generator)> make;
  int64_t steps = 200;
};

/// The held-out suite: Rastrigin 2-D / 10-D / 30-D, Ackley 5-D, Rosenbrock 4-D, MLP classification
/// and regression with a wider hidden layer (32) than meta-training (16), the transformer LM, all
/// at seeds disjoint from meta-training's.
std::vector<EvalTask> held_out_tasks();

/// The 7-point log grid of learning rates: 1e-4 .. 1e-1 in half-decades.
std::vector<double> learning_rate_grid();
/// The 7-point log grid of step multipliers for a learned optimizer: 0.1 .. 10 in thirds of a
/// decade (its lr multiplies the meta-trained step, so 1 is the untuned default).
std::vector<double> multiplier_grid();

/// One optimizer under test: a name and a factory parameterised by a learning rate.
struct Contender {
  std::string name;
  std::function<OptimizerFactory(double lr)> make;
  bool tune = true;  ///< tune lr on the grid (false: use `fixed_lr`)
  double fixed_lr = 1.0;
  std::vector<double> grid;  ///< the grid tuned over (empty: learning_rate_grid())
  Schedule schedule = Schedule::kConstant;
  EvaluationHook evaluation;
};

struct EvalOptions {
  int64_t tuning_seeds = 3;  ///< seeds 10000.. used only to choose learning rates
  int64_t eval_seeds = 5;    ///< seeds 0.. used for the reported numbers
  bool progress = true;
};

/// Relative difference of final losses below which two runs tie.
constexpr double kTieTolerance = 1e-3;

/// One row per (task, contender).
struct EvalRow {
  std::string task, contender;
  double lr = 0.0;                      ///< the tuned (or fixed) learning rate
  double median_final = 0.0;            ///< median over eval seeds of the final noise-free loss
  double median_steps_to_target = 0.0;  ///< first step reaching the target (budget + 1 if never)
  /// Fraction of seeds whose final loss is lower than the reference's by more than the tie
  /// tolerance (`kTieTolerance` relative), and fraction within it (both stopped in the same
  /// minimum: Rastrigin runs often agree to four digits, and the last digits are not a win).
  double win_rate = 0.0;
  double tie_rate = 0.0;
  int64_t diverged = 0;  ///< eval seeds that diverged
  /// The meta-objective on this task: mean over seeds of mean over steps of log(loss_s / loss_0)
  /// (lower is better; diverged steps count as log(1e30 / loss_0)).
  double meta_objective = 0.0;
  std::vector<double> median_curve;  ///< median loss after each step
};

/// Runs the suite. The first contender is the reference for win rates and the target: the target of
/// a task is the reference's median loss at half the budget.
std::vector<EvalRow> evaluate(const std::vector<EvalTask>& tasks,
                              const std::vector<Contender>& contenders,
                              const EvalOptions& options = {});

}  // namespace flt::harness
