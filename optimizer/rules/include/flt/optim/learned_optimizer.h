#pragma once
// What the two learned optimizers share (coordinate_mnemosyne.h: a memory per coordinate;
// schedule_mnemosyne.h: a learned per-tensor schedule over Adam's moments): the checks of their
// parameters and options, the bookkeeping of their per-parameter states (coordinates skipped, the
// last step size), the loss and validation reports a training loop may give, and the recognition
// of a saved state before LibTorch's loader sees it.

#include <torch/optim/optimizer.h>
#include <torch/serialize/archive.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "flt/optim/learned_model.h"

namespace flt::optim {

/// What the training loop told the optimizer since its last step (each optional).
struct ReportedSignals {
  std::optional<double> loss;        ///< the training loss of the coming step
  std::optional<double> validation;  ///< the latest validation metric (lower is better)
};

/// One parameter of a step over states the caller keeps (each optimizer's `step_parameters`, the
/// shape of PyTorch's functional optimizers): the parameter, whose gradient is `param.grad()`, its
/// group's options, and its state: made on the parameter's first step (a default-constructed
/// state), checked against the parameter, updated in place.
template <class ParamState, class Options>
struct ParameterStep {
  torch::Tensor param;
  ParamState* state;
  const Options* options;
};

namespace detail {
/// The archive's entry `key`; throws naming the key when it is missing.
inline torch::IValue read_value(torch::serialize::InputArchive& archive, const char* key) {
  torch::IValue value;
  archive.read(key, value);
  return value;
}
}  // namespace detail

// TORCH_ARG's accessors, with a setter that returns the derived type (TORCH_ARG's would return the
// base, ending a chain such as `ScheduleMnemosyneOptions().total_steps(n).communicator(c)`).
#define FLT_DERIVED_ARG(T, name)         \
 public:                                 \
  Derived& name(const T& value) {        \
    name##_ = value;                     \
    return static_cast<Derived&>(*this); \
  }                                      \
  const T& name() const noexcept {       \
    return name##_;                      \
  }                                      \
  T& name() noexcept {                   \
    return name##_;                      \
  }                                      \
                                         \
 private:                                \
  T name##_

/// The options both learned optimizers take. Each design derives its own type (CRTP), so neither's
/// options reach the other; `Derived::kDesign` ("coordinate-memory", "tensor-schedule") tells
/// their saved states apart (detail::check_learned_state_archive).
template <class Derived>
struct LearnedOptimizerOptions : public torch::optim::OptimizerCloneableOptions<Derived> {
  explicit LearnedOptimizerOptions(double lr) : lr_(lr) {}

  /// Multiplier on the step the rule chose (1, the default); LR schedulers such as
  /// torch::optim::StepLR scale it.
  FLT_DERIVED_ARG(double, lr) = 1.0;
  /// The run's length in steps when known (0 = unknown, the default): the step then anneals to 0
  /// along a half cosine at that step, as a tuned Adam schedule would.
  FLT_DERIVED_ARG(int64_t, total_steps) = 0;
  /// Memory kind; selects the shipped weights when `weights` is empty.
  FLT_DERIVED_ARG(Memory, memory) = Memory::kFLT;
  /// Path of a weights file (flt-metatrain's for CoordinateMnemosyne, flt-metatrain-es's best.pt
  /// for ScheduleMnemosyne); empty (default) = the shipped ones of `memory`.
  FLT_DERIVED_ARG(std::string, weights) = "";
  /// The untrained rule instead of any weights, the ablation every learned result is measured
  /// against; `weights` must then be empty.
  FLT_DERIVED_ARG(bool, untrained) = false;
  /// Coordinates processed per batch by the composite path: bounds its scratch memory whatever the
  /// model size (the fused path needs no scratch).
  FLT_DERIVED_ARG(int64_t, chunk_size) = 1 << 16;
  /// The fused step for contiguous float32 parameters (false: the composite reference).
  FLT_DERIVED_ARG(bool, fused) = true;

