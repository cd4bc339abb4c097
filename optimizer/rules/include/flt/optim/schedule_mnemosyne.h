#pragma once
// flt::optim::ScheduleMnemosyne: the learned optimizer whose memory sees the whole run, one per
// tensor: a learned per-tensor schedule (LearnedSchedule, learned_schedule.h) over Adam's moments
// and a small per-coordinate correction, usable wherever a torch::optim::Optimizer is:
//
//   flt::optim::ScheduleMnemosyne opt(model->parameters(),
//                                     flt::optim::ScheduleMnemosyneOptions().total_steps(1000));
//   for (...) {
//     opt.zero_grad(); auto loss = ...; loss.backward();
//     opt.report_loss(loss.item<double>());  // optional: the schedule reads the loss's progress
//     opt.step();
//   }
//
// Untrained (no weights ship yet, or `untrained(true)`), it is Adam with a step of 2% of each
// tensor's RMS and a tiny decoupled weight decay; `lr` multiplies the step.
//
// Robustness: coordinates whose gradient is NaN or Inf are skipped (parameter and moments
// unchanged) and counted (`skipped()`); sparse gradients are rejected. The rule runs in float32.
//
// Data-parallel training (docs/data-parallel.md): besides the gradients, which the ranks average
// (flt::average_gradients), the schedule reads the loss and validation metric the loop reports,
// and each rank knows only its own shard's. Give the ranks' communicator
// (`ScheduleMnemosyneOptions().communicator(ranks)`) and every step() averages them over the
// ranks, so every rank records the same history and the ranks stay bit-identical; without one
// each rank records its own values and the ranks' states differ from the first reported loss.

#include <torch/optim/optimizer.h>
#include <torch/serialize/archive.h>

#include <memory>
#include <string>
#include <vector>

#include "flt/communicator.h"
#include "flt/optim/learned_optimizer.h"
#include "flt/optim/learned_schedule.h"

namespace flt::optim {

struct ScheduleMnemosyneOptions
    : public torch::optim::OptimizerCloneableOptions<ScheduleMnemosyneOptions> {
  ScheduleMnemosyneOptions(double lr = 1.0) : lr_(lr) {}
  /// Multiplier on the scheduled step.
  TORCH_ARG(double, lr) = 1.0;
  /// The run's length in steps when known (0 = unknown, the default): the schedule then sees the
  /// run's fraction and the step anneals to 0 along a half cosine at that step.
  TORCH_ARG(int64_t, total_steps) = 0;
  /// Memory of each tensor over the run; selects the shipped schedule when `weights` is empty.
  TORCH_ARG(Memory, memory) = Memory::kFLT;
  /// Path of a schedule written by save_schedule (flt-metatrain-es's best.pt); empty (default) =
  /// the shipped schedule of `memory`, or the untrained one when none ships.
  TORCH_ARG(std::string, weights) = "";
  /// The untrained schedule whatever ships (the ablation baseline); `weights` must then be empty.
  TORCH_ARG(bool, untrained) = false;
  /// Coordinates processed per batch by the composite path (bounded scratch memory).
  TORCH_ARG(int64_t, chunk_size) = 1 << 16;
  /// Use the fused pass (CPU float32, CUDA) for contiguous parameters (false: the composite
  /// reference).
  TORCH_ARG(bool, fused) = true;
  /// The ranks of a data-parallel run (null, the default: this process alone). With it, each
  /// step() all-reduces what the loop reported (the loss, a closure's loss, the validation metric)
  /// and every rank records the mean over the ranks that reported each (a metric that rank 0 alone
  /// evaluates is rank 0's), so every rank's state stays the same bits; every rank must then call
  /// step() at the same steps, and one that does not stops the others at the communicator's
  /// timeout. Read from the constructor's options only: a group's own must be null or the same.
  /// Neither saved nor compared (a process's connection, not a hyperparameter).
  TORCH_ARG(std::shared_ptr<Communicator>, communicator);

 public:
  void serialize(torch::serialize::InputArchive& archive) override;
  void serialize(torch::serialize::OutputArchive& archive) const override;
  friend bool operator==(const ScheduleMnemosyneOptions& lhs, const ScheduleMnemosyneOptions& rhs);
  double get_lr() const override { return lr(); }
  void set_lr(const double lr) override { this->lr(lr); }
};

struct ScheduleMnemosyneParamState
    : public torch::optim::OptimizerCloneableParamState<ScheduleMnemosyneParamState> {
  /// Steps taken on this parameter.
  TORCH_ARG(int64_t, step) = 0;
  /// (2, numel) float32: Adam's two moments, slot-major.
  TORCH_ARG(torch::Tensor, moments);
  /// Coordinate updates skipped because the gradient (or the step) was not finite.
  TORCH_ARG(int64_t, skipped) = 0;
  /// (LearnedScheduleImpl::history_size()) float64: the tensor's statistics and memory over the
  /// run.
  TORCH_ARG(torch::Tensor, history);
  /// The step size of the last step (lr and the anneal included).
  TORCH_ARG(double, last_step_size) = 0.0;

 public:
  /// Reads states saved by the Mnemosyne of earlier versions with design tensor-schedule too
  /// (their keys "state" and "controller").
  void serialize(torch::serialize::InputArchive& archive) override;
  void serialize(torch::serialize::OutputArchive& archive) const override;
  friend bool operator==(const ScheduleMnemosyneParamState& lhs,
                         const ScheduleMnemosyneParamState& rhs);
};

/// The shipped schedule of a memory kind, or null when none ships with this build.
LearnedSchedule load_pretrained_schedule(Memory memory);

class ScheduleMnemosyne : public LearnedOptimizer<ScheduleMnemosyneParamState> {
 public:
  using Options = ScheduleMnemosyneOptions;
  using ParamState = ScheduleMnemosyneParamState;

