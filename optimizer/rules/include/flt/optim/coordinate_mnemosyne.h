#pragma once
// flt::optim::CoordinateMnemosyne: the learned optimizer whose every coordinate has a memory (an
// FLT attention cell run over the step index, as in Mnemosyne), with a per-tensor step-size
// controller, usable wherever a torch::optim::Optimizer is:
//
//   flt::optim::CoordinateMnemosyne opt(model->parameters());
//   for (...) { opt.zero_grad(); loss.backward(); opt.step(); }
//
// The update rule is `LearnedOptimizerModel` (learned_model.h) with meta-trained weights that ship
// inside the library (optimizer/pretrained/mnemosyne_<memory>.pt); `lr` multiplies the learned
// step, so LR schedulers such as torch::optim::StepLR work unchanged.
//
// Robustness: coordinates whose gradient is NaN or Inf are skipped (parameter and state unchanged)
// and counted (`skipped()`); gradients of any finite size give finite steps; sparse gradients are
// rejected. The rule runs in float32 (double parameters get a float32 state).
//
// Data-parallel training (docs/data-parallel.md): the rule reads the gradients and the parameters
// alone (it ignores report_loss and report_validation), so ranks that average their gradients
// (flt::average_gradients) keep bit-identical parameters and states with no option.

#include <torch/optim/optimizer.h>
#include <torch/serialize/archive.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "flt/optim/learned_model.h"
#include "flt/optim/learned_optimizer.h"

namespace flt::optim {

struct CoordinateMnemosyneOptions
    : public torch::optim::OptimizerCloneableOptions<CoordinateMnemosyneOptions> {
  CoordinateMnemosyneOptions(double lr = 1.0) : lr_(lr) {}
  /// Multiplier on the learned step (1 = the step the meta-trained rule chose).
  TORCH_ARG(double, lr) = 1.0;
  /// The run's length in steps when known (0 = unknown, the default): the step then anneals to 0
  /// along a half cosine at that step, as a tuned Adam schedule would. Without it the rule's own
  /// controller shrinks the step when progress stalls.
  TORCH_ARG(int64_t, total_steps) = 0;
  /// Memory cell of every coordinate; selects the pretrained weights when `weights` is empty.
  TORCH_ARG(Memory, memory) = Memory::kFLT;
  /// Path of a weights file written by flt-metatrain; empty (default) = the shipped pretrained
  /// ones.
  TORCH_ARG(std::string, weights) = "";
  /// The untrained rule instead of any weights (the ablation every learned result is measured
  /// against): the head zeroed, so the step is Adam's direction at the controller's untrained step
  /// size. `weights` must then be empty.
  TORCH_ARG(bool, untrained) = false;
  /// Coordinates processed per batch by the composite path: bounds its scratch memory whatever the
  /// model size (the fused path needs no scratch).
  TORCH_ARG(int64_t, chunk_size) = 1 << 16;
  /// Use the fused CPU step for contiguous float32 parameters (false: the composite reference).
  TORCH_ARG(bool, fused) = true;

 public:
  void serialize(torch::serialize::InputArchive& archive) override;
  void serialize(torch::serialize::OutputArchive& archive) const override;
  friend bool operator==(const CoordinateMnemosyneOptions& lhs,
                         const CoordinateMnemosyneOptions& rhs);
  double get_lr() const override { return lr(); }
  void set_lr(const double lr) override { this->lr(lr); }
};

struct CoordinateMnemosyneParamState
    : public torch::optim::OptimizerCloneableParamState<CoordinateMnemosyneParamState> {
  /// Steps taken on this parameter.
  TORCH_ARG(int64_t, step) = 0;
  /// (state_size, numel) float32: moments and memory of every coordinate, slot-major (row j holds
  /// slot j of every coordinate), the layout the fused step reads with vector loads.
  TORCH_ARG(torch::Tensor, state);
  /// Coordinate updates skipped because the gradient (or the step) was not finite.
  TORCH_ARG(int64_t, skipped) = 0;
  /// (5) float32: the tensor's step-size controller [log-multiplier c, mean square of the
  /// parameter, last cosine between gradient and previous step, mean square at the start,
  /// long-run mean square of the gradient] (learned_model.h).
  TORCH_ARG(torch::Tensor, controller);
  /// The step size of the last step (lr included): how far the controller has annealed.
  TORCH_ARG(double, last_step_size) = 0.0;

 public:
  void serialize(torch::serialize::InputArchive& archive) override;
  void serialize(torch::serialize::OutputArchive& archive) const override;
  friend bool operator==(const CoordinateMnemosyneParamState& lhs,
                         const CoordinateMnemosyneParamState& rhs);
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

class CoordinateMnemosyne : public LearnedOptimizer<CoordinateMnemosyneParamState> {
 public:
  using Options = CoordinateMnemosyneOptions;
  using ParamState = CoordinateMnemosyneParamState;

  explicit CoordinateMnemosyne(std::vector<torch::optim::OptimizerParamGroup> param_groups,
                               CoordinateMnemosyneOptions defaults = {});
  explicit CoordinateMnemosyne(std::vector<torch::Tensor> params,
                               CoordinateMnemosyneOptions defaults = {})
      : CoordinateMnemosyne({torch::optim::OptimizerParamGroup(std::move(params))},
                            std::move(defaults)) {}
  /// With an explicit model (meta-training, evaluation of new weights); `defaults.weights`,
  /// `memory` and `untrained` are ignored.
  CoordinateMnemosyne(std::vector<torch::Tensor> params, CoordinateMnemosyneOptions defaults,
                      LearnedOptimizerModel model);

  /// The model the options select: `weights`, else the untrained rule if `untrained`, else the
  /// shipped weights of `memory`.
  static LearnedOptimizerModel model_for(const CoordinateMnemosyneOptions& options);

  torch::Tensor step(LossClosure closure = nullptr) override;

  using Step = ParameterStep<CoordinateMnemosyneParamState, CoordinateMnemosyneOptions>;
  /// The rule's copies on devices other than the CPU, by device ("cuda:0"): made on first use,
  /// refreshed from the rule at every step, so edits to the rule reach every device.
  using Replicas = std::map<std::string, LearnedOptimizerModel>;
  /// One step of `model` over parameters whose states the caller keeps (`step()` is this over the
  /// groups and the optimizer's own states; fltlab.optim keeps them in a Python optimizer's
  /// `state`). Parameters without a gradient are left alone.
  static void step_parameters(LearnedOptimizerModel model, Replicas& replicas,
                              const std::vector<Step>& parameters);
  /// State, options and the model (weights and shape), so `load` continues exactly.
  void save(torch::serialize::OutputArchive& archive) const override;
  /// Throws naming what the archive holds when `save` of a CoordinateMnemosyne (or of the
  /// Mnemosyne of earlier versions with its default design) did not write it, e.g. an Adam state
  /// or a ScheduleMnemosyne's.
  void load(torch::serialize::InputArchive& archive) override;

  /// The rule in use (shared by every parameter).
  LearnedOptimizerModel model() const { return model_; }

 private:
  /// Validates the options and groups before the base class sees them, so errors name the
  /// parameter or the option.
  static std::vector<torch::optim::OptimizerParamGroup> checked(
      std::vector<torch::optim::OptimizerParamGroup> groups,
      const CoordinateMnemosyneOptions& defaults);
  LearnedOptimizerModel model_{nullptr};
  Replicas replicas_;
};

}  // namespace flt::optim