 public:
  double get_lr() const override { return lr_; }
  void set_lr(const double lr) override { lr_ = lr; }

  /// Throws naming the bad option; `name` ("ScheduleMnemosyne") starts the message.
  void check(const char* name) const {
    TORCH_CHECK(std::isfinite(lr_) && lr_ >= 0.0, name, ": lr must be finite and >= 0, got ", lr_);
    TORCH_CHECK(chunk_size_ > 0, name, ": chunk_size must be positive, got ", chunk_size_);
    TORCH_CHECK(total_steps_ >= 0, name, ": total_steps must be >= 0 (0 = unknown), got ",
                total_steps_);
    TORCH_CHECK(!(untrained_ && !weights_.empty()), name, ": untrained(true) and weights(\"",
                weights_, "\") contradict each other: the untrained rule has no weights");
  }

  void serialize(torch::serialize::OutputArchive& archive) const override {
    archive.write("lr", torch::IValue(lr_));
    archive.write("chunk_size", torch::IValue(chunk_size_));
    archive.write("weights", torch::IValue(weights_));
    archive.write("untrained", torch::IValue(untrained_));
    archive.write("fused", torch::IValue(fused_));
    archive.write("total_steps", torch::IValue(total_steps_));
    archive.write("memory", torch::IValue(memory_name(memory_)));
    archive.write("design", torch::IValue(std::string(Derived::kDesign)));
  }

  void serialize(torch::serialize::InputArchive& archive) override {
    using detail::read_value;
    lr_ = read_value(archive, "lr").toDouble();
    chunk_size_ = read_value(archive, "chunk_size").toInt();
    weights_ = read_value(archive, "weights").toStringRef();
    fused_ = read_value(archive, "fused").toBool();
    total_steps_ = read_value(archive, "total_steps").toInt();
    memory_ = memory_from_name(read_value(archive, "memory").toStringRef());
    // States of version 0.1 (one Mnemosyne class with a design option) have no `untrained`.
    torch::IValue untrained;
    untrained_ = archive.try_read("untrained", untrained) && untrained.toBool();
  }

  /// The options a saved state keeps (a process's connection, such as a communicator, is not one).
  friend bool operator==(const Derived& lhs, const Derived& rhs) {
    return lhs.lr() == rhs.lr() && lhs.memory() == rhs.memory() && lhs.weights() == rhs.weights() &&
           lhs.untrained() == rhs.untrained() && lhs.chunk_size() == rhs.chunk_size() &&
           lhs.fused() == rhs.fused() && lhs.total_steps() == rhs.total_steps();
  }
};

/// What both learned optimizers keep of each parameter besides their rules' own tensors, which
/// `Derived` adds with its serialize() and operator==.
template <class Derived>
struct LearnedParamState : public torch::optim::OptimizerCloneableParamState<Derived> {
  /// Steps taken on this parameter.
  FLT_DERIVED_ARG(int64_t, step) = 0;
  /// Coordinate updates skipped because the gradient (or the step) was not finite.
  FLT_DERIVED_ARG(int64_t, skipped) = 0;
  /// The step size of the last step (lr and any anneal included).
  FLT_DERIVED_ARG(double, last_step_size) = 0.0;

