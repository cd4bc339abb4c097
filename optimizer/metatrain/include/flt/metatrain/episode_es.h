#pragma once
// Meta-training a learned schedule by evolution strategies over whole episodes, against tuned
// references on held-out loss (VeLO's recipe at this machine's budget: few numbers, many whole
// runs, only the sign of each antithetic difference).
//
// A generation draws a batch of task instances from the training families (each with its own
// run length, log-uniform in [min_steps, max_steps], and its own way of being run: the length
// told to the optimizer or not, the loss reported or not), then runs every candidate on that same
// batch: the schedule's numbers theta +- sigma eps_i for `pairs` antithetic pairs, the current
// theta, and the hand rule (the untrained schedule, theta_0). A candidate's score on an instance
// is reference_score(its final held-out loss, tuned AdamW-cosine's): log of the ratio, 0 level,
// negative better. The update is torch::optim::Adam on theta along the antithetic estimate
// mean_i sign(score(+) - score(-)) eps_i / (2 sigma).
// Every `validation_every` generations theta is scored on a fixed set of instances from the
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

#include "flt/metatrain/tasks.h"
#include "flt/metatrain/tuned_reference.h"
#include "flt/optim/learned_schedule.h"

namespace flt::metatrain {

/// How one task instance of a generation is run (the same for every candidate).
struct EpisodeSpec {
  int64_t steps = 0;
  uint64_t seed = 0;          ///< the run's initial point and mini-batches (tuned_reference.h)
  bool known_length = false;  ///< ScheduleMnemosyneOptions::total_steps(steps), else unknown
  bool report_loss = false;   ///< the training loss given to report_loss every step
};

/// The final held-out loss (the validation split; the noise-free loss without one) of `task`
/// after spec.steps steps of ScheduleMnemosyne with `schedule` at lr 1, one parameter tensor per
/// task segment; the initial point and mini-batches are those of adamw_cosine_final_loss with
/// the same seed. A run whose loss turns non-finite returns +inf.
double schedule_final_loss(const Task& task, const EpisodeSpec& spec,
                           const optim::LearnedSchedule& schedule);

struct EpisodeESOptions {
  /// Families the generations draw from, and the held-out families validation draws from (the two
  /// must not overlap).
  TORCH_ARG(std::vector<TaskFamily>, train_families);
  TORCH_ARG(std::vector<TaskFamily>, validation_families);
  /// Antithetic pairs per generation (2 x pairs perturbed candidates).
  TORCH_ARG(int64_t, pairs) = 16;
  /// Perturbation scale, on every number of theta.
  TORCH_ARG(double, sigma) = 0.05;
  /// Adam's step on theta.
  TORCH_ARG(double, learning_rate) = 0.01;
  /// Task instances per generation, every candidate run on each.
  TORCH_ARG(int64_t, tasks_per_generation) = 4;
  /// Run lengths, drawn log-uniformly.
  TORCH_ARG(int64_t, min_steps) = 300;
  TORCH_ARG(int64_t, max_steps) = 3000;
  /// Validation every this many generations, over this many fixed instances.
  TORCH_ARG(int64_t, validation_every) = 5;
  TORCH_ARG(int64_t, validation_tasks) = 8;
  TORCH_ARG(uint64_t, seed) = 0;
};

/// One generation's record.
struct GenerationRecord {
  int64_t generation = 0;
  double theta_score = 0;      ///< mean score of theta before the update, on the batch
  double hand_rule_score = 0;  ///< mean score of the hand rule on the same batch
  double perturbed_score = 0;  ///< mean over the perturbed candidates
  double seconds = 0;
  std::string tasks;  ///< the batch's instances and lengths
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

  /// The generation's batch: instances and how each is run (a function of seed and generation).
  std::vector<std::pair<std::unique_ptr<Task>, EpisodeSpec>> batch(int64_t generation) const;
  /// The fixed validation set.
  std::vector<std::pair<std::unique_ptr<Task>, EpisodeSpec>> validation_set() const;
  /// Mean reference score of the schedule at `theta` over `tasks`.
  double mean_score(const torch::Tensor& theta,
                    const std::vector<std::pair<std::unique_ptr<Task>, EpisodeSpec>>& tasks);

 private:
  optim::LearnedSchedule template_;
  torch::Tensor theta0_;
  EpisodeESOptions options_;
  ReferenceCache& references_;
  /// The validation set and the hand rule's score on it, made at the first validation.
  std::vector<std::pair<std::unique_ptr<Task>, EpisodeSpec>> validation_;
  double validation_hand_rule_ = std::numeric_limits<double>::quiet_NaN();
};

/// Writes / reads a campaign's state (a small torch archive); read throws naming the path.
void save_es_state(const EpisodeESState& state, const std::string& path);
EpisodeESState load_es_state(const std::string& path);

}  // namespace flt::metatrain
