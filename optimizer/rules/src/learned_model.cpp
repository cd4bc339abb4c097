#include "flt/optim/learned_model.h"

#include <ATen/ATen.h>
#include <torch/nn/init.h>

#include <cmath>

#include "learned_rule.h"
#include "learned_step_fused.h"
#include "step_memory.h"

namespace flt::optim {

using namespace detail;  // the rule's constants (learned_rule.h)

std::vector<Memory> all_memories() {
  return {Memory::kFLT, Memory::kPerformer, Memory::kNone, Memory::kLSTM, Memory::kEMA};
}

std::string memory_name(Memory memory) {
  switch (memory) {
    case Memory::kFLT: return "flt";
    case Memory::kPerformer: return "performer";
    case Memory::kNone: return "none";
    case Memory::kLSTM: return "lstm";
    case Memory::kEMA: return "ema";
  }
  return "?";
}

Memory memory_from_name(const std::string& name) {
  for (Memory m : all_memories()) {
    if (memory_name(m) == name) return m;
  }
  TORCH_CHECK(false, "unknown memory kind \"", name,
              "\" (expected flt, performer, none, lstm or ema)");
}

torch::Tensor log_sign_encoding(const torch::Tensor& x, double k) {
  const auto magnitude = x.abs();
  const auto large = magnitude >= std::exp(-k);
  const auto log_part =
      at::where(large, at::log(magnitude.clamp_min(std::exp(-k))) / k, at::full_like(x, -1.0));
  const auto sign_part = at::where(large, at::sign(x), x * std::exp(k));
  return at::stack({log_part, sign_part}, -1);
}

LearnedOptimizerModelImpl::LearnedOptimizerModelImpl(LearnedOptimizerModelOptions options_)
    : options(std::move(options_)) {
  reset();
}

void LearnedOptimizerModelImpl::reset() {
  TORCH_CHECK(options.key_dim() > 0, "LearnedOptimizerModel: key_dim must be positive, got ",
              options.key_dim());
  TORCH_CHECK(options.value_dim() > 0, "LearnedOptimizerModel: value_dim must be positive, got ",
              options.value_dim());
  TORCH_CHECK(options.features() > 0, "LearnedOptimizerModel: features must be positive, got ",
              options.features());
  TORCH_CHECK(options.rpe_features() > 0,
              "LearnedOptimizerModel: rpe_features must be positive, got ", options.rpe_features());
  TORCH_CHECK(options.hidden() > 0, "LearnedOptimizerModel: hidden must be positive, got ",
              options.hidden());
  const auto check_positive = [](double value, const char* name) {
    TORCH_CHECK(value > 0.0 && std::isfinite(value), "LearnedOptimizerModel: ", name,
                " must be positive and finite, got ", value);
  };
  check_positive(options.relative_step(), "relative_step");
  check_positive(options.scale_floor(), "scale_floor");
  TORCH_CHECK(options.controller_gain() > kMinGain && std::isfinite(options.controller_gain()),
              "LearnedOptimizerModel: controller_gain must be finite and > ", kMinGain, ", got ",
              options.controller_gain());
  TORCH_CHECK(
      options.controller_target() > kMinTarget && std::isfinite(options.controller_target()),
      "LearnedOptimizerModel: controller_target must be finite and > ", kMinTarget, ", got ",
      options.controller_target());
  // One head; the step index is a 1-D position. The mixture's initial width 0.02 in frequency
  // gives f a length scale of about 1 / (2 pi 0.02) ~ 8 steps; the proposal matches it. gamma
  // starts at 0.9.
  detail::register_step_memory(*this, kFeatures,
                               {/*discount_logit=*/std::log(9.0), /*rpe_scale=*/0.02,
                                /*proposal_sigma=*/0.03});
  head_in =
      register_module("head_in", torch::nn::Linear(kFeatures + read_size(), options.hidden()));
  head_out = register_module("head_out", torch::nn::Linear(options.hidden(), 2));
  const auto scalar = [](double value) { return torch::full({}, value); };
  step_log_relative =
      register_parameter("step_log_relative", scalar(std::log(options.relative_step())));
  step_log_floor = register_parameter("step_log_floor", scalar(std::log(options.scale_floor())));
  step_log_gain =
      register_parameter("step_log_gain", scalar(std::log(options.controller_gain() - kMinGain)));
  step_log_target = register_parameter("step_log_target",
                                       scalar(std::log(options.controller_target() - kMinTarget)));
  torch::NoGradGuard no_grad;
  head_out->weight.zero_();
  head_out->bias.zero_();
}

void LearnedOptimizerModelImpl::pretty_print(std::ostream& stream) const {
  stream << "flt::optim::LearnedOptimizerModel(memory=" << memory_name(options.memory())
         << ", state=" << state_size() << " floats/coordinate, hidden=" << options.hidden() << ")";
}

int64_t LearnedOptimizerModelImpl::memory_size() const {
  return detail::memory_size(options.memory(), options.key_dim(), options.value_dim(),
                             options.features());
}

int64_t LearnedOptimizerModelImpl::read_size() const {
  return detail::memory_read_size(options.memory(), options.key_dim(), options.value_dim());
}

int64_t LearnedOptimizerModelImpl::state_size() const {
  return kMoments + memory_size();
}

torch::Tensor LearnedOptimizerModelImpl::initial_state(int64_t n,
                                                       const torch::TensorOptions& opts) const {
  return torch::zeros({n, state_size()}, opts);
}

namespace detail {

int64_t memory_size(Memory kind, int64_t key_dim, int64_t value_dim, int64_t features) {
  switch (kind) {
    case Memory::kFLT:
    case Memory::kPerformer: return features * (value_dim + 1);  // S (m x Dv) and z (m)
    case Memory::kLSTM: return 2 * key_dim;                      // h and c
    case Memory::kEMA: return value_dim;                         // the averages
    case Memory::kNone: return 0;
  }
  return 0;
}

int64_t memory_read_size(Memory kind, int64_t key_dim, int64_t value_dim) {
  switch (kind) {
    case Memory::kFLT:
    case Memory::kPerformer: return value_dim;
    case Memory::kLSTM: return key_dim;
    case Memory::kEMA: return value_dim;
    case Memory::kNone: return 0;
  }
  return 0;
}

torch::Tensor StackedLinear::operator()(const torch::Tensor& x) const {
  return at::baddbmm(bias.unsqueeze(1), x, weight.transpose(1, 2));
}

torch::Tensor stack_models(const std::vector<torch::Tensor>& tensors) {
  return tensors.size() == 1 ? tensors[0].unsqueeze(0) : at::stack(tensors);
}

StackedLinear stack_models(const std::vector<torch::nn::Linear>& layers) {
  if (layers.empty() || layers[0].is_empty()) return {};
  std::vector<torch::Tensor> weights, biases;
  for (const auto& layer : layers) {
    weights.push_back(layer->weight);
    biases.push_back(layer->bias);
  }
  return {stack_models(weights), stack_models(biases)};
}

std::pair<torch::Tensor, torch::Tensor> RpeRows::at(const StepMemory& memory, int64_t t) {
  if (memory.kind != Memory::kFLT) return {};
  if (!n1_.defined() || t < first_ || t >= first_ + block_) {
    first_ = t;
    const auto positions =
        torch::arange(t, t + block_, torch::kDouble).to(memory.query.weight.scalar_type());
    std::vector<torch::Tensor> n1, n2;
    for (const auto& flt : memory.flt) {
      const auto [q, k] = flt->rpe_features(positions.view({1, -1, 1}));  // (1, 1, block, 2r)
      n1.push_back(q.reshape({block_, -1}));
      n2.push_back(k.reshape({block_, -1}));
    }
    n1_ = stack_models(n1);
    n2_ = stack_models(n2);
  }
  return {n1_.select(1, t - first_), n2_.select(1, t - first_)};
}

std::pair<torch::Tensor, torch::Tensor> attend_step(
    const StepMemory& memory, const torch::Tensor& x, const torch::Tensor& state, int64_t t,
    double read_floor, const std::pair<torch::Tensor, torch::Tensor>& rpe) {
  const int64_t models = x.size(0), n = x.size(1);
  if (memory.kind == Memory::kNone) return {x.new_zeros({models, n, 0}), state};
  if (memory.kind == Memory::kLSTM) {
    const int64_t h = memory.key_dim;
    std::vector<torch::Tensor> reads, states;
    for (int64_t c = 0; c < models; ++c) {
      auto lstm = memory.lstm[static_cast<size_t>(c)];
      const auto mine = state[c];
      auto [hx, cx] = lstm(x[c], std::make_tuple(mine.narrow(1, 0, h), mine.narrow(1, h, h)));
      reads.push_back(hx);
      states.push_back(at::cat({hx, cx}, 1));
    }
    return {stack_models(reads), stack_models(states)};
  }
  if (memory.kind == Memory::kEMA) {
    // a_t = gamma a_{t-1} + (1 - gamma) v_t from a_0 = 0, read bias-corrected as Adam reads its
    // moments: a_t / (1 - gamma^t) is the gamma-weighted mean of v_1..v_t, from the first step.
    // gamma <= 1 - 1e-6 (logit <= log(1e6 - 1)): a float sigmoid rounds to 1 from logit ~17, where
    // the read's 1 / (1 - gamma^t) would be infinite.
    const auto gamma =
        at::sigmoid(memory.discount_logit.clamp_max(detail::kMaxAverageLogit)).unsqueeze(1);
    const auto average = gamma * state + (1 - gamma) * memory.value(x);
    return {average / (1 - at::pow(gamma, static_cast<double>(t))), average};
  }
  // Bounded queries and keys: the unshifted FAVOR+ key features stay below exp(max_i |w_i|^2 / 2),
  // so the state needs no per-row stabilising shift.
  const double quarter = std::pow(static_cast<double>(memory.key_dim), -0.25);
  const auto q = at::tanh(memory.query(x)) * quarter;  // (C, N, Dk)
  const auto k = at::tanh(memory.key(x)) * quarter;
  const auto v = memory.value(x);  // (C, N, Dv)
  torch::Tensor phi_q, phi_k;      // (C, N, m)
  if (memory.kind == Memory::kFLT) {
    TORCH_CHECK(rpe.first.defined() && rpe.first.size(0) == models,
                "attend_step: the FLT memory needs the RPE rows of its ", models, " models");
    const auto& map = memory.flt[0]->feature_map;
    phi_q = map->query_features({rpe.first.unsqueeze(1).expand({models, n, -1}), q});
    phi_k = map->unshifted_features({rpe.second.unsqueeze(1).expand({models, n, -1}), k});
  } else {
    phi_q = memory.feature_map->query_features(q);
    phi_k = memory.feature_map->unshifted_features(k);
  }
  // The streaming state of causal linear attention, one per row (B = C models, H = N rows, one
  // token per step): decay by gamma, append this step's key and value, read with this step's
  // query. A row's memory is the state flattened: S (m, Dv) row-major, then z (m). At t = 1 it is
  // zeros, i.e. an empty state (nothing to decay).
  const int64_t m = memory.features, dv = memory.value_dim;
  attention::LinearAttentionState cell;
  cell.numerator = state.narrow(2, 0, m * dv).reshape({models, n, m, dv});
  cell.normaliser = state.narrow(2, m * dv, m).reshape({models, n, m, 1});
  cell.steps = t - 1;
  if (!cell.empty()) cell.decay(at::sigmoid(memory.discount_logit).view({models, 1, 1, 1}));
  cell.append(phi_k.unsqueeze(2), v.unsqueeze(2));
  const auto read = cell.read(phi_q.unsqueeze(2), read_floor).squeeze(2);
  return {read, at::cat({cell.numerator.reshape({models, n, m * dv}),
                         cell.normaliser.reshape({models, n, m})},
                        2)};
}

}  // namespace detail

detail::StepMemory LearnedOptimizerModelImpl::step_memory() const {
  return detail::step_memory_of(std::vector<const LearnedOptimizerModelImpl*>{this});
}

LearnedStep LearnedOptimizerModelImpl::step(const torch::Tensor& grad, const torch::Tensor& param,
                                            const torch::Tensor& state, int64_t t,
                                            const torch::Tensor& step_size) {
  TORCH_CHECK(t >= 1, "LearnedOptimizerModel::step: step index must be >= 1, got ", t);
  TORCH_CHECK(grad.dim() == 1 && param.sizes() == grad.sizes(),
              "LearnedOptimizerModel::step: grad and param must be (N), got ", grad.sizes(),
              " and ", param.sizes());
  TORCH_CHECK(state.dim() == 2 && state.size(0) == grad.size(0) && state.size(1) == state_size(),
              "LearnedOptimizerModel::step: state must be (", grad.size(0), ", ", state_size(),
              "), got ", state.sizes());
  const auto g = grad.clamp(-kMaxGradient, kMaxGradient);
  const auto m1 = kBeta1 * state.select(1, 0) + (1 - kBeta1) * g;
  const auto m2 = kBeta2 * state.select(1, 1) + (1 - kBeta2) * g;
  const auto v = kBetaV * state.select(1, 2) + (1 - kBetaV) * g * g;
  const double td = static_cast<double>(t);
  const auto m1_hat = m1 / (1 - std::pow(kBeta1, td));
  const auto m2_hat = m2 / (1 - std::pow(kBeta2, td));
  const auto rms = at::sqrt(v / (1 - std::pow(kBetaV, td)) + kRmsEpsilon);
  const auto ratio = [&](const torch::Tensor& a) {
    return (a / rms).clamp(-kRatioClip, kRatioClip);
  };
  const auto adam_direction = ratio(m1_hat), g_ratio = ratio(g), m2_ratio = ratio(m2_hat);
  const auto x = at::cat(
      {at::stack({g_ratio, adam_direction, m2_ratio}, 1), log_sign_encoding(g, kLogSignK),
       log_sign_encoding(m1_hat, kLogSignK), log_sign_encoding(rms, kLogSignK).narrow(1, 0, 1),
       log_sign_encoding(param.detach(), kLogSignK)},
      1);  // (N, kFeatures)
  const auto memory_of = step_memory();
  RpeRows rpe;
  auto [read, memory] =
      attend_step(memory_of, x.unsqueeze(0), state.narrow(1, kMoments, memory_size()).unsqueeze(0),
                  t, kReadFloor, rpe.at(memory_of, t));
  const auto out = head_out(at::tanh(head_in(at::cat({x, read.squeeze(0)}, 1))));  // (N, 2)
  TORCH_CHECK(step_size.dim() == 0 || step_size.sizes() == grad.sizes(),
              "LearnedOptimizerModel::step: step_size must be a scalar or (N), got ",
              step_size.sizes());
  const auto direction =
      adam_direction + correction_gate(g_ratio, adam_direction, m2_ratio) * out.select(1, 0);
  const auto magnitude = kMaxLogMagnitude * at::tanh(out.select(1, 1) / kMaxLogMagnitude);
  const auto update = -step_size * direction * at::exp(magnitude);
  return {update, at::cat({at::stack({m1, m2, v}, 1), memory.squeeze(0)}, 1)};
}

// ---- the per-tensor step-size controller ------------------------------------------------------

torch::Tensor LearnedOptimizerModelImpl::initial_tensor_state(const torch::Tensor& param) const {
  const double mean_square =
      param.numel() == 0 ? 0.0 : param.detach().to(at::kDouble).pow(2).mean().item<double>();
  return torch::tensor({0.0, mean_square, 0.0, mean_square, 0.0}, torch::kFloat);
}

torch::Tensor LearnedOptimizerModelImpl::tensor_step_size(const torch::Tensor& tensor_states,
                                                          int64_t t, int64_t total_steps) const {
  TORCH_CHECK(tensor_states.dim() == 2 && tensor_states.size(1) == kTensorState,
              "tensor_step_size: the controller states must be (S, ", kTensorState, "), got ",
              tensor_states.sizes());
  return controller_step_size<torch::Tensor>(tensor_states.select(1, 0), tensor_states.select(1, 1),
                                             tensor_states.select(1, 3), step_log_relative,
                                             step_log_floor, anneal(t, total_steps));
}

torch::Tensor LearnedOptimizerModelImpl::step_statistics(const torch::Tensor& grad,
                                                         const torch::Tensor& old_state,
                                                         const torch::Tensor& new_param) {
  // In double, as the fused step: in float, g^2 of a 1e-20 gradient underflows while g d does not.
  const auto g = grad.clamp(-kMaxGradient, kMaxGradient).to(at::kDouble);
  // d_prev = m1 / sqrt(v) without bias corrections: they scale every coordinate of the tensor
  // alike, and the cosine does not see a common scale.
  const auto previous = old_state.select(1, 0).to(at::kDouble) /
                        (at::sqrt(old_state.select(1, 2).to(at::kDouble)) + kCosineEpsilon);
  const auto p = new_param.to(at::kDouble);
  return at::stack({g * previous, g * g, previous * previous, p * p}, 1);
}

torch::Tensor LearnedOptimizerModelImpl::next_tensor_state(const torch::Tensor& tensor_states,
                                                           const torch::Tensor& statistics,
                                                           const torch::Tensor& numels) const {
  TORCH_CHECK(tensor_states.dim() == 2 && tensor_states.size(1) == kTensorState &&
                  statistics.dim() == 2 && statistics.size(1) == kStatistics &&
                  statistics.size(0) == tensor_states.size(0) &&
                  numels.numel() == tensor_states.size(0),
              "next_tensor_state: expected states (S, ", kTensorState, "), statistics (S, ",
              kStatistics, ") and numels (S), got ", tensor_states.sizes(), ", ",
              statistics.sizes(), " and ", numels.sizes());
  // In double, as the optimizer's inference path: sums of g^2 over a tensor (|g| <= 1e18) overflow
  // float, and inf / inf would make the cosine, then every later step, NaN.
  const auto type = tensor_states.scalar_type();
  const auto states = tensor_states.to(at::kDouble), sums = statistics.to(at::kDouble);
  const auto numel = numels.to(at::kDouble).clamp_min(1.0);
  auto [next, cosine, long_run] = controller_update<torch::Tensor>(
      states.select(1, 0), states.select(1, 4), sums.select(1, 0), sums.select(1, 1),
      sums.select(1, 2), numel, step_log_gain.to(at::kDouble), step_log_target.to(at::kDouble));
  const auto mean_square = sums.select(1, 3) / numel;
  return at::stack({next, mean_square, cosine, states.select(1, 3), long_run}, 1).to(type);
}

namespace detail {

ControllerParameters LearnedModelInternals::controller_parameters(
    const LearnedOptimizerModelImpl& model) {
  return {model.step_log_relative.item<double>(), model.step_log_floor.item<double>(),
          model.step_log_gain.item<double>(), model.step_log_target.item<double>()};
}

double tensor_step_size(const ControllerParameters& parameters, const TensorState& tensor_state,
                        int64_t t, int64_t total_steps) {
  return controller_step_size<double>(tensor_state[0], tensor_state[1], tensor_state[3],
                                      parameters.log_rho, parameters.log_floor,
                                      anneal(t, total_steps));
}

TensorState next_tensor_state(const ControllerParameters& parameters,
                              const TensorState& tensor_state,
                              const std::array<double, 4>& statistics, int64_t numel) {
  const double count = static_cast<double>(std::max<int64_t>(numel, 1));
  const auto [next, cosine, long_run] =
      controller_update<double>(tensor_state[0], tensor_state[4], statistics[0], statistics[1],
                                statistics[2], count, parameters.log_gain, parameters.log_target);
  return {next, statistics[3] / count, cosine, tensor_state[3], long_run};
}

}  // namespace detail
}  // namespace flt::optim
