#pragma once
// The meta-model of the Mnemosyne-style learned optimizer: the rule that maps one coordinate's
// gradient history to its update. Its weights (meta-parameters) are shared by every coordinate of
// every parameter; each coordinate keeps a small state vector. All coordinates of a tensor are
// processed together as a batch of N independent rows.
//
// Per coordinate, step t (1-based):
//   moments      m1 = EMA_0.9(g), m2 = EMA_0.99(g), v = EMA_0.999(g^2), bias-corrected (Adam's)
//   features x   [g, m1, m2] / sqrt(v) (clamped), log-and-sign encodings (k = 5) of g, m1, sqrt(v)
//                and of the parameter's own value
//   memory       FLT: causal linear attention run as an RNN over the step index,
//                  S_t = gamma S_{t-1} + phi(K^_t) v_t^T,  z_t = gamma z_{t-1} + phi(K^_t),
//                  read = phi(Q^_t)^T S_t / phi(Q^_t)^T z_t,
//                with Q^ = [N1(t), q D^{-1/4}], K^ = [N2(t), k D^{-1/4}] carrying the FLT RPE
//                features of the step index (learned spectrum g: it weighs recent vs old history)
//                and a learned discount gamma; Performer: the same without RPE; LSTM: an LSTM cell;
//                None: no memory (MLP rule).
//   head         MLP([x, read]) -> (direction d, log-magnitude a), a squashed to (-2, 2)
//   update       -eta * (m1 / sqrt(v) + d) * exp(a)
// eta is the tensor's step size, chosen per parameter tensor by a controller (learned_rule.h): a
// step relative to the tensor's RMS, times exp(c) where c follows a hypergradient signal (the
// cosine between the new gradient and the previous step), so steps grow while they agree and
// shrink under noise or oscillation: the rule settles. The controller's four scalars (relative step
// rho, scale floor, gain kappa, target) are meta-parameters like the head's weights.
// The last head layer starts at zero, so an untrained model is Adam with learning rate eta; the
// meta-trained weights learn the correction d and the magnitude a, and tune the controller.

#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/rnn.h>
#include <torch/types.h>

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "flt/attention/feature_map.h"
#include "flt/attention/flt.h"
#include "flt/kernels/coordinate_rule.h"

namespace flt::optim {
namespace detail {
struct StepMemory;
struct LearnedModelInternals;
}  // namespace detail

/// Memory cell of the learned optimizer.
enum class Memory {
  kFLT,        ///< FLT linear attention over the step index with a learned RPE spectrum (default)
  kPerformer,  ///< FAVOR+ linear attention without RPE
  kNone,       ///< no memory: an MLP on the features
  kLSTM,       ///< an LSTM cell (classic learning-to-learn baseline)
  kEMA,        ///< exponential averages of a projection of the same inputs, one learned
               ///< discount per channel: the FLT memory's ablation (what a learned spectrum adds
               ///< over fixed-shape forgetting)
};
/// Every memory kind, in the order above.
std::vector<Memory> all_memories();
/// "flt", "performer", "none", "lstm", "ema".
std::string memory_name(Memory memory);
/// Inverse of `memory_name`; throws naming the unknown name.
Memory memory_from_name(const std::string& name);

struct LearnedOptimizerModelOptions {
  /// Memory cell kind.
  TORCH_ARG(Memory, memory) = Memory::kFLT;
  /// Query/key width of the attention memory (and hidden width of the LSTM memory).
  TORCH_ARG(int64_t, key_dim) = 4;
  /// Value width of the attention memory (the read-out width).
  TORCH_ARG(int64_t, value_dim) = 2;
  /// FAVOR+ random features m of the attention memory.
  TORCH_ARG(int64_t, features) = 4;
  /// RPE random features r of the FLT memory. Many by default: they only enter per-step scalars
  /// (no state, no per-coordinate cost), and the RPE estimate's variance falls as 1/r.
  TORCH_ARG(int64_t, rpe_features) = 32;
  /// Hidden width of the head MLP.
  TORCH_ARG(int64_t, hidden) = 32;
  /// Initial controller meta-parameters (learned_rule.h): the step relative to the tensor's RMS,
  /// the floor of that RMS (zero-initialised tensors), the gain and the target of the cosine (both
  /// > 0.03, their lower bounds).
  TORCH_ARG(double, relative_step) = 0.05;
  TORCH_ARG(double, scale_floor) = 1e-2;
  TORCH_ARG(double, controller_gain) = 0.035;
  TORCH_ARG(double, controller_target) = 0.035;
  /// Seed of the random features (the initial weights come from LibTorch's global generator).
  TORCH_ARG(uint64_t, seed) = 0;
};

/// Result of one step for N coordinates.
struct LearnedStep {
  torch::Tensor update;  ///< (N): add to the parameter
  torch::Tensor state;   ///< (N, state_size()): the coordinates' new state
};

class LearnedOptimizerModelImpl : public torch::nn::Cloneable<LearnedOptimizerModelImpl> {
 public:
  explicit LearnedOptimizerModelImpl(LearnedOptimizerModelOptions options = {});
  void reset() override;
  void pretty_print(std::ostream& stream) const override;

