// The coordinate rule's fused inference step as the model runs it: the model's weights laid out
// for the fused CPU step (flt/kernels/coordinate_step.h), its checks, and its results per tensor.
#include "learned_step_fused.h"

#include <ATen/ATen.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "flt/kernels/coordinate_step.h"
#include "flt/optim/learned_model.h"
#include "learned_rule.h"
#include "step_memory.h"  // kMaxAverageLogit

namespace flt::optim {
namespace {

torch::Tensor contiguous_float(const torch::Tensor& t) {
  return t.detach().to(at::kFloat).contiguous();
}

kernels::coordinate::MemoryKind memory_kind(Memory memory) {
  switch (memory) {
    case Memory::kFLT:
    case Memory::kPerformer: return kernels::coordinate::MemoryKind::kLinearAttention;
    case Memory::kEMA: return kernels::coordinate::MemoryKind::kEMA;
    case Memory::kLSTM: return kernels::coordinate::MemoryKind::kLSTM;
    case Memory::kNone: return kernels::coordinate::MemoryKind::kNone;
  }
  return kernels::coordinate::MemoryKind::kNone;
}

}  // namespace

namespace detail {

bool LearnedModelInternals::fused_supported(const LearnedOptimizerModelImpl& model) {
  // (The RPE features only enter the per-step logits computed outside the blocks: any r works.)
  return fused_memory_supported(model) && model.state_size() <= kernels::coordinate::kMaxState;
}

FusedMemoryPlan fused_memory_plan(const MemoryLayers& layers) {
  torch::NoGradGuard no_grad;
  FusedMemoryPlan prepared;
  kernels::coordinate::RuleWeights& plan = prepared.weights;
  plan.memory = memory_kind(layers.kind);
  plan.key_dim = layers.key_dim, plan.value_dim = layers.value_dim;
  plan.features = layers.features, plan.hidden = layers.hidden;
  plan.reads = memory_read_size(layers.kind, layers.key_dim, layers.value_dim);
  // Weights as contiguous float32 (a few hundred floats).
  const auto keep = [&owned = prepared.owned](const torch::Tensor& tensor) {
    owned.push_back(contiguous_float(tensor));
    return owned.back().data_ptr<float>();
  };
  plan.w_in = keep(layers.head_in->weight), plan.b_in = keep(layers.head_in->bias);
  plan.w_out = keep(layers.head_out->weight), plan.b_out = keep(layers.head_out->bias);
  const Memory memory = layers.kind;
  if (memory == Memory::kFLT || memory == Memory::kPerformer) {
    plan.wq = keep(layers.query->weight), plan.bq = keep(layers.query->bias);
    plan.wk = keep(layers.key->weight), plan.bk = keep(layers.key->bias);
    plan.wv = keep(layers.value->weight), plan.bv = keep(layers.value->bias);
    plan.gamma = 1.0f / (1.0f + std::exp(-layers.discount_logit.item<float>()));
    plan.proj = keep(layers.projection);  // (m, 2r + Dk) for FLT, (m, Dk) for Performer
    plan.proj_cols = layers.projection.size(1);
    plan.rpe_width = memory == Memory::kFLT ? plan.proj_cols - plan.key_dim : 0;
  } else if (memory == Memory::kEMA) {
    plan.wv = keep(layers.value->weight), plan.bv = keep(layers.value->bias);
    const auto gamma = torch::sigmoid(
        layers.discount_logit.to(torch::kDouble).clamp_max(detail::kMaxAverageLogit));
    for (int64_t e = 0; e < plan.value_dim; ++e) {
      prepared.ema_discounts.push_back(gamma[e].item<double>());
      plan.ema_keep[e] = static_cast<float>(prepared.ema_discounts.back());
      plan.ema_gain[e] = static_cast<float>(1.0 - prepared.ema_discounts.back());
    }
  } else if (memory == Memory::kLSTM) {
    plan.lstm_ih = keep(layers.lstm->weight_ih), plan.lstm_hh = keep(layers.lstm->weight_hh);
    plan.lstm_b = keep(layers.lstm->bias_ih + layers.lstm->bias_hh);
  }
  plan.quarter = std::pow(static_cast<float>(plan.key_dim), -0.25f);
  plan.inv_sqrt_m = 1.0f / std::sqrt(static_cast<float>(plan.features));
  return prepared;
}

void set_step_terms(FusedMemoryPlan& prepared, int64_t t, const float* n1, const float* n2) {
  auto& plan = prepared.weights;
  if (plan.rpe_width > 0) {
    double q_norm = 0.0, k_norm = 0.0;
    for (int64_t c = 0; c < plan.rpe_width; ++c) {
      q_norm += 0.5 * double(n1[c]) * n1[c];
      k_norm += 0.5 * double(n2[c]) * n2[c];
    }
    for (int64_t i = 0; i < plan.features; ++i) {
      double q_logit = -q_norm, k_logit = -k_norm;
      for (int64_t c = 0; c < plan.rpe_width; ++c) {
        q_logit += double(plan.proj[i * plan.proj_cols + c]) * n1[c];
        k_logit += double(plan.proj[i * plan.proj_cols + c]) * n2[c];
      }
      plan.rpe_q_logits[i] = static_cast<float>(q_logit);
      plan.rpe_k_logits[i] = static_cast<float>(k_logit);
    }
  }
  for (size_t e = 0; e < prepared.ema_discounts.size(); ++e)
    plan.ema_unbias[e] =
        static_cast<float>(1.0 / (1.0 - std::pow(prepared.ema_discounts[e], double(t))));
}

struct FusedPlan : FusedMemoryPlan {};

std::shared_ptr<const FusedPlan> LearnedModelInternals::prepare_fused_step(
    const LearnedOptimizerModelImpl& model, int64_t t) {
  TORCH_CHECK(fused_supported(model),
              "LearnedOptimizerModel: this configuration has no fused path");
  TORCH_CHECK(t >= 1, "prepare_fused_step: the step index t must be >= 1, got ", t);
  torch::NoGradGuard no_grad;
  auto prepared = std::make_shared<FusedPlan>();
  static_cast<FusedMemoryPlan&>(*prepared) = fused_memory_plan(model);
  torch::Tensor n1, n2;
  if (model.options.memory() == Memory::kFLT) {
    const auto position = torch::full({1, 1, 1}, static_cast<double>(t), torch::kFloat);
    const auto [q_rpe, k_rpe] = model.flt->rpe_features(position);
    n1 = contiguous_float(q_rpe.reshape({-1})), n2 = contiguous_float(k_rpe.reshape({-1}));
  }
  set_step_terms(*prepared, t, n1.defined() ? n1.data_ptr<float>() : nullptr,
                 n2.defined() ? n2.data_ptr<float>() : nullptr);
  auto& plan = prepared->weights;
  plan.c1 = 1.0 / (1.0 - std::pow(kBeta1, t)), plan.c2 = 1.0 / (1.0 - std::pow(kBeta2, t));
  plan.cv = 1.0 / (1.0 - std::pow(kBetaV, t));
  return prepared;
}

FusedResult fused_step_(const LearnedOptimizerModelImpl& model, torch::Tensor param,
                        const torch::Tensor& grad, torch::Tensor state, int64_t t,
                        double step_size) {
  std::vector<FusedTensor> one(1);
  one[0].param = std::move(param), one[0].grad = grad, one[0].state = std::move(state);
  one[0].step_size = step_size;
  LearnedModelInternals::fused_steps_(model, *LearnedModelInternals::prepare_fused_step(model, t),
                                      one);
  return one[0].result;
}

void LearnedModelInternals::fused_steps_(const LearnedOptimizerModelImpl& model,
                                         const FusedPlan& prepared,
                                         std::vector<FusedTensor>& tensors) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> grads(tensors.size());  // float32 contiguous: what slices point into
  std::vector<kernels::coordinate::TensorSlice> slices(tensors.size());
  for (size_t k = 0; k < tensors.size(); ++k) {
    const auto& param = tensors[k].param;
    const auto& state = tensors[k].state;
    TORCH_CHECK(param.scalar_type() == at::kFloat && param.is_contiguous() && param.dim() == 1,
                "fused_step_: param must be a contiguous float32 vector, got ", param.sizes(), " ",
                param.scalar_type());
    TORCH_CHECK(state.scalar_type() == at::kFloat && state.is_contiguous() && state.dim() == 2 &&
                    state.size(0) == model.state_size() && state.size(1) == param.size(0),
                "fused_step_: state must be contiguous float32 (", model.state_size(), ", ",
                param.size(0), ") (slot-major), got ", state.sizes());
    TORCH_CHECK(tensors[k].grad.numel() == param.numel(), "fused_step_: grad has ",
                tensors[k].grad.numel(), " entries, param ", param.numel());
    grads[k] = contiguous_float(tensors[k].grad.reshape({-1}));
    auto& slice = slices[k];
    slice.grad = grads[k].data_ptr<float>();
    slice.param = param.data_ptr<float>(), slice.state = state.data_ptr<float>();
    slice.n = param.size(0), slice.slots = state.size(0);
    slice.step_size = static_cast<float>(tensors[k].step_size);
  }
  kernels::coordinate::coordinate_steps_(prepared.weights, slices);
  for (size_t k = 0; k < tensors.size(); ++k) {
    tensors[k].result.skipped = slices[k].skipped;
    tensors[k].result.statistics = slices[k].statistics;
  }
}

}  // namespace detail
}  // namespace flt::optim
