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

/// The shared options (learned_optimizer.h). Without `total_steps` the rule's own controller
/// shrinks the step when progress stalls; `untrained` zeroes the head, so the step is Adam's
/// direction at the controller's untrained step size.
struct CoordinateMnemosyneOptions : public LearnedOptimizerOptions<CoordinateMnemosyneOptions> {
  static constexpr const char* kDesign = "coordinate-memory";
  CoordinateMnemosyneOptions(double lr = 1.0) : LearnedOptimizerOptions(lr) {}
};

struct CoordinateMnemosyneParamState : public LearnedParamState<CoordinateMnemosyneParamState> {
  /// (state_size, numel) float32: moments and memory of every coordinate, slot-major (row j holds
  /// slot j of every coordinate), the layout the fused step reads with vector loads.
  TORCH_ARG(torch::Tensor, state);
  /// (5) float32: the tensor's step-size controller [log-multiplier c, mean square of the
  /// parameter, last cosine between gradient and previous step, mean square at the start,
  /// long-run mean square of the gradient] (learned_model.h).
  TORCH_ARG(torch::Tensor, controller);

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

class CoordinateMnemosyne
    : public LearnedOptimizer<CoordinateMnemosyneParamState, CoordinateMnemosyneOptions> {
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
  LearnedOptimizerModel model_{nullptr};
  Replicas replicas_;
};

}  // namespace flt::optim