  /// Floats of state per coordinate (moments + memory).
  int64_t state_size() const;
  /// A fresh state for n coordinates. -> (n, state_size())
  torch::Tensor initial_state(int64_t n, const torch::TensorOptions& options) const;

  /// One optimisation step for N coordinates at step index t >= 1 with step size `step_size`
  /// (a scalar or one per coordinate, (N)). Differentiable with respect to the meta-parameters
  /// (meta-training back-propagates through it); gradients must be finite (the optimizer masks the
  /// others out before calling).
  /// grad: (N)  param: (N)  state: (N, state_size()) -> update (N), state (N, state_size())
  LearnedStep step(const torch::Tensor& grad, const torch::Tensor& param,
                   const torch::Tensor& state, int64_t t, const torch::Tensor& step_size);

  // The fused inference step the optimizer runs (one pass per coordinate, vectorised, OpenMP;
  // `step` is its reference) is internal to the library: optimizer/rules/src/learned_step_fused.h.

  // ---- the per-tensor step-size controller (learned_rule.h) ----
  /// Controller state of a fresh tensor: [c = 0, mean(param^2), h = 0, mean(param^2), long-run
  /// mean(grad^2) = 0 (none yet)].
  /// -> (kTensorState) float32
  torch::Tensor initial_tensor_state(const torch::Tensor& param) const;
  /// The step sizes at step t (without the user's lr) of S tensors with controller states
  /// (S, kTensorState); total_steps > 0 adds cosine annealing to 0 at that step. Differentiable in
  /// the meta-parameters. -> (S)
  torch::Tensor tensor_step_size(const torch::Tensor& tensor_states, int64_t t,
                                 int64_t total_steps = 0) const;
  /// Per-coordinate terms of the controller's statistics from a step's gradient, the coordinates'
  /// state before the step and the parameter after it: (N, 4) = [g d_prev, g^2, d_prev^2, p_new^2]
  /// with d_prev = m1 / sqrt(v) of the old state. Sum them over each tensor for next_tensor_state.
  static torch::Tensor step_statistics(const torch::Tensor& grad, const torch::Tensor& old_state,
                                       const torch::Tensor& new_param);
  /// The controllers' next states (S, kTensorState) from each tensor's summed statistics (S, 4)
  /// and its number of entries (S).
  torch::Tensor next_tensor_state(const torch::Tensor& tensor_states,
                                  const torch::Tensor& statistics,
                                  const torch::Tensor& numels) const;

  /// Number of input features of the head (without the memory read-out).
  static constexpr int64_t kFeatures = kernels::coordinate::kFeatures;
  /// Moment slots at the start of the state: m1, m2, v.
  static constexpr int64_t kMoments = kernels::coordinate::kMoments;

  LearnedOptimizerModelOptions options;
  torch::nn::Linear query{nullptr}, key{nullptr}, value{nullptr};  ///< attention memories
  attention::FLTAttention flt{nullptr};                            ///< FLT memory: RPE + features
  attention::FeatureMap feature_map{nullptr};                      ///< Performer memory
  torch::Tensor discount_logit;                                    ///< gamma = sigmoid(.)
  /// Controller meta-parameters (scalars): log rho, log floor, log(kappa - 0.03),
  /// log(target - 0.03).
  torch::Tensor step_log_relative, step_log_floor, step_log_gain, step_log_target;
  torch::nn::LSTMCell lstm{nullptr};
  torch::nn::Linear head_in{nullptr}, head_out{nullptr};

 private:
  friend struct detail::LearnedModelInternals;  // the fused step (learned_step_fused.h)
  int64_t memory_size() const;
  int64_t read_size() const;
  /// The memory's modules, for the step shared by both designs (step_memory.h).
  detail::StepMemory step_memory() const;
};
TORCH_MODULE(LearnedOptimizerModel);

/// Andrychowicz et al.'s log-and-sign encoding with threshold e^{-k}:
/// |x| >= e^{-k}: (log|x| / k, sign x); otherwise (-1, e^k x). x: (N) -> (N, 2)
torch::Tensor log_sign_encoding(const torch::Tensor& x, double k = 5.0);

}  // namespace flt::optim
