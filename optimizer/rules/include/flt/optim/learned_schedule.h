#pragma once
// The second design of the learned optimizer: a learned per-tensor schedule whose memory sees the
// whole run, over a cheap per-coordinate rule.
//
// The first design (learned_model.h) gives every coordinate a memory that in practice looks back
// about ten steps, and steers each tensor's step with a four-scalar controller that sees one
// step's gradient against the last. It cannot tell a run that still improves from one at its noise
// floor. This design moves the long context to where it is cheap and where the FLT paper's argument
// applies: one memory per tensor, over hundreds to thousands of steps, whose learned RPE spectrum
// over step distance decides which parts of the history matter (as VeLO and Celo split a learned
// optimizer into a per-tensor network and a small per-parameter rule).
//
// Per tensor, step t (1-based), before the coordinates are touched:
//   features f_t  the step count as tanh(t / tau), tau = 10, 100, 1000, 10000 (no run length);
//                 the gradient's mean square against its running averages at three time scales;
//                 the cosine between the last gradient and the step before it, raw and averaged;
//                 the parameter's RMS growth since the start; optional: the training loss against
//                 its running averages and its minimum, the run's fraction when total_steps is
//                 known, a validation metric against its minimum and average (each with a mask)
//   memory        the FLT cell of learned_model.h run over the step index, one state per tensor
//   head          MLP([f_t, read]) -> (log step multiplier L in (-3, log 4), decay in (0, 1e-3),
//                 correction gain in (-1, 1)): bounded around the untrained rule
//   hand rule     the log growth G of the tensor's step, set by hand from first principles (on
//                 by default; off for weights saved before it existed): G_t = clamp(G_{t-1} +
//                 kappa (c_t - c0), low, high), c_t the averaged cosine between the gradient
//                 and the step before it. A larger step makes the loss fall faster while
//                 successive steps agree (the hypergradient g_t . d_{t-1} > 0, Baydin et al.
//                 2018), so the step grows, bounded, while progress is steady (a fast start for
//                 short runs, a growing step on separable sets) and decays once successive
//                 steps stop agreeing (oscillation, the noise floor): the decay a run without
//                 total_steps needs, triggered by its own history. kappa and c0 are learnable.
//   step size     eta = lr rho sqrt(mean p^2 + floor^2) exp(clamp(G + L, low, high))
//                 anneal(t, total_steps)
// Per coordinate (Adam's moments, two floats of state):
//   a = m_hat / (sqrt(v_hat) + eps), b = g / (sqrt(v_hat) + eps)   (clipped to +-10)
//   direction  a + gain * corrector(a, b), a 2-4-1 MLP with softsign units
//   update     p <- (1 - shrink anneal(t, total_steps)) p - eta * direction
// The head's last layer and the corrector's output start at zero: an untrained schedule is Adam
// with a step relative to each tensor's RMS grown or shrunk by the hand rule, and a tiny decoupled
// weight decay.

#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/rnn.h>
#include <torch/serialize/archive.h>
#include <torch/types.h>

#include <memory>
#include <optional>
#include <string>

#include "flt/attention/feature_map.h"
#include "flt/attention/flt.h"
#include "flt/kernels/schedule_rule.h"
#include "flt/optim/learned_model.h"

