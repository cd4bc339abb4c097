#pragma once
// Meta-training a learned schedule by evolution strategies over whole episodes, against tuned
// references on held-out loss (VeLO's recipe at this machine's budget: few numbers, many whole
// runs, only the sign of each antithetic difference), on the batched task engine.
//
// A generation draws episodes from the training families: each is one shape of a family with a
// few instances (batched_tasks.h), a run length log-uniform in [min_steps, max_steps] and the
// length told to the optimizer or not. Every candidate runs on the same episodes: the schedule's
// numbers theta +- sigma eps_i for `pairs` antithetic pairs, the current theta, and the hand rule
// (the untrained schedule, theta_0). An episode's instances are repeated once per candidate and
// all of them run as one batched computation (batched_run.h), each candidate's block of instances
// stepped by its own schedule. A candidate's score on an instance is reference_score(its final
// held-out loss, tuned AdamW-cosine's): log of the ratio, 0 level, negative better. The update is
// torch::optim::Adam on theta along the antithetic estimate mean_k w_k eps_k / (2 sigma), w_k the
// mean over the generation's instances of sign(score(+) - score(-)): each instance one vote.
// Every `validation_every` generations theta is scored on a fixed set of episodes from the
// validation families (none of them trained on) beside the hand rule on the same set; the best
// theta by that score is what the campaign keeps. Everything is a function of the seed and the
// generation, so a campaign stops and resumes exactly from its checkpoint.

#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "flt/metatrain/batched_run.h"
#include "flt/metatrain/batched_tasks.h"
#include "flt/metatrain/distributed.h"
#include "flt/metatrain/tuned_reference.h"
#include "flt/optim/learned_schedule.h"

namespace flt::metatrain {

/// One episode: a family's shape with its instances (K = instances), and how they are run.
struct Episode {
  std::unique_ptr<BatchedTask> task;
  EpisodeSpec spec;
};

struct EpisodeESOptions {
  /// Families the generations draw from, and the held-out families validation draws from (the two
  /// must not overlap).
  TORCH_ARG(std::vector<BatchedFamily>, train_families);
  TORCH_ARG(std::vector<BatchedFamily>, validation_families);
  /// Antithetic pairs per generation (2 x pairs perturbed candidates).
  TORCH_ARG(int64_t, pairs) = 16;
  /// Perturbation scale, on every number of theta that ES moves.
  TORCH_ARG(double, sigma) = 0.05;
  /// Hold the schedule's step numbers (step_numbers_mask) at theta_0's, the hand rule's: ES
  /// perturbs and moves only the head, the corrector and the memory, which set each tensor's step
  /// relative to the hand rule's and each coordinate's correction, never the absolute scale.
  TORCH_ARG(bool, fixed_step_numbers) = false;
  /// Adam's step on theta.
  TORCH_ARG(double, learning_rate) = 0.01;
  /// Episodes per generation, and instances per episode; every candidate runs every instance.
  TORCH_ARG(int64_t, episodes) = 4;
  TORCH_ARG(int64_t, instances) = 4;
  /// Run lengths, drawn log-uniformly.
  TORCH_ARG(int64_t, min_steps) = 100;
  TORCH_ARG(int64_t, max_steps) = 3000;
  /// The parameter-rescaling augmentation (batched_tasks.h) on every episode.
  TORCH_ARG(bool, rescale) = false;
  /// Validation every this many generations, over this many fixed episodes.
  TORCH_ARG(int64_t, validation_every) = 5;
  TORCH_ARG(int64_t, validation_episodes) = 8;
  TORCH_ARG(uint64_t, seed) = 0;
  /// Ranks that split each generation's work (distributed.h's connect; null: this process alone).
  /// Every episode's candidates are split into one block a rank (its episodes, when there are
  /// fewer candidates than ranks: validation scores one), the references' grid likewise, and
  /// the scores all-reduced: every rank takes the same step, the one a lone process takes (its
  /// scores up to the last bits: a candidate's runs beside other candidates may round differently).
  /// The ranks must start from the same state and references (rank 0's files).
  TORCH_ARG(std::shared_ptr<Communicator>, communicator) = nullptr;
};

/// One generation's record.
struct GenerationRecord {
  int64_t generation = 0;
  double theta_score = 0;      ///< mean score of theta before the update, on the batch
  double hand_rule_score = 0;  ///< mean score of the hand rule on the same batch
  double perturbed_score = 0;  ///< mean over the perturbed candidates
  double seconds = 0;
  int64_t inner_steps = 0;  ///< training steps of every instance of every candidate, validation too
  std::string tasks;        ///< the batch's episodes and lengths
  /// Validation (NaN when not validated this generation): theta's and the hand rule's mean score
  /// on the validation set.
  double validation = std::numeric_limits<double>::quiet_NaN();
  double validation_hand_rule = std::numeric_limits<double>::quiet_NaN();
};

/// The state of a campaign, all it needs to continue.
struct EpisodeESState {
  int64_t generation = 0;
  torch::Tensor theta;  ///< (P) float64: the schedule's parameters, flattened
  torch::Tensor adam_m, adam_v;
  torch::Tensor best_theta;  ///< best by validation (theta_0 until a validation beats it)
  double best_validation = std::numeric_limits<double>::infinity();
  int64_t best_generation = -1;
};

/// 1 at the schedule's own step numbers in its flattened parameters (theta): the relative step,
/// the floor, the hand rule's growth rate and threshold; 0 at the head, corrector and memory.
/// -> (P) float64
torch::Tensor step_numbers_mask(const optim::LearnedSchedule& schedule);

/// 1 at the head's weights on the memory's read (the columns of head_in past the schedule's own
/// features), the one path from the memory to the step: theta * (1 - mask) is theta with its
/// memory cut off, what the memory adds to a trained theta. All 0 without a memory. -> (P) float64
torch::Tensor memory_read_mask(const optim::LearnedSchedule& schedule);

/// The learning rates the references are tuned over: 1e-4 .. 1, half decades (the families'
/// tuned rates reach 1, docs/benchmarks.md "Which runs the families cover").
std::vector<double> episode_reference_grid();

class EpisodeES {
 public:
  /// `schedule` gives the shape and theta_0 (its current parameters, the hand rule when fresh).
  EpisodeES(optim::LearnedSchedule schedule, EpisodeESOptions options, ReferenceCache& references);

