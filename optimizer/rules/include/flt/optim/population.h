#pragma once
// Population (derivative-free or first-order) search on a box: the interface shared by the learned
// swarm (swarm.h) and its baselines (swarm_baselines.h), in the ask / tell style of evolution-
// strategy libraries, and the one loop that runs any of them against an objective at a fixed
// function-evaluation budget.
//
// Objectives evaluate a batch of points: x: (P, n) -> (P). A value may be NaN or +-inf for some
// points (outside a function's domain, say); searchers treat such a point as the worst of its batch
// and keep going. Points are double precision.

#include <torch/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace flt::optim {

/// x: (P, n) -> (P)
using BatchObjective = std::function<torch::Tensor(const torch::Tensor&)>;

/// The search region [lower, upper] (each (n), lower < upper). Every searcher keeps its points in
/// it.
struct SearchBox {
  torch::Tensor lower, upper;
  /// [lower, upper]^n.
  static SearchBox cube(int64_t n, double lower, double upper);
  /// x0 +- radius in every coordinate (x0: (n)).
  static SearchBox around(const torch::Tensor& x0, double radius);
  int64_t dims() const { return lower.size(0); }
  /// Throws naming `fn` and the bad value unless lower, upper are finite 1-d with lower < upper.
  void check(const char* fn) const;
};

struct SearchResult {
  torch::Tensor best_x;                     ///< (n)
  double best_value = 0.0;                  ///< f(best_x); +inf if no finite value was ever seen
  int64_t evaluations = 0;                  ///< function evaluations spent
  std::vector<double> best_history;         ///< best value so far after each tell
  std::vector<int64_t> evaluation_history;  ///< evaluations spent after each tell
};

/// A population searcher: ask for points, evaluate them, tell the values.
class PopulationSearch {
 public:
  virtual ~PopulationSearch() = default;
  /// Starts a new search in `box` (drawing the first points from the searcher's seed).
  virtual void reset(const SearchBox& box) = 0;
  /// The next points to evaluate. -> (P, n); P may differ between calls only if a searcher says so.
  virtual torch::Tensor ask() = 0;
  /// Values (P) of the points of the last ask; gradients (P, n) when `needs_gradients()`.
  virtual void tell(const torch::Tensor& values, const torch::Tensor& gradients = {}) = 0;
  /// The evaluation budget of the coming search (run_search calls it before reset); searchers that
  /// plan by it (the swarm's progress feature) keep it.
  virtual void set_budget(int64_t /*budget*/) {}
  /// Whether tell needs the gradients of the objective (only Adam restarts do).
  virtual bool needs_gradients() const { return false; }
  virtual std::string name() const = 0;
  /// Best point and value so far. -> (n)
  torch::Tensor best_x() const { return best_x_; }
  double best_value() const { return best_value_; }
  /// Values with NaN and +-inf replaced by a value above the largest finite one of the batch (so
  /// they rank last); all non-finite -> a plain large constant. values: (P) -> (P)
  static torch::Tensor finite_or_worst(const torch::Tensor& values);

 protected:
  /// Updates the best-so-far from a told batch (non-finite values skipped). x: (P, n)  values: (P)
  void record(const torch::Tensor& x, const torch::Tensor& values);
  /// Checks a tell: values (P) of the right size; gradients (P, n) when given.
  void check_tell(const torch::Tensor& values, const torch::Tensor& gradients, int64_t points,
                  int64_t dims) const;
  torch::Tensor best_x_;
  double best_value_ = 0.0;
};

/// Runs `search` on `f` inside `box` until `budget` evaluations are spent (the last batch is
/// trimmed to the budget). Gradients come from autograd through f when the searcher needs them.
/// Throws if f returns the wrong shape, or a non-finite value for every point of the first batch.
SearchResult run_search(PopulationSearch& search, const BatchObjective& f, const SearchBox& box,
                        int64_t budget);

}  // namespace flt::optim
