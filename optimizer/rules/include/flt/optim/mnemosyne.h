#pragma once
// flt::optim::Mnemosyne: a learned, coordinate-wise optimizer whose memory is an FLT attention
// cell, usable wherever a torch::optim::Optimizer is:
//
//   flt::optim::Mnemosyne opt(model->parameters(), flt::optim::MnemosyneOptions().lr(1.0));
//   for (...) { opt.zero_grad(); loss.backward(); opt.step(); }
//
// The update rule is `LearnedOptimizerModel` (learned_model.h) with meta-trained weights that ship
// inside the library (optimizer/pretrained/); `lr` multiplies the learned step, so LR schedulers
// such as torch::optim::StepLR work unchanged.
//
// Robustness: coordinates whose gradient is NaN or Inf are skipped (parameter and state unchanged)
// and counted in the state's `skipped`; gradients of any finite size give finite steps; sparse
// gradients are rejected. The rule runs in float32 (double parameters get a float32 state).

#include <torch/optim/optimizer.h>
#include <torch/serialize/archive.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "flt/optim/learned_model.h"
#include "flt/optim/learned_schedule.h"

namespace flt::optim {

/// The two designs of the learned rule (docs/learned-optimizer.md), selectable until the second
/// wins: kCoordinateMemory, a memory per coordinate with a per-tensor step-size controller
/// (learned_model.h, the default), and kTensorSchedule, a learned per-tensor schedule whose memory
/// sees the whole run over Adam's moments and a small per-coordinate correction
/// (learned_schedule.h).
enum class MnemosyneDesign { kCoordinateMemory, kTensorSchedule };
/// "coordinate-memory", "tensor-schedule"; the inverse throws naming an unknown name.
std::string design_name(MnemosyneDesign design);
MnemosyneDesign design_from_name(const std::string& name);

struct MnemosyneOptions : public torch::optim::OptimizerCloneableOptions<MnemosyneOptions> {
  MnemosyneOptions(double lr = 1.0) : lr_(lr) {}
  /// Multiplier on the learned step (1 = the step the meta-trained rule chose).
  TORCH_ARG(double, lr) = 1.0;
  /// The run's length in steps when known (0 = unknown, the default): the step then anneals to 0
  /// along a half cosine at that step, as a tuned Adam schedule would. Without it the rule's own
  /// controller shrinks the step when progress stalls.
  TORCH_ARG(int64_t, total_steps) = 0;
  /// Memory cell; selects the pretrained weights when `weights` is empty.
  TORCH_ARG(Memory, memory) = Memory::kFLT;
  /// Path of a weights file written by flt-metatrain; empty (default) = the shipped pretrained
  /// ones.
  TORCH_ARG(std::string, weights) = "";
  /// Coordinates processed per batch by the composite path: bounds its scratch memory whatever the
  /// model size (the fused path needs no scratch).
  TORCH_ARG(int64_t, chunk_size) = 1 << 16;
  /// Use the fused CPU step for contiguous float32 parameters (false: the composite reference).
  TORCH_ARG(bool, fused) = true;
  /// Which design of the rule; `memory` and `weights` then select that design's weights (the
  /// second design without shipped or given weights is its untrained form: Adam with a step
  /// relative to each tensor's RMS).
  TORCH_ARG(MnemosyneDesign, design) = MnemosyneDesign::kCoordinateMemory;

 public:
  void serialize(torch::serialize::InputArchive& archive) override;
  void serialize(torch::serialize::OutputArchive& archive) const override;
  friend bool operator==(const MnemosyneOptions& lhs, const MnemosyneOptions& rhs);
  double get_lr() const override { return lr(); }
  void set_lr(const double lr) override { this->lr(lr); }
};

struct MnemosyneParamState
    : public torch::optim::OptimizerCloneableParamState<MnemosyneParamState> {
  /// Steps taken on this parameter.
  TORCH_ARG(int64_t, step) = 0;
  /// (state_size, numel) float32: moments and memory of every coordinate, slot-major (row j holds
  /// slot j of every coordinate), the layout the fused step reads with vector loads. The second
  /// design keeps Adam's two moments here.
  TORCH_ARG(torch::Tensor, state);
  /// Coordinate updates skipped because the gradient (or the step) was not finite.
  TORCH_ARG(int64_t, skipped) = 0;
  /// (5) float32: the tensor's step-size controller [log-multiplier c, mean square of the
  /// parameter, last cosine between gradient and previous step, mean square at the start,
  /// long-run mean square of the gradient] (learned_model.h). The second design keeps the tensor's
  /// history and memory here: (LearnedSchedule::history_size()) float64.
  TORCH_ARG(torch::Tensor, controller);
  /// The step size of the last step (lr included): how far the controller has annealed.
  TORCH_ARG(double, last_step_size) = 0.0;

 public:
  void serialize(torch::serialize::InputArchive& archive) override;
  void serialize(torch::serialize::OutputArchive& archive) const override;
  friend bool operator==(const MnemosyneParamState& lhs, const MnemosyneParamState& rhs);
};

/// Loads the shipped pretrained model of a memory kind; throws naming the kind if none ships.
LearnedOptimizerModel load_pretrained_model(Memory memory);
/// Loads a model saved by `save_model` / flt-metatrain; throws naming the path if it is missing or
/// not a weights file of this library.
LearnedOptimizerModel load_model(const std::string& path);
/// Saves the model's options and weights.
void save_model(const LearnedOptimizerModel& model, const std::string& path);
/// The same into and out of an archive (an optimizer's state holds its model, as it does its
/// schedule: write_schedule); `source` names the archive in errors.
void write_model(torch::serialize::OutputArchive& archive, const LearnedOptimizerModelImpl& model);
LearnedOptimizerModel read_model(torch::serialize::InputArchive& archive,
                                 const std::string& source);
/// Memory kinds whose pretrained weights ship with this build.
std::vector<Memory> pretrained_memories();

class Mnemosyne : public torch::optim::Optimizer {
 public:
  explicit Mnemosyne(std::vector<torch::optim::OptimizerParamGroup> param_groups,
                     MnemosyneOptions defaults = {});
  explicit Mnemosyne(std::vector<torch::Tensor> params, MnemosyneOptions defaults = {})
      : Mnemosyne({torch::optim::OptimizerParamGroup(std::move(params))}, std::move(defaults)) {}
  /// With an explicit model (meta-training, evaluation of new weights); `defaults.weights` ignored.
  Mnemosyne(std::vector<torch::Tensor> params, MnemosyneOptions defaults,
            LearnedOptimizerModel model);
  /// The second design with an explicit schedule; `defaults.design` and `weights` ignored.
  Mnemosyne(std::vector<torch::Tensor> params, MnemosyneOptions defaults, LearnedSchedule schedule);

