#pragma once
// Meta-training of LearnedOptimizerModel (docs/design.md section 5) and the unrolled inner loop
// shared with evaluation.
//
// A population of workers each optimises a task instance with the model for `horizon` inner steps,
// cut into truncations of `unroll` steps. After each truncation the meta-gradient is estimated and
// an outer Adam step updates the model. Meta-loss of a truncation: mean over its steps of
// w(t) (log(loss_t) - log(loss at the task's start)), averaged over workers (scale-free across
// families); w = 1, or with `late_emphasis` p a weight ~(p + 1) (t / horizon)^p that puts the
// horizon's end first (the final loss is what a user keeps).
// Estimators:
//  - kTruncatedBackprop: back-propagation through the truncation's updates; the inner gradients
//    are treated as constants (first-order, as in most learned-optimizer work).
//  - kPES: antithetic persistent evolution strategies (Vicol et al. 2021): each worker pair runs
//    theta + eps and theta - eps; the perturbations accumulate over a task's truncations, which
//    removes the truncation bias; needs only loss values.
// All workers restart together after each task's horizon, so a checkpoint taken there resumes
// exactly.
// Distributed (distributed.h): the ranks share the workers (placed at each restart by their
// measured cost); every worker's meta-loss and meta-gradient is gathered and all are added in
// worker order on every rank, so the same seed and number of workers give bit-identical weights at
// any world size.

#include <torch/arg.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "flt/metatrain/distributed.h"
#include "flt/metatrain/tasks.h"
#include "flt/optim/learned_model.h"

namespace flt::metatrain {

enum class MetaEstimator { kTruncatedBackprop, kPES };
std::string meta_estimator_name(MetaEstimator estimator);
MetaEstimator meta_estimator_from_name(const std::string& name);

/// Which of the model's meta-parameters meta-training moves.
enum class MetaTrainTarget {
  kAll,         ///< every parameter
  kRule,        ///< the head and the memory; the step-size controller stays fixed
  kController,  ///< only the controller's scalars (cheap to estimate by PES over long horizons)
};
/// "all", "rule", "controller".
std::string meta_train_target_name(MetaTrainTarget target);
/// Inverse of `meta_train_target_name`; throws naming the unknown name and the valid ones.
MetaTrainTarget meta_train_target_from_name(const std::string& name);

struct MetaTrainOptions {
  TORCH_ARG(std::vector<TaskFamily>, families) = shipped_recipe_families();
  TORCH_ARG(TaskSampling, sampling) = {};
  TORCH_ARG(MetaEstimator, estimator) = MetaEstimator::kTruncatedBackprop;
  /// Outer steps.
  TORCH_ARG(int64_t, iterations) = 300;
  /// Tasks in flight (PES: antithetic pairs).
  TORCH_ARG(int64_t, workers) = 8;
  /// Inner steps per truncation.
  TORCH_ARG(int64_t, unroll) = 10;
  /// Inner steps per task before all workers restart (a multiple of unroll).
  TORCH_ARG(int64_t, horizon) = 100;
  /// > horizon: each restart draws its horizon log-uniformly from [horizon, horizon_max] (rounded
  /// to a multiple of unroll), so the rule meets runs of many lengths; 0 = always `horizon`.
  TORCH_ARG(int64_t, horizon_max) = 0;
  /// Which meta-parameters train.
  TORCH_ARG(MetaTrainTarget, target) = MetaTrainTarget::kAll;
  /// Outer Adam learning rate at the start.
  TORCH_ARG(double, meta_lr) = 3e-3;
  /// The outer learning rate follows a half cosine from meta_lr down to meta_lr * meta_lr_end over
  /// the iterations (1 = constant): the last weights then come from a settled model rather than
  /// from wherever the last noisy meta-gradients threw it.
  TORCH_ARG(double, meta_lr_end) = 0.1;
  /// PES perturbation std.
  TORCH_ARG(double, pes_sigma) = 0.01;
  /// p >= 0: step t of a task's horizon T weighs about (p + 1) (t / T)^p in the meta-loss (the
  /// density integrated over the step's share of the horizon: mean exactly 1). 0 scores the whole
  /// curve equally, which rewards early speed as much as the end; larger p scores mostly where the
  /// run ends, so a step that wins early and overfits or random-walks late loses.
  TORCH_ARG(double, late_emphasis) = 0.0;
  /// Meta-gradient norm clip.
  TORCH_ARG(double, clip) = 1.0;
  TORCH_ARG(uint64_t, seed) = 0;
  /// Path; written at every restart boundary, resumed from if present ("" = none).
  TORCH_ARG(std::string, checkpoint);
  /// Per-iteration log, appended on resume ("" = none).
  TORCH_ARG(std::string, csv);
  /// Progress bar with ETA on stderr.
  TORCH_ARG(bool, progress) = true;
  /// The ranks this process meta-trains with (distributed.h); null: this process alone. Every rank
  /// starts from rank 0's model and checkpoint; only rank 0 writes the checkpoint and the CSV and
  /// shows progress. Needs workers >= world size and the same options on every rank.
  TORCH_ARG(std::shared_ptr<Communicator>, communicator);
};

struct MetaProgress {
  int64_t iteration = 0, iterations = 0;
  double meta_loss = 0.0;  ///< this iteration's meta-loss
  double average = 0.0;    ///< running mean over the last 20 iterations
  double seconds = 0.0;    ///< since the start of this run
};

/// Meta-trains `model` in place; resumes from `options.checkpoint` when it exists. Returns the
/// per-iteration meta-losses of this run. Deterministic for a given seed.
std::vector<double> meta_train(optim::LearnedOptimizerModel model, const MetaTrainOptions& options,
                               const std::function<void(const MetaProgress&)>& on_iteration = {});

}  // namespace flt::metatrain