 protected:
  void write_counters(torch::serialize::OutputArchive& archive) const {
    archive.write("step", torch::IValue(step_));
    archive.write("skipped", torch::IValue(skipped_));
    archive.write("last_step_size", torch::IValue(last_step_size_));
  }
  void read_counters(torch::serialize::InputArchive& archive) {
    step_ = detail::read_value(archive, "step").toInt();
    skipped_ = detail::read_value(archive, "skipped").toInt();
    last_step_size_ = detail::read_value(archive, "last_step_size").toDouble();
  }
  bool same_counters(const Derived& other) const {
    return step_ == other.step() && skipped_ == other.skipped();
  }
};

#undef FLT_DERIVED_ARG

namespace detail {

/// Every parameter of every group: defined, a leaf, floating point, listed once; at least one.
/// `name` ("CoordinateMnemosyne") starts each message, which names the parameter.
void check_parameter_groups(const std::vector<torch::optim::OptimizerParamGroup>& groups,
                            const char* name);
/// Throws naming what the archive holds unless it is the saved state of the optimizer `name`
/// whose design is `design` ("coordinate-memory" or "tensor-schedule"): another optimizer's
/// state (Adam's, SGD's) is named as such, and the other learned optimizer's state names the
/// class that loads it. States saved before the design was recorded are coordinate-memory ones.
void check_learned_state_archive(torch::serialize::InputArchive& archive, const char* name,
                                 const std::string& design);

}  // namespace detail

/// The shared base: a torch::optim::Optimizer whose per-parameter states (ParamState) count
/// their skipped coordinates and keep their last step size. Instantiated in the library for the
/// two learned optimizers' states.
template <class ParamState, class Options>
class LearnedOptimizer : public torch::optim::Optimizer {
 public:
  using Step = ParameterStep<ParamState, Options>;

  /// The training loss of the coming step, for loops that compute it anyway and call step()
  /// without a closure (a closure's loss is used by itself).
  void report_loss(double loss) { reported_.loss = loss; }
  /// A validation metric (lower is better), whenever the loop evaluates one, as with
  /// torch::optim's ReduceLROnPlateau.
  void report_validation(double metric) { reported_.validation = metric; }

  /// Total coordinate updates skipped for non-finite gradients so far.
  int64_t skipped() const;
  /// The step size each parameter took at its last step (lr included), in parameter order; 0 for
  /// a parameter not stepped yet.
  std::vector<double> step_sizes() const;

 protected:
  /// Checks the options of `defaults` and of every group, and the parameters, before
  /// torch::optim::Optimizer sees them, so errors name the parameter or the option; `name`
  /// ("ScheduleMnemosyne") starts each message.
  LearnedOptimizer(std::vector<torch::optim::OptimizerParamGroup> groups, const Options& defaults,
                   const char* name)
      : torch::optim::Optimizer(checked(std::move(groups), defaults, name),
                                std::make_unique<Options>(defaults)) {}

  /// LibTorch's loader (torch::optim::serialize) restores the states but keeps the groups' options
  /// as constructed; a saved run continues exactly only with its own lr, total_steps, ...: read
  /// each group's saved options back (Options::serialize names what it cannot read).
  void restore_group_options(torch::serialize::InputArchive& archive) {
    torch::serialize::InputArchive groups, group, options;
    if (!archive.try_read("param_groups", groups)) return;
    for (size_t i = 0; i < param_groups_.size(); ++i) {
      if (!groups.try_read("param_groups/" + std::to_string(i), group) ||
          !group.try_read("options", options))
        continue;
      auto restored = std::make_unique<Options>();
      restored->serialize(options);
      param_groups_[i].set_options(std::move(restored));
    }
  }

  /// Every parameter that has a gradient, with its group's options and its state (made on its
  /// first step), in group order.
  std::vector<Step> steps_with_gradients();

  /// The reports since the last step, cleared: each is read by one step only.
  ReportedSignals take_reports() {
    ReportedSignals reports = reported_;
    reported_ = {};
    return reports;
  }

 private:
  static std::vector<torch::optim::OptimizerParamGroup> checked(
      std::vector<torch::optim::OptimizerParamGroup> groups, const Options& defaults,
      const char* name) {
    defaults.check(name);
    for (const auto& group : groups)
      if (group.has_options()) static_cast<const Options&>(group.options()).check(name);
    detail::check_parameter_groups(groups, name);
    return groups;
  }

  ReportedSignals reported_;
};

}  // namespace flt::optim