namespace flt::optim {

struct LearnedScheduleOptions {
  /// Memory over the run, one per tensor (kFLT: learned RPE over step distance; kNone: the head
  /// sees only the features).
  TORCH_ARG(Memory, memory) = Memory::kFLT;
  /// Query/key width of the attention memory (hidden width of the LSTM memory).
  TORCH_ARG(int64_t, key_dim) = 4;
  /// Value width of the attention memory (the read-out width).
  TORCH_ARG(int64_t, value_dim) = 4;
  /// FAVOR+ random features m of the attention memory.
  TORCH_ARG(int64_t, features) = 16;
  /// RPE random features r of the FLT memory.
  TORCH_ARG(int64_t, rpe_features) = 16;
  /// Hidden width of the per-tensor head.
  TORCH_ARG(int64_t, hidden) = 16;
  /// Initial step relative to the tensor's RMS, and the floor of that RMS (zero-initialised
  /// tensors): both meta-parameters.
  TORCH_ARG(double, relative_step) = 0.02;
  TORCH_ARG(double, scale_floor) = 1e-2;
  /// Bounds of the learned log step multiplier L, around the untrained rule's 0: the head can
  /// anneal a tensor's step to exp(-3) = 1/20 of the untrained rule's or raise it 4x, no further
  /// (older weights files load with the bounds they were trained with).
  TORCH_ARG(double, log_step_low) = -3.0;
  TORCH_ARG(double, log_step_high) = 1.3862943611198906;  // log 4
  /// Upper bound of the learned decoupled weight decay per step.
  TORCH_ARG(double, max_shrink) = 1e-3;
  /// The decay anneals with the step when the run's length is known, as AdamW's lr x weight_decay
  /// does under a schedule (a decay left on while the step anneals to 0 pulls every weight toward
  /// 0 at the run's end: a floor where the data allow an exact fit). Weights saved before it
  /// existed load with it off, so states saved with them continue exactly.
  TORCH_ARG(bool, anneal_decay) = true;
  /// Seed of the random features.
  TORCH_ARG(uint64_t, seed) = 0;
  /// The hand rule's step growth (see above); weights saved before it existed load with it off,
  /// so states saved with them continue exactly.
  TORCH_ARG(bool, hand_rule) = true;
  /// Its initial rate kappa (log growth per step at full agreement) and threshold c0 (the cosine
  /// below which the step shrinks): learnable parameters, these their starting values.
  TORCH_ARG(double, growth_rate) = 0.1;
  TORCH_ARG(double, growth_threshold) = 0.05;
};

/// What the training loop may tell the schedule beyond the gradients (all optional).
struct ScheduleSignals {
  std::optional<double> loss;        ///< the training loss of this step
  std::optional<double> fraction;    ///< t / total_steps when the run's length is known
  std::optional<double> validation;  ///< the latest validation metric the user reported
  /// Rows from runs of their own (the batched engine's instances): (C S) float64, each row's
  /// training loss of this step (NaN: none), read instead of `loss` when defined; ScheduleStack
  /// only.
  torch::Tensor row_losses;
};

/// One step's per-tensor decisions for S tensors.
struct ScheduleDecision {
  torch::Tensor step_size;  ///< (S) eta without the user's lr and the anneal
  torch::Tensor shrink;     ///< (S) decoupled weight decay of this step, in (0, 1)
  torch::Tensor gain;       ///< (S) weight of the per-coordinate correction, in (-1, 1)
};

class LearnedScheduleImpl : public torch::nn::Cloneable<LearnedScheduleImpl> {
 public:
  explicit LearnedScheduleImpl(LearnedScheduleOptions options = {});
  void reset() override;
  void pretty_print(std::ostream& stream) const override;

  /// Features of the per-tensor network.
  static constexpr int64_t kFeatures = 20;
  /// Slots of a tensor's history before its memory: [mean p^2 at the start, 3 running averages of
  /// the mean g^2, 2 of the cosine, the last pass's sums (g d, g^2, d^2, p^2, count), 2 running
  /// averages and the minimum of the loss, the minimum, last value and last change of the
  /// validation metric, the hand rule's log growth G]. Unseen signals are NaN.
  static constexpr int64_t kHistory = 18;
  /// Per-coordinate statistics a pass adds up for its tensor: g d_prev, g^2, d_prev^2, p_new^2.
  static constexpr int64_t kStatistics = 4;
  /// Hidden units of the per-coordinate corrector.
  static constexpr int64_t kCorrectorHidden = kernels::schedule::kCorrectorHidden;
  /// Adam's moments: the per-coordinate state.
  static constexpr int64_t kMoments = 2;
  static constexpr double kBeta1 = kernels::schedule::kBeta1, kBeta2 = kernels::schedule::kBeta2,
                          kEpsilon = kernels::schedule::kEpsilon,
                          kRatioClip = kernels::schedule::kRatioClip;

