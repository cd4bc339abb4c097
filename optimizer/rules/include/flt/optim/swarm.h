#pragma once
// Swarm: a population-based learned optimizer whose particles attend to each other through FLT
// attention (FLT paper Sec. 5.4, Fig. 3 right; docs/design.md section 5).
//
// P particles live in the search box, in unit coordinates u = (x - lower) / (upper - lower) - 1/2.
// Every step each particle reads its own features (rank and z-score of its value and of its best,
// whether it improved, its step size relative to the swarm, the fraction of the budget spent, and,
// per coordinate, its way back to its own best, its last step, and the gradient when given) and
// attends to all particles:
//   q_i = W_q s_i, k_j = W_k s_j (s: the particle's scalar features), v_j = [u_j, best_j],
//   positions r_i = u_i / R (R: the swarm's RMS radius, the particles' RMS distance from its
//   centre, so one f means the same in any dimension), RPE mask f(r_i - r_j) learned through its
//   spectrum.
// The read-out o_i (a learned, value- and distance-weighted centroid of positions and of bests)
// enters the per-coordinate head as (o_i - u_i) / sigma_i. The step's base is an evolution
// strategy's recombination plus PSO's terms, every coefficient learned:
//   base_i = w m_i + c1 r1 (best_i - u_i) + c2 (o_pos_i - u_i) + c3 r3 (o_best_i - u_i),
// r uniform per coordinate; the head adds a drift a and noise of scale exp(b) in units sigma_i:
//   u_i <- clip(u_i + base_i + sigma_i (a_i + exp(b_i) z_i)),  z_i ~ N(0, I).
// sigma_i is a learned schedule over the budget (log-linear in progress^p, from sigma_start to
// sigma_end box widths) times the particle's own learned factor (a 1/5-success rule plus a learned
// term). Untrained, c2 = 1 and the rest 0, keys favour the best-ranked values, sigma goes from 0.2
// to 1e-5 box widths along progress^1.5: a (mu/mu_w, P) evolution strategy whose annealed step
// first sees the smoothed landscape's global shape and at the end resolves the basin it chose.
// With the RPE the recombination is local (or repulsive) as learned; Performer's is global.
//
// The RPE is isotropic so that one set of meta-weights serves every dimension n: head h's f is a
// Gaussian bump f_h(d) = c_h exp(-2 pi^2 s_h^2 |d|^2) of learned height c_h (any sign) and spectral
// width s_h, i.e. the library's Gaussian-mixture spectrum with one component at mean 0,
// g_h(xi) = c_h (2 pi s_h^2)^{-n/2} exp(-|xi|^2 / (2 s_h^2)), which the swarm writes into the
// RpeSpectrum of an FLTAttention with position_dim n. Each head draws its frequencies from a
// Gaussian of its own width, so a_t = g / p is constant: one proposal shared by bumps of width
// ratio rho would give a_t a variance growing like (rho^4 / (2 rho^2 - 1))^{n/2}, hopeless in 30-D.
//
// Variants (same API, same head): kFLT (default), kPerformer (the same attention without RPE),
// kIndependent (no attention: each particle recombines only its own best, a (1+1) strategy per
// particle), kLSTM (the same, and an LSTM cell per particle over its scalar features feeds the
// head). No variant needs gradients: with
// `SwarmOptions::use_gradients` they are an extra input (computed by autograd in run_search).

#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/rnn.h>

#include <map>
#include <string>
#include <vector>

#include "flt/attention/flt.h"
#include "flt/attention/performer.h"
#include "flt/optim/population.h"

