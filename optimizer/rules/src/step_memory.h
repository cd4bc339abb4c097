#pragma once
// The learned optimizers' memory over the step index, shared by both designs: the first design runs
// it per coordinate (learned_model.cpp), the second per tensor (learned_schedule.cpp). Internal to
// the library.

#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/rnn.h>
#include <torch/types.h>

#include <cmath>
#include <utility>

#include "flt/attention/feature_map.h"
#include "flt/attention/flt.h"
#include "flt/optim/learned_model.h"

namespace flt::optim::detail {

/// What a memory of a given kind is made of (unused members are null for the other kinds).
struct StepMemory {
  Memory kind = Memory::kFLT;
  int64_t key_dim = 0, value_dim = 0, features = 0;
  torch::nn::Linear query{nullptr}, key{nullptr}, value{nullptr};  ///< attention memories
  attention::FLTAttention flt{nullptr};                            ///< FLT: RPE + FAVOR+ features
  attention::FeatureMap feature_map{nullptr};                      ///< Performer
  torch::Tensor discount_logit;  ///< gamma = sigmoid(.): (1), or (Dv) for the averages
  torch::nn::LSTMCell lstm{nullptr};

  /// Floats of memory per row: S (m x Dv) and z (m) for the attention memories, h and c for the
  /// LSTM, none for kNone.
  int64_t size() const;
  /// Width of the read-out.
  int64_t read_size() const;
};

/// The memory's initial time scale, each design its own: the discount's logit (gamma =
/// sigmoid) and the FLT spectrum's initial width and proposal scale (rpe_scale, proposal_sigma).
struct StepMemoryInit {
  double discount_logit = 0.0, rpe_scale = 0.0, proposal_sigma = 0.0;
};

/// The largest discount logit the exponential averages use: gamma <= 1 - 1e-6.
inline const double kMaxAverageLogit = std::log(1e6 - 1.0);

/// The exponential-average memory's initial discounts, one per channel: time scales 1 / (1 - gamma)
/// spread over half a decade up to the other memories' (gamma = sigmoid(logit), so the scale is
/// 1 + e^logit), so that its channels start at different horizons as the FLT spectrum's
/// frequencies do. -> (channels)
inline torch::Tensor ema_discount_logits(double logit, int64_t channels) {
  const auto position = channels > 1 ? torch::linspace(-1.0, 0.0, channels, torch::kDouble)
                                     : torch::zeros({1}, torch::kDouble);
  return (logit + 0.5 * std::log(10.0) * position).to(torch::kFloat);
}

/// Registers the memory of `module.options.memory()` on `module` (LearnedOptimizerModelImpl,
/// LearnedScheduleImpl: the same member and option names), reading `inputs` features per step:
/// query, key, value and discount_logit for the attention memories, then flt (one head over the
/// 1-D step index), feature_map or lstm; value and one discount_logit per channel for the
/// exponential averages; the others are left null.
template <typename Module>
void register_step_memory(Module& module, int64_t inputs, const StepMemoryInit& init) {
  const auto& o = module.options;
  const int64_t dk = o.key_dim();
  module.query = module.key = module.value = nullptr;
  module.flt = nullptr;
  module.feature_map = nullptr;
  module.lstm = nullptr;
  if (o.memory() == Memory::kFLT || o.memory() == Memory::kPerformer) {
    module.query = module.register_module("query", torch::nn::Linear(inputs, dk));
    module.key = module.register_module("key", torch::nn::Linear(inputs, dk));
    module.value = module.register_module("value", torch::nn::Linear(inputs, o.value_dim()));
    module.discount_logit =
        module.register_parameter("discount_logit", torch::full({1}, init.discount_logit));
  }
  if (o.memory() == Memory::kFLT) {
    module.flt = module.register_module(
        "flt", attention::FLTAttention(attention::FLTAttentionOptions()
                                           .features(o.features())
                                           .rpe_features(o.rpe_features())
                                           .heads(1)
                                           .head_dim(dk)
                                           .rpe_scale(init.rpe_scale)
                                           .proposal_sigma(init.proposal_sigma)
                                           .seed(o.seed())));
  } else if (o.memory() == Memory::kPerformer) {
    module.feature_map = module.register_module(
        "feature_map",
        attention::FeatureMap(attention::FeatureMapOptions(dk, o.features()).seed(o.seed())));
  } else if (o.memory() == Memory::kLSTM) {
    module.lstm = module.register_module("lstm", torch::nn::LSTMCell(inputs, dk));
  } else if (o.memory() == Memory::kEMA) {
    module.value = module.register_module("value", torch::nn::Linear(inputs, o.value_dim()));
    module.discount_logit = module.register_parameter(
        "discount_logit", ema_discount_logits(init.discount_logit, o.value_dim()));
  }
}

/// The memory `module` holds (as registered by register_step_memory).
template <typename Module>
StepMemory step_memory_of(const Module& module) {
  const auto& o = module.options;
  return {o.memory(), o.key_dim(),  o.value_dim(), o.features(),       module.query,
          module.key, module.value, module.flt,    module.feature_map, module.discount_logit,
          module.lstm};
}

/// One step t >= 1 of N independent memories (rows), each seeing one token per step: the
/// attention memories decay their state by gamma, append this step's key and value and read with
/// its query (FLT: with the RPE features of the step index, so the learned spectrum weighs steps by
/// their distance); the LSTM steps its cell.
/// x: (N, F)  memory: (N, size()) -> read (N, read_size()), memory (N, size())
std::pair<torch::Tensor, torch::Tensor> attend_step(const StepMemory& memory,
                                                    const torch::Tensor& x,
                                                    const torch::Tensor& state, int64_t t,
                                                    double read_floor);

}  // namespace flt::optim::detail