  /// Floats of history per tensor (kHistory + the memory).
  int64_t history_size() const;
  /// A fresh tensor's history. param: any shape -> (history_size()) float64
  torch::Tensor initial_history(const torch::Tensor& param) const;

  /// The per-tensor features at step t >= 1 from S histories. -> (S, kFeatures)
  torch::Tensor features(const torch::Tensor& histories, int64_t t,
                         const ScheduleSignals& signals) const;
  /// Step t of the per-tensor network for S tensors: their decisions and their histories with the
  /// memory stepped and the signals' running averages updated (the gradient statistics come in with
  /// `record` after the pass). histories: (S, history_size()) float64 -> decision, histories
  std::pair<ScheduleDecision, torch::Tensor> decide(const torch::Tensor& histories, int64_t t,
                                                    const ScheduleSignals& signals);
  /// The histories after a pass whose summed statistics are `sums` (S, kStatistics) over `numels`
  /// (S) coordinates: running averages of the gradient's mean square and of the cosine updated, the
  /// sums kept for the next step's features. -> (S, history_size())
  static torch::Tensor record(const torch::Tensor& histories, const torch::Tensor& sums,
                              const torch::Tensor& numels);

  /// The per-coordinate rule, composite reference (any device and dtype): one step of N
  /// coordinates of one tensor at step t with that tensor's decisions (scalars).
  /// param: (N)  grad: (N), finite  moments: (N, kMoments) -> new param, new moments,
  /// statistics (N, kStatistics)
  struct CoordinateStep {
    torch::Tensor param, moments, statistics;
  };
  CoordinateStep coordinate_step(const torch::Tensor& param, const torch::Tensor& grad,
                                 const torch::Tensor& moments, int64_t t, double step_size,
                                 double shrink, double gain) const;
  /// The same for inference, fused: kernels::schedule_step_ (flt/kernels/schedule_step.h) steps
  /// every tensor of a device in one call, a vectorised pass on the CPU and a few launches on
  /// CUDA, with what the pass reads at step t besides the coordinates (the corrector's weights, the
  /// moments' bias corrections) and each tensor's decisions in the pass's form.
  kernels::schedule::RuleConstants rule_constants(int64_t t) const;
  /// The part of them that changes with t (the moments' bias corrections): a run that keeps its
  /// constants sets them each step instead of reading the weights again.
  static void set_bias_corrections(kernels::schedule::RuleConstants& constants, int64_t t);
  static kernels::schedule::TensorDecision tensor_decision(double step_size, double shrink,
                                                           double gain);

  LearnedScheduleOptions options;
  torch::nn::Linear query{nullptr}, key{nullptr}, value{nullptr};  ///< attention memories
  attention::FLTAttention flt{nullptr};                            ///< FLT memory: RPE + features
  attention::FeatureMap feature_map{nullptr};                      ///< Performer memory
  torch::Tensor discount_logit;                                    ///< gamma = sigmoid(.)
  torch::nn::LSTMCell lstm{nullptr};
  torch::nn::Linear head_in{nullptr}, head_out{nullptr};            ///< per-tensor head
  torch::nn::Linear corrector_in{nullptr}, corrector_out{nullptr};  ///< per-coordinate MLP
  torch::Tensor step_log_relative, step_log_floor;  ///< log rho, log floor (scalars)
  /// The hand rule's log kappa and c0 (scalars; undefined when the hand rule is off).
  torch::Tensor growth_log_rate, growth_threshold;

