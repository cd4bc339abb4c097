#pragma once
// Meta-training of the swarm (flt::optim::Swarm) on Rastrigin-like families.
//
// Estimator: antithetic evolution strategies over whole episodes (PES with a single truncation:
// an episode is short, so there is no truncation bias to undo). The swarm's best value is a
// minimum over evaluations and not differentiable through the selection; ES needs values only.
// Each iteration draws one dimension n and `tasks` Rastrigin-like functions of it; each of `pairs`
// antithetic pairs runs theta +- sigma eps on the same tasks with the same random numbers, batched
// over the tasks. Episode loss per task: (mean over steps + final) / 2 of log(1 + best true value
// so far); the meta-gradient (the pairs' differences over their RMS) goes to torch::optim::Adam
// with a half-cosine learning rate.

#include <torch/arg.h>

#include <functional>
#include <string>
#include <vector>

#include "flt/metatrain/landscapes.h"  // RastriginTask, RastriginFamily: the tasks it trains on
#include "flt/optim/population.h"
#include "flt/optim/swarm.h"

namespace flt::metatrain {

struct SwarmMetaTrainOptions {
  TORCH_ARG(RastriginFamily, family) = {};
  TORCH_ARG(int64_t, iterations) = 300;
  /// Antithetic pairs per iteration.
  TORCH_ARG(int64_t, pairs) = 6;
  /// Tasks per iteration (batched).
  TORCH_ARG(int64_t, tasks) = 4;
  TORCH_ARG(int64_t, particles) = 16;
  /// Episode length, log-uniform.
  TORCH_ARG(int64_t, min_steps) = 25;
  TORCH_ARG(int64_t, max_steps) = 400;
  /// ES perturbation std.
  TORCH_ARG(double, sigma) = 0.03;
  /// Adam lr, half cosine to meta_lr * meta_lr_end.
  TORCH_ARG(double, meta_lr) = 0.02;
  TORCH_ARG(double, meta_lr_end) = 0.1;
  TORCH_ARG(uint64_t, seed) = 0;
  /// Written every 10 iterations and at the end; resumed from if present.
  TORCH_ARG(std::string, checkpoint);
  /// Iteration, dims, meta-loss, seconds.
  TORCH_ARG(std::string, csv);
  TORCH_ARG(bool, progress) = true;
};

/// Loss of `model` over one batched episode: B tasks of one dimension (per-task losses, (B)).
/// `seed` fixes the swarm's initial points and noise (common random numbers).
torch::Tensor swarm_episode_loss(optim::SwarmModelImpl& model,
                                 const std::vector<RastriginTask>& tasks, int64_t particles,
                                 int64_t steps, uint64_t seed);

/// Meta-trains `model` in place; returns the mean meta-loss of each iteration of this run.
std::vector<double> meta_train_swarm(optim::SwarmModel model, const SwarmMetaTrainOptions& options,
                                     const std::function<void(int64_t, double)>& on_iteration = {});

}  // namespace flt::metatrain