  /// Runs one generation from `state` (validation included when due) and returns its record;
  /// `progress` (optional) is told each finished episode out of the generation's total.
  GenerationRecord step(EpisodeESState& state,
                        const std::function<void(int64_t, int64_t)>& progress = nullptr);
  /// A fresh state at theta_0.
  EpisodeESState initial_state() const;
  /// The schedule with `theta` as its parameters (a copy; the template is not changed).
  optim::LearnedSchedule schedule_at(const torch::Tensor& theta) const;
  /// Numbers in theta.
  int64_t size() const { return theta0_.numel(); }

  /// The generation's episodes (a function of seed and generation).
  std::vector<Episode> batch(int64_t generation) const;
  /// Draw `draw` of the validation families: draw 0 is the campaign's fixed validation set, the
  /// one that chooses best.pt; draws 1, 2, ... are fresh sets of the same families and size that
  /// no campaign scores, for an estimate of the best theta's lead free of that choice.
  std::vector<Episode> validation_set(int64_t draw = 0) const;
  /// The reference score of each of `thetas` on every instance of `episodes`, all candidates of an
  /// episode in one batched run (`progress`: each finished episode). -> (thetas, instances) float64
  torch::Tensor instance_scores(const std::vector<torch::Tensor>& thetas,
                                const std::vector<Episode>& episodes,
                                const std::function<void()>& progress = nullptr);
  /// Their means over the instances. -> one per theta
  std::vector<double> mean_scores(const std::vector<torch::Tensor>& thetas,
                                  const std::vector<Episode>& episodes,
                                  const std::function<void()>& progress = nullptr);
  /// The final held-out losses of tuned AdamW-cosine on each instance of `episode` (from the
  /// cache, else tuned over episode_reference_grid() in one batched run). -> (K) float64
  torch::Tensor references(const Episode& episode);

 private:
  optim::LearnedSchedule template_;
  torch::Tensor theta0_;
  torch::Tensor moved_;  ///< (P) 1 where ES perturbs and moves theta, 0 where it stays theta_0's
  EpisodeESOptions options_;
  ReferenceCache& references_;
  /// The validation set and the hand rule's score on it, made at the first validation.
  std::vector<Episode> validation_;
  double validation_hand_rule_ = std::numeric_limits<double>::quiet_NaN();
  int64_t inner_steps_ = 0;  ///< training steps run by mean_scores, every instance counted
};

/// The reference cache's keys of a batched task's instances run as `spec`: the task's name, shape
/// seed, the instance's seed, rescaling, the run's length and seed, and a fingerprint of the
/// instance's data (its held-out loss at its initial point, 17 digits), so a family whose data
/// changed (char_gru reads this repository's text) is tuned again, not read from the cache.
std::vector<std::string> batched_reference_keys(const BatchedTask& task, const EpisodeSpec& spec);

/// Writes / reads a campaign's state (a small torch archive); read throws naming the path.
void save_es_state(const EpisodeESState& state, const std::string& path);
EpisodeESState load_es_state(const std::string& path);

}  // namespace flt::metatrain