namespace flt::optim {

enum class SwarmVariant { kFLT, kPerformer, kIndependent, kLSTM };
std::string swarm_variant_name(
    SwarmVariant variant);  ///< "flt", "performer", "independent", "lstm"
SwarmVariant swarm_variant_from_name(const std::string& name);
std::vector<SwarmVariant> all_swarm_variants();

/// Sizes of the model: fixed by the meta-weights (a weights file records them).
struct SwarmModelOptions {
  TORCH_ARG(SwarmVariant, variant) = SwarmVariant::kFLT;
  /// Attention heads H and head dim D.
  TORCH_ARG(int64_t, heads) = 2;
  TORCH_ARG(int64_t, head_dim) = 8;
  /// Attention random features m and RPE random features r.
  TORCH_ARG(int64_t, features) = 32;
  TORCH_ARG(int64_t, rpe_features) = 32;
  /// Hidden width of the per-coordinate head (and of the LSTM).
  TORCH_ARG(int64_t, hidden) = 16;
  /// Seed of the random features (the draws are part of the meta-weights).
  TORCH_ARG(uint64_t, seed) = 0;
};

/// Scalar features per particle, and per-coordinate features (without the attention read-out).
constexpr int64_t kSwarmScalarFeatures = 7;
constexpr int64_t kSwarmCoordinateFeatures = 4;
/// Random draws per particle and coordinate and step: the Gaussian step noise and three uniform
/// factors of the attractions (as normal draws through the normal CDF).
constexpr int64_t kSwarmNoiseChannels = 4;

/// The swarm's state between steps, for B independent swarms of P particles in n dimensions (unit
/// coordinates). Double precision.
struct SwarmState {
  torch::Tensor u;            ///< positions (B, P, n)
  torch::Tensor values;       ///< f at u, non-finite replaced (B, P)
  torch::Tensor best_u;       ///< each particle's best position (B, P, n)
  torch::Tensor best_values;  ///< (B, P)
  torch::Tensor improved;     ///< 1 where the last values beat the particle's best (B, P)
  torch::Tensor last_step;    ///< (B, P, n)
  torch::Tensor log_sigma;    ///< log of each particle's factor on the scheduled step size (B, P)
  torch::Tensor gradients;    ///< d f / d u (B, P, n) or undefined
  torch::Tensor lstm_h, lstm_c;  ///< (B * P, hidden), LSTM variant only
  double progress = 0.0;         ///< fraction of the budget spent
};

/// B swarms of P particles at uniform points of the unit box, every step-size factor
/// `initial_sigma`.
/// `lstm_hidden` > 0 sizes the LSTM state.
SwarmState initial_swarm_state(int64_t batch, int64_t particles, int64_t dims, double initial_sigma,
                               int64_t lstm_hidden, at::Generator& generator);
/// Takes in the values (B, P) at the state's positions (NaN / inf allowed): the particles' bests,
/// whether they improved, values for the features (non-finite ones rank last), the progress.
void observe_values(SwarmState& state, const torch::Tensor& values, double progress);

/// The meta-learned part: features -> attention -> head -> new positions.
class SwarmModelImpl : public torch::nn::Cloneable<SwarmModelImpl> {
 public:
  explicit SwarmModelImpl(SwarmModelOptions options = {});
  void reset() override;
  void pretty_print(std::ostream& stream) const override;

  /// One step: reads `state` (after its values were told) and writes the new positions, step sizes
  /// and last steps into it. noise: (B, P, n, kSwarmNoiseChannels) standard normal draws.
  void step(SwarmState& state, const torch::Tensor& noise);

  /// Scalar features. state -> (B, P, kSwarmScalarFeatures)
  torch::Tensor scalar_features(const SwarmState& state) const;
  /// The attention centroids [of positions, of bests] per head. -> (B, H, P, 2n); kIndependent
  /// and kLSTM: the particle's own [u, best].
  torch::Tensor attention_centroids(const SwarmState& state, const torch::Tensor& scalars);
  /// The head's view of the centroids, (o - u) / sigma soft-clipped. -> (B, P, n, 2H)
  torch::Tensor attention_readout(const SwarmState& state, const torch::Tensor& scalars);
  /// The attention weights among particles (B, H, P, P) (FLT and Performer; others: identity).
  torch::Tensor attention_weights(const SwarmState& state);
  /// Step unit per particle in unit-box coordinates: the learned schedule over the budget times
  /// the particle's learned scale. -> (B, P)
  torch::Tensor step_unit(const SwarmState& state) const;
  /// The learned RPE f at distances (in units of the swarm's RMS radius) per head.
  /// distance: (N) -> (H, N). kFLT only.
  torch::Tensor rpe_profile(const torch::Tensor& distance) const;

  /// What the weights learned, for people: the step's base coefficients, the step-size schedule
  /// and the RPE per head, one item per line.
  std::string describe() const;

  /// The meta-parameters as one flat vector and back (for evolution strategies). -> (count)
  torch::Tensor flat_parameters() const;
  void set_flat_parameters(const torch::Tensor& flat);

  void save(const std::string& path) const;
  /// Reads a file written by save; the sizes come from the file.
  static std::shared_ptr<SwarmModelImpl> load_file(const std::string& path);

