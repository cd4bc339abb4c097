#pragma once
// Meta-training of the swarm (flt::optim::Swarm) on Rastrigin-like families.
//
// Estimator: antithetic evolution strategies over whole episodes (PES with a single truncation:
// an episode is short, so there is no truncation bias to undo). The swarm's best value is a
// minimum over evaluations and not differentiable through the selection; ES needs values only.
// Each iteration draws one dimension n and `tasks` Rastrigin-like functions of it; each of `pairs`
// antithetic pairs runs theta +- sigma eps on the same tasks with the same random numbers, batched
// over the tasks. Episode loss per task: (mean over steps + final) / 2 of log(1 + best true value
// so far); the meta-gradient goes to Adam with a half-cosine learning rate.

#include <functional>
#include <string>
#include <vector>

#include "flt/optim/population.h"
#include "flt/optim/swarm.h"

namespace flt::optim {

/// f(x) = rastrigin(scale R (x - shift)) + noise N(0, 1) on [-5.12, 5.12]^n (the noise is drawn
/// per evaluation; `clean` leaves it out). Minimum 0 at `shift`. With a second funnel,
/// f = min(that, rastrigin(scale R (x - second_shift)) + second_offset): two bowls of local minima,
/// the second one's floor `second_offset` >= 0 higher, so a swarm that averages across them lands
/// between the two.
struct RastriginTask {
  torch::Tensor shift;     ///< (n)
  torch::Tensor rotation;  ///< (n, n) orthogonal (identity when not rotated)
  double scale = 1.0, noise = 0.0;
  torch::Tensor second_shift;  ///< (n), or undefined: one funnel
  double second_offset = 0.0;
  /// x: (..., n) -> (...), without noise.
  torch::Tensor clean(const torch::Tensor& x) const;
};

struct RastriginFamily {
  int64_t min_dims = 2, max_dims = 30;  ///< n log-uniform in [min, max]
  double max_shift = 2.5;               ///< shift ~ U(-max_shift, max_shift)^n
  double rotate_probability = 0.5;
  double min_scale = 0.6, max_scale = 1.5;          ///< log-uniform
  double noise_probability = 0.3, max_noise = 2.0;  ///< noise std ~ U(0, max) with that probability
  /// Probability of a second funnel (shift drawn as the first, offset ~ U(0, n)).
  double two_funnel_probability = 0.5;
};
/// Draws a task of dimension n.
RastriginTask sample_rastrigin_task(const RastriginFamily& family, int64_t n, at::Generator& gen);

struct SwarmMetaTrainOptions {
  RastriginFamily family = {};
  int64_t iterations = 300;
  int64_t pairs = 6;  ///< antithetic pairs per iteration
  int64_t tasks = 4;  ///< tasks per iteration (batched)
  int64_t particles = 16;
  int64_t min_steps = 25, max_steps = 400;   ///< episode length, log-uniform
  double sigma = 0.03;                       ///< ES perturbation std
  double meta_lr = 0.02, meta_lr_end = 0.1;  ///< Adam lr, half cosine to meta_lr * meta_lr_end
  uint64_t seed = 0;
  std::string checkpoint;  ///< written every 10 iterations and at the end; resumed from if present
  std::string csv;         ///< iteration, dims, meta-loss, seconds
  bool progress = true;
};

/// Loss of `model` over one batched episode: B tasks of one dimension (per-task losses, (B)).
/// `seed` fixes the swarm's initial points and noise (common random numbers).
torch::Tensor swarm_episode_loss(SwarmModelImpl& model, const std::vector<RastriginTask>& tasks,
                                 int64_t particles, int64_t steps, uint64_t seed);

/// Meta-trains `model` in place; returns the mean meta-loss of each iteration of this run.
std::vector<double> meta_train_swarm(SwarmModel model, const SwarmMetaTrainOptions& options,
                                     const std::function<void(int64_t, double)>& on_iteration = {});

}  // namespace flt::optim
