#pragma once
// Meta-training of the swarm on Rastrigin-like families, and the held-out comparison with the
// baselines at equal function-evaluation budgets.
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

/// A held-out benchmark function.
struct BenchmarkFunction {
  std::string name;  ///< e.g. "rastrigin-10"
  BatchObjective f;
  SearchBox box;
  double target = 0.0;  ///< "success": best value below it
};
/// Rastrigin 2/10/30-D (and 10/30-D shifted away from the box centre), Ackley, Schwefel and
/// Griewank 10-D on their usual domains (docs/design.md section 5).
std::vector<BenchmarkFunction> swarm_benchmark_functions();

/// A searcher by name: "swarm-flt", "swarm-performer", "swarm-independent", "swarm-lstm", "pso",
/// "cma-es", "adam-restarts", "random". P particles (CMA-ES: its default lambda), seed, Adam's lr;
/// swarm weights from `weights_dir`/swarm_<variant>.pt when that exists, else the shipped ones;
/// `weights_dir` == kUntrainedSwarm gives the untrained swarm (the hand-set base rule that
/// meta-training starts from).
inline constexpr const char* kUntrainedSwarm = "untrained";
std::unique_ptr<PopulationSearch> make_searcher(const std::string& name, int64_t particles,
                                                uint64_t seed, double adam_lr,
                                                const std::string& weights_dir = "");
std::vector<std::string> all_searcher_names();

/// Adam's learning rate (box widths per step) for the comparison, tuned on the training family (not
/// on the held-out functions): the grid value with the lowest median best over `seeds` shifted,
/// rotated 10-D Rastrigin tasks at `budget_per_dim` * 10 evaluations.
double tune_adam_lr(const std::vector<double>& grid, int64_t seeds, int64_t budget_per_dim,
                    int64_t particles);

struct ComparisonOptions {
  std::vector<std::string> functions;  ///< names from swarm_benchmark_functions(); empty: all
  std::vector<std::string> searchers;  ///< names from all_searcher_names(); empty: all
  int64_t seeds = 10;
  int64_t budget_per_dim = 200;  ///< evaluations per dimension of the function
  int64_t particles = 16;
  double adam_lr = 0.01;
  std::string weights_dir;  ///< swarm weights (see make_searcher); empty: the shipped ones
  /// Called after each run with the fraction done and what ran.
  std::function<void(double, const std::string&)> progress = {};
};

struct ComparisonRun {
  std::string function, searcher;
  uint64_t seed = 0;
  SearchResult result;
  bool success = false;  ///< best below the function's target
};
/// Every searcher on every function for seeds 1..seeds at equal budgets.
std::vector<ComparisonRun> compare_searchers(const ComparisonOptions& options);

/// Median best value and success rate of one (function, searcher) cell.
struct ComparisonCell {
  double median = 0.0, success_rate = 0.0;
  int64_t runs = 0;
};
/// Median over the runs of a cell of the best value so far at `points` evenly spaced evaluation
/// counts up to `budget`. -> (evaluations, median best)
std::pair<std::vector<double>, std::vector<double>> median_best_curve(
    const std::vector<ComparisonRun>& runs, const std::string& function,
    const std::string& searcher, int64_t budget, int points);
ComparisonCell summarize(const std::vector<ComparisonRun>& runs, const std::string& function,
                         const std::string& searcher);

}  // namespace flt::optim
