#pragma once
// The fused CPU step of the learned optimizer's first design (flt/optim/learned_model.h): its
// per-coordinate rule (moments, features, memory, head; constants in coordinate_rule.h) over
// every tensor of one step in one vectorised, OpenMP-parallel loop, without intermediate tensors.
// LearnedOptimizerModelImpl::step is its differentiable reference; the model lays its weights out
// for this step (optimizer/rules/src/learned_step_fused.cpp) and the tests hold the two together.

#include <array>
#include <cstdint>
#include <vector>

#include "flt/kernels/coordinate_rule.h"

namespace flt::kernels::coordinate {

/// Bounds of the fused step: widths (hidden, key, value, features) and floats of state per
/// coordinate. Larger models take the composite reference.
constexpr int64_t kMaxWidth = 64;
constexpr int64_t kMaxState = 160;
/// Inputs per row of `memory_head_rows` at most.
constexpr int64_t kMaxInputs = 32;

/// The memory cell over the step index (flt::optim::Memory).
enum class MemoryKind { kLinearAttention, kEMA, kLSTM, kNone };

/// The model as the step reads it: float32 weights (row-major, out x in) and this step index's
/// scalars. Pointers only: the caller owns the weights and keeps them alive through the step.
struct RuleWeights {
  MemoryKind memory = MemoryKind::kNone;
  int64_t key_dim = 0, value_dim = 0, features = 0, hidden = 0;
  int64_t reads = 0;      ///< width of the memory's read-out, the head's extra inputs
  int64_t rpe_width = 0;  ///< leading columns of `proj` that multiply the RPE (FLT), else 0
  int64_t proj_cols = 0;
  const float *w_in = nullptr, *b_in = nullptr, *w_out = nullptr, *b_out = nullptr;  ///< head
  const float *wq = nullptr, *bq = nullptr, *wk = nullptr, *bk = nullptr;  ///< queries, keys
  const float *wv = nullptr, *bv = nullptr;  ///< values (attention and EMA memories)
  const float* proj = nullptr;               ///< (features, proj_cols): the positive features
  const float *lstm_ih = nullptr, *lstm_hh = nullptr, *lstm_b = nullptr;
  /// The RPE part of feature i's logits at this step, w_i[:2r] . N1(t) - |N1(t)|^2 / 2 (keys: N2),
  /// summed in double by the caller: with many RPE features the two terms are large and cancel.
  std::array<float, kMaxWidth> rpe_q_logits{}, rpe_k_logits{};
  /// The attention memories' discount gamma; the EMA memory's per channel: gamma, 1 - gamma, and
  /// the read's 1 / (1 - gamma^t).
  float gamma = 0;
  std::array<float, kMaxWidth> ema_keep{}, ema_gain{}, ema_unbias{};
  /// Bias corrections 1 / (1 - beta^t) of m1, m2, v at this step.
  float c1 = 0, c2 = 0, cv = 0;
  float quarter = 0;     ///< key_dim^(-1/4): the queries' and keys' scale
  float inv_sqrt_m = 0;  ///< features^(-1/2)
};

/// One tensor of a step: N coordinates, its state slot-major (slots x N, slot j of coordinate i at
/// state[j * N + i]), the tensor's step size; `skipped` and `statistics` are written by the step.
struct TensorSlice {
  const float* grad = nullptr;
  float* param = nullptr;
  float* state = nullptr;
  int64_t n = 0, slots = 0;
  float step_size = 0;
  int64_t skipped = 0;  ///< coordinates left unchanged (non-finite gradient or step)
  std::array<double, kStatistics> statistics{};  ///< summed g d_prev, g^2, d_prev^2, p_new^2
};

/// Steps every tensor in place, one parallel loop over all their blocks of coordinates (a small
/// model's tensors are each too small to split between threads, together they are not). Each
/// slice's results do not depend on the others or on the thread count.
void coordinate_steps_(const RuleWeights& weights, std::vector<TensorSlice>& tensors);

/// The same memory and head for rows whose inputs the caller computed (the second design's
/// per-tensor network, flt/optim/learned_schedule.h, whose features are not the coordinate rule's):
/// row r reads x[r * inputs, (r + 1) * inputs), steps memory[r * memory_width, ...) in place (the
/// composite's state row: S (m x Dv) row-major then z (m); the EMA's averages; the LSTM's h, c)
/// and writes the head's `outputs` numbers to out[r * outputs, ...), with the memory and head code
/// of coordinate_steps_, a block of rows at a time. Throws std::invalid_argument naming a width
/// beyond the fused bounds.
void memory_head_rows(const RuleWeights& weights, int64_t inputs, int64_t outputs, int64_t rows,
                      const float* x, float* memory, int64_t memory_width, float* out);

}  // namespace flt::kernels::coordinate