  explicit ScheduleMnemosyne(std::vector<torch::optim::OptimizerParamGroup> param_groups,
                             ScheduleMnemosyneOptions defaults = {});
  explicit ScheduleMnemosyne(std::vector<torch::Tensor> params,
                             ScheduleMnemosyneOptions defaults = {})
      : ScheduleMnemosyne({torch::optim::OptimizerParamGroup(std::move(params))},
                          std::move(defaults)) {}
  /// With an explicit schedule (meta-training, evaluation of new weights); `defaults.weights`,
  /// `memory` and `untrained` are ignored.
  ScheduleMnemosyne(std::vector<torch::Tensor> params, ScheduleMnemosyneOptions defaults,
                    LearnedSchedule schedule);

  /// The schedule the options select: `weights`, else the untrained schedule if `untrained` or if
  /// none ships for `memory`, else the shipped one.
  static LearnedSchedule schedule_for(const ScheduleMnemosyneOptions& options);

  /// Reads the closure's loss (else the one given to report_loss) and the reported validation,
  /// averaged over the ranks when the options name a communicator; returns the closure's loss
  /// (this rank's).
  torch::Tensor step(LossClosure closure = nullptr) override;

  using Step = ParameterStep<ScheduleMnemosyneParamState, ScheduleMnemosyneOptions>;
  /// One step of `schedule` over parameters whose states the caller keeps (`step()` is this over
  /// the groups and the optimizer's own states; fltlab.optim keeps them in a Python optimizer's
  /// `state`). Parameters without a gradient are left alone; `signals` is what the loop reported.
  static void step_parameters(LearnedSchedule schedule, const std::vector<Step>& parameters,
                              const ReportedSignals& signals);
  /// State, options and the schedule, so `load` continues exactly.
  void save(torch::serialize::OutputArchive& archive) const override;
  /// Also loads the states the Mnemosyne of earlier versions saved with design tensor-schedule;
  /// throws naming what the archive holds otherwise (an Adam state, a CoordinateMnemosyne's).
  void load(torch::serialize::InputArchive& archive) override;

  /// The schedule in use (shared by every parameter).
  LearnedSchedule schedule() const { return schedule_; }

 private:
  static std::vector<torch::optim::OptimizerParamGroup> checked(
      std::vector<torch::optim::OptimizerParamGroup> groups,
      const ScheduleMnemosyneOptions& defaults);
  LearnedSchedule schedule_{nullptr};
};

}  // namespace flt::optim
