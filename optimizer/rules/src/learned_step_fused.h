#pragma once
// The coordinate-memory rule as CoordinateMnemosyne and meta-training run it for inference: the
// fused step (flt/kernels/coordinate_step.h: one vectorised pass per block of coordinates, OpenMP
// over the blocks of all a step's tensors; learned_step_fused.cpp lays the model out for it) and
// the per-tensor controller in double (learned_model.cpp).
// LearnedOptimizerModelImpl::step and its tensor controller functions (learned_model.h) are their
// differentiable reference. Internal to the library: not installed.

#include <torch/types.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "flt/kernels/coordinate_step.h"
#include "flt/optim/learned_model.h"
#include "learned_rule.h"
#include "step_memory.h"

namespace flt::optim::detail {

/// A design's memory and head laid out for the fused kernels (flt/kernels/coordinate_step.h): the
/// first design's coordinate step and the second's per-tensor decision (ScheduleStack) read the
/// same layout, made here once. Valid while the module's weights are unchanged; `set_step_terms`
/// fills in what changes with the step index.
struct FusedMemoryPlan {
  std::vector<torch::Tensor> owned;  ///< the float32 weights `weights` points into
  kernels::coordinate::RuleWeights weights;
  std::vector<double> ema_discounts;  ///< the EMA's gamma per channel (its read's unbiasing)
};

/// Whether a module of either design (the members register_step_memory made, and head_in,
/// head_out) has a fused path: widths within the kernel's bounds and, for the attention memories,
/// positive FAVOR+ features.
template <typename Module>
bool fused_memory_supported(const Module& model) {
  const auto& o = model.options;
  const int64_t widest = std::max({o.hidden(), o.key_dim(), o.value_dim(), o.features()});
  if (widest > kernels::coordinate::kMaxWidth ||
      memory_size(o.memory(), o.key_dim(), o.value_dim(), o.features()) >
          kernels::coordinate::kMaxState)
    return false;
  if (o.memory() == Memory::kFLT)
    return model.flt->feature_map->options.kind() == attention::FeatureKind::kPositive;
  if (o.memory() == Memory::kPerformer)
    return model.feature_map->options.kind() == attention::FeatureKind::kPositive;
  return true;
}

/// The weights of the plan for `kind`, from the layers and tensors a module of either design holds
/// (fused_memory_plan below passes them). Checks nothing: fused_memory_supported does.
struct MemoryLayers {
  Memory kind = Memory::kNone;
  int64_t key_dim = 0, value_dim = 0, features = 0, hidden = 0;
  torch::nn::Linear query{nullptr}, key{nullptr}, value{nullptr}, head_in{nullptr},
      head_out{nullptr};
  torch::nn::LSTMCell lstm{nullptr};
  torch::Tensor discount_logit, projection;  ///< projection: the FAVOR+ map's W
};
FusedMemoryPlan fused_memory_plan(const MemoryLayers& layers);

template <typename Module>
FusedMemoryPlan fused_memory_plan(const Module& model) {
  const auto& o = model.options;
  MemoryLayers layers;
  layers.kind = o.memory(), layers.key_dim = o.key_dim(), layers.value_dim = o.value_dim();
  layers.features = o.features(), layers.hidden = o.hidden();
  layers.query = model.query, layers.key = model.key, layers.value = model.value;
  layers.head_in = model.head_in, layers.head_out = model.head_out, layers.lstm = model.lstm;
  layers.discount_logit = model.discount_logit;
  if (o.memory() == Memory::kFLT) layers.projection = model.flt->feature_map->projection;
  if (o.memory() == Memory::kPerformer) layers.projection = model.feature_map->projection;
  return fused_memory_plan(layers);
}

/// The plan's terms at step index t: the FLT memory's RPE logits from its position rows at t
/// (n1 for the queries, n2 for the keys: 2r floats each; ignored by the other memories) and the
/// EMA's read unbiasing 1 / (1 - gamma^t).
void set_step_terms(FusedMemoryPlan& plan, int64_t t, const float* n1, const float* n2);

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
