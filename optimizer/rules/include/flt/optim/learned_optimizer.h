#pragma once
// What the two learned optimizers share (coordinate_mnemosyne.h: a memory per coordinate;
// schedule_mnemosyne.h: a learned per-tensor schedule over Adam's moments): the checks of their
// parameters and options, the bookkeeping of their per-parameter states (coordinates skipped, the
// last step size), the loss and validation reports a training loop may give, and the recognition
// of a saved state before LibTorch's loader sees it.

#include <torch/optim/optimizer.h>
#include <torch/serialize/archive.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

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

/// Every parameter of every group: defined, a leaf, floating point, listed once; at least one.
/// `name` ("CoordinateMnemosyne") starts each message, which names the parameter.
void check_parameter_groups(const std::vector<torch::optim::OptimizerParamGroup>& groups,
                            const char* name);
/// The options both optimizers take: lr finite and >= 0, chunk_size > 0, total_steps >= 0.
void check_learned_options(const char* name, double lr, int64_t chunk_size, int64_t total_steps);
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
template <class ParamState>
class LearnedOptimizer : public torch::optim::Optimizer {
 public:
  using torch::optim::Optimizer::Optimizer;

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
  /// LibTorch's loader (torch::optim::serialize) restores the states but keeps the groups' options
  /// as constructed; a saved run continues exactly only with its own lr, total_steps, ...: read
  /// each group's saved options back (Options::serialize names what it cannot read).
  template <class Options>
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

  /// The reports since the last step, cleared: each is read by one step only.
  ReportedSignals take_reports() {
    ReportedSignals reports = reported_;
    reported_ = {};
    return reports;
  }

 private:
  ReportedSignals reported_;
};

}  // namespace flt::optim
