#pragma once
// The learned optimizers' memory over the step index, shared by both designs: the first design runs
// it per coordinate (learned_model.cpp), the second per tensor (learned_schedule.cpp). Internal to
// the library.

#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/rnn.h>
#include <torch/types.h>

#include <cmath>
#include <utility>
#include <vector>

#include "flt/attention/feature_map.h"
#include "flt/attention/flt.h"
#include "flt/optim/learned_model.h"

namespace flt::optim::detail {

/// Floats of memory per row of a memory kind: S (m x Dv) and z (m) for the attention memories, h
/// and c for the LSTM, the averages for kEMA, none for kNone.
int64_t memory_size(Memory kind, int64_t key_dim, int64_t value_dim, int64_t features);
/// Width of a memory kind's read-out.
int64_t memory_read_size(Memory kind, int64_t key_dim, int64_t value_dim);

/// A linear layer of C models stacked: weight (C, out, in), bias (C, out).
struct StackedLinear {
  torch::Tensor weight, bias;
  /// x: (C, N, in) -> (C, N, out)
  torch::Tensor operator()(const torch::Tensor& x) const;
};

/// Tensors of C models stacked along a new leading dimension (differentiable); one model's is a
/// view with a leading 1, no copy.
torch::Tensor stack_models(const std::vector<torch::Tensor>& tensors);
/// The layers' weights stacked (a null first layer gives an empty StackedLinear).
StackedLinear stack_models(const std::vector<torch::nn::Linear>& layers);

/// The memories of C models of one shape, their weights stacked so that one call steps every
/// model's rows (unused members are empty for the other kinds). One model's memory is a stack of
/// one: the formulas exist once.
struct StepMemory {
  Memory kind = Memory::kFLT;
  int64_t key_dim = 0, value_dim = 0, features = 0;
  StackedLinear query, key, value;  ///< attention memories (value: the averages' too)
  /// FLT: each model's module, for its RPE features; the first one's FAVOR+ feature map serves
  /// every model (their random features are equal: checked when stacked).
  std::vector<attention::FLTAttention> flt;
  attention::FeatureMap feature_map{nullptr};  ///< Performer (shared likewise)
  torch::Tensor discount_logit;                ///< gamma = sigmoid(.): (C, 1), or (C, Dv) averages
  std::vector<torch::nn::LSTMCell> lstm;       ///< one per model

  int64_t size() const { return memory_size(kind, key_dim, value_dim, features); }
  int64_t read_size() const { return memory_read_size(kind, key_dim, value_dim); }
};

/// The FLT memory's RPE features of every stacked model at step t: (C, 2r) for the queries and
/// for the keys (undefined for the other kinds). They depend on t alone, so a run computes them
/// `block` steps at a time: one model's rpe_features call is ~20 small operations.
class RpeRows {
 public:
  explicit RpeRows(int64_t block = 1) : block_(block) {}
  std::pair<torch::Tensor, torch::Tensor> at(const StepMemory& memory, int64_t t);

 private:
  int64_t block_, first_ = 0;  ///< positions first_ .. first_ + block_ - 1 are in n1_, n2_
  torch::Tensor n1_, n2_;      ///< (C, block, 2r)
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

/// The memories of `modules` (as registered by register_step_memory), stacked; they must share a
/// shape and their random features (checked, naming the first model that differs).
template <typename Module>
StepMemory step_memory_of(const std::vector<const Module*>& modules) {
  TORCH_CHECK(!modules.empty(), "step memory: no models to stack");
  const auto& o = modules[0]->options;
  StepMemory memory;
  memory.kind = o.memory();
  memory.key_dim = o.key_dim();
  memory.value_dim = o.value_dim();
  memory.features = o.features();
  std::vector<torch::nn::Linear> query, key, value;
  std::vector<torch::Tensor> discount;
  for (size_t c = 0; c < modules.size(); ++c) {
    const auto& m = *modules[c];
    TORCH_CHECK(m.options.memory() == o.memory() && m.options.key_dim() == o.key_dim() &&
                    m.options.value_dim() == o.value_dim() &&
                    m.options.features() == o.features() &&
                    m.options.rpe_features() == o.rpe_features(),
                "step memory: model ", c, " has a memory of another shape than model 0's");
    query.push_back(m.query);
    key.push_back(m.key);
    value.push_back(m.value);
    if (m.discount_logit.defined()) discount.push_back(m.discount_logit);
    if (!m.flt.is_empty()) {
      TORCH_CHECK(c == 0 || at::equal(m.flt->feature_map->projection,
                                      modules[0]->flt->feature_map->projection),
                  "step memory: model ", c,
                  "'s FLT memory has other random features than model 0's (another seed)");
      memory.flt.push_back(m.flt);
    }
    if (!m.feature_map.is_empty()) {
      TORCH_CHECK(
          c == 0 || at::equal(m.feature_map->projection, modules[0]->feature_map->projection),
          "step memory: model ", c,
          "'s Performer memory has other random features than model 0's (another seed)");
    }
    if (!m.lstm.is_empty()) memory.lstm.push_back(m.lstm);
  }
  memory.query = stack_models(query);
  memory.key = stack_models(key);
  memory.value = stack_models(value);
  if (!discount.empty()) memory.discount_logit = stack_models(discount);
  memory.feature_map = modules[0]->feature_map;
  return memory;
}

/// One step t >= 1 of C models' memories over N rows each (independent memories), each row seeing
/// one token per step: the attention memories decay their state by gamma, append this step's key
/// and value and read with its query (FLT: with the RPE features of the step index, `rpe`, so the
/// learned spectrum weighs steps by their distance); the LSTM steps its cell.
/// x: (C, N, F)  memory: (C, N, size())  rpe: RpeRows::at(memory, t) for FLT
/// -> read (C, N, read_size()), memory (C, N, size())
std::pair<torch::Tensor, torch::Tensor> attend_step(
    const StepMemory& memory, const torch::Tensor& x, const torch::Tensor& state, int64_t t,
    double read_floor, const std::pair<torch::Tensor, torch::Tensor>& rpe = {});

}  // namespace flt::optim::detail