 private:
  /// decide's stack of this schedule alone, kept while every parameter and buffer it read has the
  /// same storage and version counter: made anew each step, a trained head paid for stacking its
  /// weights and for its memory's RPE features of one step at a time (learned_schedule.cpp).
  struct DecideCache;
  std::shared_ptr<DecideCache> decide_cache_;
};
TORCH_MODULE(LearnedSchedule);

/// Several schedules of one shape deciding at once (the candidates of an evolution-strategies
/// generation, flt/metatrain/batched_run.h): their weights laid out once when the stack is made,
/// so that a step is one pass over every schedule's rows (the fused kernel, or the composite's
/// ~100 small tensor operations on weights stacked along a leading schedule dimension) whatever
/// the number of schedules, where one decide call per schedule would cost that each.
/// LearnedScheduleImpl::decide is a stack of one: the formulas exist once. The stack reads the
/// schedules' weights when it is made, as values (the design is meta-trained by evolution
/// strategies, which needs no gradient); when every head is zero it reads only the few numbers the
/// untrained rule uses.
class ScheduleStack {
 public:
  /// The schedules must share their shape (memory, widths, head, hand rule, bounds) and their
  /// random features (seed); checked, naming the first that differs. The FLT memory's RPE features
  /// are computed `rpe_block` steps at a time (a run asks for steps 1, 2, ... in order). The
  /// memories and heads step in the fused kernel of the first design's coordinate step
  /// (flt/kernels/coordinate_step.h: a few loops over each row's numbers, where tensor operations
  /// cost ~80 dispatches a step), except for configurations it does not cover (positive FAVOR+
  /// features, widths up to 64) or with `composite`: the same formulas as tensor operations, the
  /// fused path's reference, equal up to float rounding.
  explicit ScheduleStack(const std::vector<LearnedSchedule>& schedules, int64_t rpe_block = 256,
                         bool composite = false);
  explicit ScheduleStack(const std::vector<const LearnedScheduleImpl*>& schedules,
                         int64_t rpe_block = 1, bool composite = false);
  /// Schedules C.
  int64_t size() const;
  /// Whether the memories and heads step in the fused kernel (see the constructor).
  bool fused() const;
  /// LearnedScheduleImpl::decide for every schedule's rows: schedule c decides for histories[c].
  /// histories: (C, S, history_size()) float64 -> decisions (C, S) each, histories (C, S, ...)
  std::pair<ScheduleDecision, torch::Tensor> decide(const torch::Tensor& histories, int64_t t,
                                                    const ScheduleSignals& signals);

 private:
  struct Stacked;  // the stacked weights (learned_schedule.cpp)
  std::shared_ptr<Stacked> stacked_;
};

/// How a step memory weighs an entry Delta steps old, Delta = 0..max_distance: row 0 the learned
/// RPE f(Delta) (1 for a Performer memory), row 1 gamma^Delta f(Delta) with the learned discount
/// gamma = sigmoid(discount_logit). Both designs' modules name these members alike:
/// memory_weights(m->options.memory(), m->discount_logit, m->flt, D). Undefined (an empty tensor)
/// for the LSTM, for no memory and for the exponential averages (channel c weighs an entry
/// gamma_c^Delta). -> (2, max_distance + 1) float64
torch::Tensor memory_weights(Memory memory, const torch::Tensor& discount_logit,
                             const attention::FLTAttention& flt, int64_t max_distance);

/// Saves / loads a schedule's options and weights (flt-metatrain-es writes its best as `best.pt`);
/// load throws naming the path when it is missing or not a schedule of this library.
void save_schedule(const LearnedSchedule& schedule, const std::string& path);
LearnedSchedule load_schedule(const std::string& path);
/// The same into and out of an archive (an optimizer's state holds its schedule); `source` names
/// the archive in errors.
void write_schedule(torch::serialize::OutputArchive& archive, const LearnedScheduleImpl& schedule);
LearnedSchedule read_schedule(torch::serialize::InputArchive& archive, const std::string& source);

}  // namespace flt::optim