  SwarmModelOptions options;
  torch::nn::Linear query{nullptr}, key{nullptr};                  ///< scalar features -> H D
  torch::Tensor rpe_heights;                                       ///< h_t: (H, T)
  torch::Tensor rpe_log_widths;                                    ///< log s_t: (H, T)
  torch::nn::Linear hidden_layer{nullptr}, output_layer{nullptr};  ///< per-coordinate head
  torch::Tensor prior;  ///< hand-set base of the step and schedule, learned: (10) (swarm.cpp)
  torch::nn::Linear sigma_layer{nullptr};  ///< pooled head -> change of log sigma
  torch::nn::LSTMCell lstm{nullptr};       ///< kLSTM only

 private:
  /// The FLT (kFLT) or Performer (kPerformer) module for dimension n, its spectrum set from
  /// (rpe_heights, rpe_log_widths).
  attention::Attention& attention_for(int64_t n);
  torch::Tensor rpe_positions(const SwarmState& state) const;
  std::map<int64_t, attention::FLTAttention> flt_by_dim_;
  attention::PerformerAttention performer_{nullptr};
};
TORCH_MODULE(SwarmModel);

/// The shipped meta-weights of a variant (optimizer/pretrained/swarm_<variant>.pt). Throws if the
/// build has none for it.
SwarmModel load_pretrained_swarm(SwarmVariant variant);
/// Whether the build ships weights for `variant`.
bool has_pretrained_swarm(SwarmVariant variant);

/// Evaluations per dimension an ask/tell swarm plans for when given no budget (the held-out
/// comparison's budget).
constexpr int64_t kSwarmDefaultBudgetPerDim = 200;

struct SwarmOptions {
  /// Particles P (>= 2).
  TORCH_ARG(int64_t, particles) = 16;
  TORCH_ARG(SwarmVariant, variant) = SwarmVariant::kFLT;
  /// Initial factor on the learned step-size schedule, > 0 (1: the schedule as meta-trained).
  TORCH_ARG(double, initial_sigma) = 1.0;
  /// Feed gradients to the head (the searcher then needs them).
  TORCH_ARG(bool, use_gradients) = false;
  /// The evaluation budget an ask/tell caller plans: the step size anneals over it (and the
  /// progress feature counts it); minimize and run_search set it from their budget. 0: plan for
  /// kSwarmDefaultBudgetPerDim x n evaluations. Past the budget the step stays at its final size.
  TORCH_ARG(int64_t, budget) = 0;
  TORCH_ARG(uint64_t, seed) = 0;
  /// Meta-weights file; empty: the pretrained weights of `variant` (untrained if none ship).
  TORCH_ARG(std::string, weights) = "";
};

class Swarm : public PopulationSearch {
 public:
  explicit Swarm(SwarmOptions options = {});
  /// The same swarm with given meta-weights (meta-training, tests).
  Swarm(SwarmOptions options, SwarmModel model);

  /// minimize(f, box or x0, budget): see run_search. With x0 (n), the box is x0 +- 5.
  SearchResult minimize(const BatchObjective& f, const SearchBox& box, int64_t budget);
  SearchResult minimize(const BatchObjective& f, const torch::Tensor& x0, int64_t budget);

  void reset(const SearchBox& box) override;
  torch::Tensor ask() override;
  void tell(const torch::Tensor& values, const torch::Tensor& gradients = {}) override;
  bool needs_gradients() const override { return options_.use_gradients(); }
  std::string name() const override { return "swarm-" + swarm_variant_name(options_.variant()); }

  /// Sets the budget the step-size schedule runs over (run_search calls it; it overrides
  /// SwarmOptions::budget from the next reset on).
  void set_budget(int64_t budget) override { budget_ = budget; }
  const SwarmOptions& options() const { return options_; }
  SwarmModel model() const { return model_; }
  /// The current state (unit coordinates) and the box, for drawing.
  const SwarmState& state() const { return state_; }
  const SearchBox& box() const { return box_; }
  /// Attention among the particles at the current state. -> (H, P, P)
  torch::Tensor attention_weights();

 private:
  SwarmOptions options_;
  SwarmModel model_;
  SearchBox box_;
  SwarmState state_;
  at::Generator generator_;
  int64_t budget_ = -1, planned_budget_ = 1, evaluations_ = 0;
  bool started_ = false;  ///< the first tell has happened
};

}  // namespace flt::optim
