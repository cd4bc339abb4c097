#pragma once
// The swarm against its baselines on held-out benchmark functions at equal function-evaluation
// budgets: the comparison behind `flt-swarm eval` and the swarm lesson.

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "flt/optim/population.h"
#include "flt/optim/swarm.h"

namespace flt::harness {

/// A held-out benchmark function.
struct BenchmarkFunction {
  std::string name;  ///< e.g. "rastrigin-10"
  optim::BatchObjective f;
  optim::SearchBox box;
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
std::unique_ptr<optim::PopulationSearch> make_searcher(const std::string& name, int64_t particles,
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
  optim::SearchResult result;
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

}  // namespace flt::harness