  torch::Tensor step(LossClosure closure = nullptr) override;
  /// State, options and the model (weights and shape), so `load` continues exactly.
  void save(torch::serialize::OutputArchive& archive) const override;
  /// Throws naming what the archive holds when `save` of a Mnemosyne did not write it (e.g. an
  /// Adam state: "... the options {amsgrad, betas, eps, lr, weight_decay} (torch::optim::Adam
  /// ...").
  void load(torch::serialize::InputArchive& archive) override;

  /// The training loss of the coming step, for loops that compute it anyway and call step()
  /// without a closure (a closure's loss is used by itself). Read by the second design's schedule.
  void report_loss(double loss);
  /// A validation metric (lower is better), whenever the loop evaluates one, as with
  /// torch::optim's ReduceLROnPlateau. Read by the second design's schedule.
  void report_validation(double metric);

  /// The first design's rule in use (shared by every parameter); null under the second design.
  LearnedOptimizerModel model() const { return model_; }
  /// The second design's schedule in use; null under the first design.
  LearnedSchedule schedule() const { return schedule_; }
  /// Total coordinate updates skipped for non-finite gradients so far.
  int64_t skipped() const;
  /// The step size each parameter took at its last step (lr included), in parameter order: the
  /// controller's view of how far training has settled.
  std::vector<double> step_sizes() const;

 private:
  /// Validates the options and groups before the base class sees them, so errors name the
  /// parameter or the option.
  static std::vector<torch::optim::OptimizerParamGroup> checked(
      std::vector<torch::optim::OptimizerParamGroup> groups, const MnemosyneOptions& defaults);
  /// The state of `p`: made on its first step, checked against the rule's shape after a load.
  MnemosyneParamState& state_of(const torch::Tensor& p, std::set<std::string>& refreshed);
  /// The composite reference step of one tensor (any device, dtype or layout) in chunks of
  /// `chunk_size` coordinates: bounded scratch memory whatever the tensor's size.
  /// flat_param: (N), updated in place  flat_grad: (N)  state: (state_size, N), updated in place
  static LearnedOptimizerModelImpl::FusedResult composite_step(
      LearnedOptimizerModel& model, torch::Tensor flat_param, const torch::Tensor& flat_grad,
      torch::Tensor& state, int64_t t, double step_size, int64_t chunk_size);
  /// The rule on a parameter's device: model_ itself for CPU parameters; for others a replica made
  /// on first use and refreshed from model_ once per step (`refreshed` holds the devices done), so
  /// edits to model() reach every device.
  LearnedOptimizerModel model_on(const torch::Device& device, std::set<std::string>& refreshed);
  /// The second design's step over every parameter with a gradient; `loss` may be undefined.
  void schedule_step(const torch::Tensor& loss);
  /// The second design's composite reference step of one tensor in chunks; adds the pass's
  /// statistics to sums[0..kStatistics).
  /// flat_param: (N), updated in place  flat_grad: (N)
  void schedule_composite_step(MnemosyneParamState& st, torch::Tensor flat_param,
                               const torch::Tensor& flat_grad, int64_t t, double step_size,
                               double shrink, double gain, int64_t chunk_size, double* sums) const;
  LearnedOptimizerModel model_{nullptr};
  LearnedSchedule schedule_{nullptr};
  std::map<std::string, LearnedOptimizerModel> replicas_;  ///< by device, e.g. "cuda:0"
  std::optional<double> reported_loss_, reported_validation_;
};

}  // namespace flt::optim
