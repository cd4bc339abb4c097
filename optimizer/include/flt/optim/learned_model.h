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
//   head         MLP([x, read]) -> (direction d, log-magnitude a)
//   update       -step_scale * (m1 / sqrt(v) + d) * exp(a)
// The last head layer starts at zero, so an untrained model is Adam with lr = step_scale; the
// meta-trained weights learn the correction d and the magnitude a.

#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/rnn.h>
#include <torch/types.h>

#include <string>
#include <vector>

#include "flt/attention/feature_map.h"
#include "flt/attention/flt.h"

namespace flt::optim {

/// Memory cell of the learned optimizer.
enum class Memory {
  kFLT,        ///< FLT linear attention over the step index with a learned RPE spectrum (default)
  kPerformer,  ///< FAVOR+ linear attention without RPE
  kNone,       ///< no memory: an MLP on the features
  kLSTM,       ///< an LSTM cell (classic learning-to-learn baseline)
};
/// Every memory kind, in the order above.
std::vector<Memory> all_memories();
/// "flt", "performer", "none", "lstm".
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
  /// RPE random features r of the FLT memory. They only enter per-step scalars (no state, no
  /// per-coordinate cost), and the RPE estimate's variance falls as 1/r: 1000-iteration ablation
  /// over 3 seeds, mean meta-objective -2.44 with r = 32 vs -2.35 with r = 4 (bench/NOTES.md).
  TORCH_ARG(int64_t, rpe_features) = 32;
  /// Hidden width of the head MLP.
  TORCH_ARG(int64_t, hidden) = 32;
  /// Base step (the untrained model is Adam with this learning rate).
  TORCH_ARG(double, step_scale) = 1e-2;
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

  /// One optimisation step for N coordinates at step index t >= 1. Differentiable with respect to
  /// the meta-parameters (meta-training back-propagates through it); gradients must be finite
  /// (the optimizer masks the others out before calling).
  /// grad: (N)  param: (N)  state: (N, state_size()) -> update (N), state (N, state_size())
  LearnedStep step(const torch::Tensor& grad, const torch::Tensor& param,
                   const torch::Tensor& state, int64_t t);

  /// The same step for inference, fused (one pass per coordinate, OpenMP): updates `param` by
  /// lr * update and `state` in place; coordinates with a non-finite gradient or step are left
  /// unchanged and counted in the return value. Used by the optimizer; `step` is its reference.
  /// State is slot-major here, the transpose of `step`'s (so a block of coordinates reads each slot
  /// with one vector load): param: (N) contiguous float32  grad: (N)
  /// state: (state_size(), N) contiguous float32
  int64_t fused_step_(torch::Tensor param, const torch::Tensor& grad, torch::Tensor state,
                      int64_t t, double lr);
  /// Whether this configuration has a fused path (positive FAVOR+ features, widths <= 64).
  bool fused_supported() const;

  /// Number of input features of the head (without the memory read-out).
  static constexpr int64_t kFeatures = 10;
  /// Moment slots at the start of the state: m1, m2, v.
  static constexpr int64_t kMoments = 3;

  LearnedOptimizerModelOptions options;
  torch::nn::Linear query{nullptr}, key{nullptr}, value{nullptr};  ///< attention memories
  attention::FLTAttention flt{nullptr};                            ///< FLT memory: RPE + features
  attention::FeatureMap feature_map{nullptr};                      ///< Performer memory
  torch::Tensor discount_logit;                                    ///< gamma = sigmoid(.)
  torch::nn::LSTMCell lstm{nullptr};
  torch::nn::Linear head_in{nullptr}, head_out{nullptr};

 private:
  int64_t memory_size() const;
  int64_t read_size() const;
  /// x: (N, kFeatures)  memory: (N, memory_size()) -> read (N, read_size()), memory
  std::pair<torch::Tensor, torch::Tensor> attend(const torch::Tensor& x,
                                                 const torch::Tensor& memory, int64_t t);
};
TORCH_MODULE(LearnedOptimizerModel);

/// Andrychowicz et al.'s log-and-sign encoding with threshold e^{-k}:
/// |x| >= e^{-k}: (log|x| / k, sign x); otherwise (-1, e^k x). x: (N) -> (N, 2)
torch::Tensor log_sign_encoding(const torch::Tensor& x, double k = 5.0);

}  // namespace flt::optim
