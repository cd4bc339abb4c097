#pragma once
// Meta-training of the learned optimizer's second design (learned_schedule.h) by antithetic
// persistent evolution strategies (PES, Vicol et al. 2021) over long runs cut into truncations.
//
// Each episode draws one horizon H log-uniformly in [min_horizon, max_horizon] and, per PES pair,
// a task instance (a family from `families`), optionally rescaled: every tensor of the task is
// multiplied by a factor drawn log-uniformly in [1 / rescale, rescale] (Celo's augmentation: the
// schedule must learn both large and small steps). Both particles of a pair train the same task
// with the same mini-batches, by the real optimizer (flt::optim::ScheduleMnemosyne)
// in a plain loop, one at theta + eps and one at theta - eps, where eps is redrawn every truncation
// and accumulates over the episode (PES: unbiased over the whole horizon). What the loop tells the
// optimizer varies by pair and episode as it does in use: the loss on about half of them, the run
// length on a quarter, a validation metric now and then on a quarter.
// Meta-loss of a truncation: the mean over its scored steps of w(t) (log L_t - log L_0), where L
// is the held-out loss for tasks with held-out data (so the schedule learns to avoid overfitting
// from its inputs alone) and the noise-free loss otherwise, w(t) = 2 t / H (the end of the run
// weighs most, the speed on the way still counts). A run whose loss becomes non-finite or exceeds
// 1e6 L_0 stops and scores log(1e6) for the rest of its episode.
// Meta-validation picks the weights that ship: every `validate_every` iterations (at the next
// episode boundary) the current weights train `validation_tasks` fixed task instances (their own
// seed stream, never drawn for training) for `validation_horizon` steps each in a plain loop that
// tells the optimizer nothing, as users' loops do; the score is the mean over them of
// log(final held-out loss / the untrained schedule's on the same instance), so 0 is the untrained
// rule and below 0 is better. The best-scoring weights are written to `best` (the untrained
// weights until a checkpoint beats them): PES on the training families fits noise that does not
// carry to unseen runs (the first campaign got worse on the held-out suite as it went on), and
// this is where that shows.
// Checkpoints are written at episode boundaries (every particle restarts there), so a resumed run
// continues bit for bit; the CSV log is appended.

#include <torch/arg.h>

#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "flt/metatrain/tasks.h"
#include "flt/optim/learned_schedule.h"

namespace flt::metatrain {

struct ScheduleMetaTrainOptions {
  TORCH_ARG(std::vector<TaskFamily>, families) = shipped_recipe_families();
  TORCH_ARG(TaskSampling, sampling) = {};
  /// Outer steps (truncations).
  TORCH_ARG(int64_t, iterations) = 1000;
  /// Antithetic pairs, one task each.
  TORCH_ARG(int64_t, pairs) = 8;
  /// Inner steps per truncation.
  TORCH_ARG(int64_t, unroll) = 50;
  /// Inner steps per episode, log-uniform.
  TORCH_ARG(int64_t, min_horizon) = 500;
  TORCH_ARG(int64_t, max_horizon) = 5000;
  /// Per-tensor rescaling factors in [1 / rescale, rescale]; 1 = none.
  TORCH_ARG(double, rescale) = 1e3;
  /// PES perturbation std.
  TORCH_ARG(double, sigma) = 0.01;
  /// Outer Adam lr, following a half cosine to meta_lr * meta_lr_end.
  TORCH_ARG(double, meta_lr) = 3e-3;
  TORCH_ARG(double, meta_lr_end) = 0.1;
  /// Meta-gradient norm clip.
  TORCH_ARG(double, clip) = 1.0;
  /// Inner steps between scored losses (and the last).
  TORCH_ARG(int64_t, score_every) = 5;
  TORCH_ARG(uint64_t, seed) = 0;
  /// Written at episode boundaries; resumed from when present.
  TORCH_ARG(std::string, checkpoint);
  /// Iteration, episode, horizon, meta-loss, seconds (appended).
  TORCH_ARG(std::string, csv);
  /// Iterations between meta-validations; 0 = none.
  TORCH_ARG(int64_t, validate_every) = 0;
  /// Families of the meta-validation instances.
  TORCH_ARG(std::vector<TaskFamily>, validation_families) = {
      TaskFamily::kFashionLogistic, TaskFamily::kFashionMLP, TaskFamily::kMLPClassification};
  /// Instances, cycling through validation_families.
  TORCH_ARG(int64_t, validation_tasks) = 6;
  /// Steps each.
  TORCH_ARG(int64_t, validation_horizon) = 2000;
  /// Weights file of the best meta-validation score so far.
  TORCH_ARG(std::string, best);
  /// Iteration, score, worst log ratio, best score (appended).
  TORCH_ARG(std::string, validation_csv);
};

/// One meta-validation: the per-instance log(final held-out loss) of `schedule` on the options'
/// validation instances (log(1e6 x initial) when a run diverges). -> (validation_tasks) float64
torch::Tensor validation_log_losses(const optim::LearnedSchedule& schedule,
                                    const ScheduleMetaTrainOptions& options);

struct ScheduleMetaProgress {
  int64_t iteration = 0, iterations = 0, episode = 0, horizon = 0;
  double meta_loss = 0.0, seconds = 0.0;
  /// The meta-validation score of this iteration's weights when one ran, and the best so far
  /// (NaN otherwise).
  double validation = std::numeric_limits<double>::quiet_NaN();
  double best_validation = std::numeric_limits<double>::quiet_NaN();
};

/// Meta-trains `schedule` in place (resuming from `options.checkpoint` when it exists); returns the
/// meta-loss of each iteration of this run. Deterministic for a given seed.
std::vector<double> meta_train_schedule(
    optim::LearnedSchedule schedule, const ScheduleMetaTrainOptions& options,
    const std::function<void(const ScheduleMetaProgress&)>& on_iteration = {});

}  // namespace flt::metatrain
