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

/// The shared options (learned_optimizer.h); with `total_steps` the schedule also sees the run's
/// fraction. The fused pass runs on the CPU (float32) and on CUDA.
struct ScheduleMnemosyneOptions : public LearnedOptimizerOptions<ScheduleMnemosyneOptions> {
  static constexpr const char* kDesign = "tensor-schedule";
  ScheduleMnemosyneOptions(double lr = 1.0) : LearnedOptimizerOptions(lr) {}
  /// The ranks of a data-parallel run (null, the default: this process alone). With it, each
  /// step() all-reduces what the loop reported (the loss, a closure's loss, the validation metric)
  /// and every rank records the mean over the ranks that reported each (a metric that rank 0 alone
  /// evaluates is rank 0's), so every rank's state stays the same bits; every rank must then call
  /// step() at the same steps, and one that does not stops the others at the communicator's
  /// timeout. Read from the constructor's options only: a group's own must be null or the same.
  /// Neither saved nor compared (a process's connection, not a hyperparameter).
  TORCH_ARG(std::shared_ptr<Communicator>, communicator);
};

struct ScheduleMnemosyneParamState : public LearnedParamState<ScheduleMnemosyneParamState> {
  /// (2, numel) float32: Adam's two moments, slot-major.
  TORCH_ARG(torch::Tensor, moments);
  /// (LearnedScheduleImpl::history_size()) float64: the tensor's statistics and memory over the
  /// run.
  TORCH_ARG(torch::Tensor, history);

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

class ScheduleMnemosyne
    : public LearnedOptimizer<ScheduleMnemosyneParamState, ScheduleMnemosyneOptions> {
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
  /// A group's own communicator must be null or the optimizer's (one all-reduce a step).
  void check_group_communicators() const;
  LearnedSchedule schedule_{nullptr};
};

}  // namespace flt::optim
