#pragma once
// The coordinate-memory rule as CoordinateMnemosyne and meta-training run it for inference: the
// fused step (flt/kernels/coordinate_step.h: one vectorised pass per block of coordinates, OpenMP
// over the blocks of all a step's tensors; learned_step_fused.cpp lays the model out for it) and
// the per-tensor controller in double (learned_model.cpp).
// LearnedOptimizerModelImpl::step and its tensor controller functions (learned_model.h) are their
// differentiable reference. Internal to the library: not installed.

#include <torch/types.h>

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "flt/optim/learned_model.h"
#include "learned_rule.h"

namespace flt::optim::detail {

/// What a fused step reports for one tensor.
struct FusedResult {
  int64_t skipped = 0;  ///< coordinates left unchanged (non-finite gradient or step)
  std::array<double, 4>
      statistics{};  ///< summed g d_prev, g^2, d_prev^2, p_new^2 (the controller's)
};

/// One tensor of a fused step.
struct FusedTensor {
  torch::Tensor param;  ///< (N) contiguous float32, updated in place
  torch::Tensor grad;   ///< (N)
  torch::Tensor state;  ///< (state_size(), N) contiguous float32, slot-major, updated in place
  double step_size = 0.0;
  FusedResult result;  ///< written by fused_steps_
};

/// What fused steps at step index t share: the weights as float32 and the step index's terms (the
/// FLT memory's RPE logits). Preparing costs tens of microseconds, more than the step of a
/// 1000-entry tensor, so an optimizer step prepares it once for all its tensors. Valid while the
/// weights are unchanged.
struct FusedPlan;

/// The controller's state of one tensor and its meta-parameters, in double (read once per step).
using TensorState = std::array<double, kTensorState>;
struct ControllerParameters {
  double log_rho = 0, log_floor = 0, log_gain = 0, log_target = 0;
};

/// The parts of the model the fused path reads (a friend of LearnedOptimizerModelImpl).
struct LearnedModelInternals {
  /// Whether the configuration has a fused path (positive FAVOR+ features, widths <= 64).
  static bool fused_supported(const LearnedOptimizerModelImpl& model);
  static std::shared_ptr<const FusedPlan> prepare_fused_step(const LearnedOptimizerModelImpl& model,
                                                             int64_t t);
  /// Every tensor in one parallel loop over all their blocks (a small model's tensors are each too
  /// small to split between threads, together they are not); each entry's `result` does not depend
  /// on the others or on the thread count.
  static void fused_steps_(const LearnedOptimizerModelImpl& model, const FusedPlan& plan,
                           std::vector<FusedTensor>& tensors);
  static ControllerParameters controller_parameters(const LearnedOptimizerModelImpl& model);
};

/// One tensor's fused step at step index t (prepares the plan itself): updates `param` and `state`
/// in place, as `LearnedOptimizerModelImpl::step` computes them (transposed state).
FusedResult fused_step_(const LearnedOptimizerModelImpl& model, torch::Tensor param,
                        const torch::Tensor& grad, torch::Tensor state, int64_t t,
                        double step_size);

/// The controller in double: a tensor's step size at step t (total_steps > 0: with the cosine
/// anneal), and its next state from the step's summed statistics over `numel` entries.
double tensor_step_size(const ControllerParameters& parameters, const TensorState& tensor_state,
                        int64_t t, int64_t total_steps);
TensorState next_tensor_state(const ControllerParameters& parameters,
                              const TensorState& tensor_state,
                              const std::array<double, 4>& statistics, int64_t numel);

}  // namespace flt::optim::detail
