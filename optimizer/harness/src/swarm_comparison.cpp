#include "flt/harness/swarm_comparison.h"

#include <ATen/CPUGeneratorImpl.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "flt/detail/statistics.h"
#include "flt/metatrain/landscapes.h"
#include "flt/metatrain/swarm_meta_train.h"
#include "flt/optim/swarm_baselines.h"

namespace flt::harness {

using namespace flt::optim;
using namespace flt::metatrain;

// ---- held-out benchmark -------------------------------------------------------------------------

namespace {
// Fixed points of [-2.5, 2.5]^n drawn from their own seed (held-out functions only). -> (count, n)
torch::Tensor fixed_points(int64_t count, int64_t n, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return (at::rand({count, n}, gen, torch::kDouble) * 2.0 - 1.0) * 2.5;
}

// Rastrigin with its minimum moved off the box's centre, which a searcher that recombines uniform
// points would otherwise find for free.
BatchObjective shifted_rastrigin(int64_t n) {
  const auto shift = fixed_points(1, n, 20261125 + n)[0];
  return [shift](const torch::Tensor& x) { return rastrigin(x - shift.to(x.dtype())); };
}

// Two Rastrigin funnels, the second one's floor 2 higher: a searcher that averages across the
// funnels lands between them.
BatchObjective two_funnel_rastrigin(int64_t n) {
  const auto points = fixed_points(2, n, 7100 + n);
  const auto first = points[0], second = points[1];
  return [first, second](const torch::Tensor& x) {
    return torch::minimum(rastrigin(x - first.to(x.dtype())),
                          rastrigin(x - second.to(x.dtype())) + 2.0);
  };
}
}  // namespace

std::vector<BenchmarkFunction> swarm_benchmark_functions() {
  // Success targets: a value a searcher reaches only in the global basin or next to it.
  return {
      {"rastrigin-2", rastrigin, SearchBox::cube(2, -5.12, 5.12), 0.5},
      {"rastrigin-10", rastrigin, SearchBox::cube(10, -5.12, 5.12), 10.0},
      {"rastrigin-30", rastrigin, SearchBox::cube(30, -5.12, 5.12), 60.0},
      {"rastrigin-10-shifted", shifted_rastrigin(10), SearchBox::cube(10, -5.12, 5.12), 10.0},
      {"rastrigin-30-shifted", shifted_rastrigin(30), SearchBox::cube(30, -5.12, 5.12), 60.0},
      {"rastrigin-10-two-funnels", two_funnel_rastrigin(10), SearchBox::cube(10, -5.12, 5.12),
       10.0},
      {"ackley-10", ackley, SearchBox::cube(10, -32.768, 32.768), 1.0},
      {"schwefel-10", schwefel, SearchBox::cube(10, -500, 500), 500.0},
      {"griewank-10", griewank, SearchBox::cube(10, -600, 600), 0.1},
  };
}

std::vector<std::string> all_searcher_names() {
  return {"swarm-flt", "swarm-performer", "swarm-independent", "swarm-lstm",
          "pso",       "cma-es",          "adam-restarts",     "random"};
}

std::unique_ptr<PopulationSearch> make_searcher(const std::string& name, int64_t particles,
                                                uint64_t seed, double adam_lr,
                                                const std::string& weights_dir) {
  if (name.rfind("swarm-", 0) == 0) {
    const auto variant = swarm_variant_from_name(name.substr(6));
    auto options = SwarmOptions().variant(variant).particles(particles).seed(seed);
    const auto path = weights_dir + "/swarm_" + swarm_variant_name(variant) + ".pt";
    TORCH_CHECK(weights_dir.empty() || weights_dir == kUntrainedSwarm ||
                    std::filesystem::is_directory(weights_dir),
                "swarm weights: ", weights_dir, " is not a directory (expected one holding ",
                "swarm_<variant>.pt files, or \"", kUntrainedSwarm, "\")");
    if (weights_dir == kUntrainedSwarm)
      return std::make_unique<Swarm>(options, SwarmModel(SwarmModelOptions().variant(variant)));
    if (!weights_dir.empty() && std::ifstream(path).good()) options.weights(path);
    return std::make_unique<Swarm>(options);
  }
  if (name == "pso") return std::make_unique<ParticleSwarm>(particles, seed);
  if (name == "cma-es") return std::make_unique<CmaEs>(0, seed);
  if (name == "adam-restarts") return std::make_unique<AdamRestarts>(particles, adam_lr, 50, seed);
  if (name == "random") return std::make_unique<RandomSearch>(particles, seed);
  TORCH_CHECK(false, "unknown searcher \"", name,
              "\" (expected swarm-flt, swarm-performer, swarm-independent, swarm-lstm, pso, "
              "cma-es, adam-restarts or random)");
}

double tune_adam_lr(const std::vector<double>& grid, int64_t seeds, int64_t budget_per_dim,
                    int64_t particles) {
  TORCH_CHECK(!grid.empty() && seeds >= 1, "tune_adam_lr: need a grid and seeds >= 1");
  constexpr int64_t kDims = 10;
  double best_lr = grid[0], best_median = INFINITY;
  for (double lr : grid) {
    std::vector<double> bests;
    for (int64_t s = 0; s < seeds; ++s) {
      auto gen = at::make_generator<at::CPUGeneratorImpl>(4242 + s);  // tuning tasks, not held out
      RastriginFamily family;
      family.noise_probability = 0.0;
      family.two_funnel_probability = 0.0;
      const auto task = sample_rastrigin_task(family, kDims, gen);
      AdamRestarts adam(particles, lr, 50, static_cast<uint64_t>(s + 1));
      bests.push_back(run_search(
                          adam, [&](const torch::Tensor& x) { return task.clean(x); },
                          SearchBox::cube(kDims, -kRastriginBound, kRastriginBound),
                          budget_per_dim * kDims)
                          .best_value);
    }
    const double median = flt::detail::median(bests);
    if (median < best_median) {
      best_median = median;
      best_lr = lr;
    }
  }
  return best_lr;
}

std::vector<ComparisonRun> compare_searchers(const ComparisonOptions& options) {
  TORCH_CHECK(options.seeds >= 1 && options.budget_per_dim >= 1 && options.particles >= 2,
              "compare_searchers: need seeds >= 1, budget_per_dim >= 1, particles >= 2; got ",
              options.seeds, ", ", options.budget_per_dim, ", ", options.particles);
  std::vector<BenchmarkFunction> functions;
  for (const auto& f : swarm_benchmark_functions()) {
    if (options.functions.empty() || std::find(options.functions.begin(), options.functions.end(),
                                               f.name) != options.functions.end())
      functions.push_back(f);
  }
  TORCH_CHECK(!functions.empty() || options.functions.empty(),
              "compare_searchers: no function "
              "matches the names given (first: \"",
              options.functions[0], "\")");
  const auto searchers = options.searchers.empty() ? all_searcher_names() : options.searchers;
  std::vector<ComparisonRun> runs;
  const double total =
      static_cast<double>(functions.size() * searchers.size()) * static_cast<double>(options.seeds);
  for (const auto& f : functions) {
    for (const auto& name : searchers) {
      for (int64_t s = 1; s <= options.seeds; ++s) {
        auto searcher = make_searcher(name, options.particles, static_cast<uint64_t>(s),
                                      options.adam_lr, options.weights_dir);
        ComparisonRun run{f.name, name, static_cast<uint64_t>(s),
                          run_search(*searcher, f.f, f.box, options.budget_per_dim * f.box.dims())};
        run.success = run.result.best_value < f.target;
        runs.push_back(std::move(run));
        if (options.progress) {
          options.progress(static_cast<double>(runs.size()) / total, f.name + " " + name);
        }
      }
    }
  }
  return runs;
}

std::pair<std::vector<double>, std::vector<double>> median_best_curve(
    const std::vector<ComparisonRun>& runs, const std::string& function,
    const std::string& searcher, int64_t budget, int points) {
  std::vector<double> xs, ys;
  for (int i = 1; i <= points; ++i) {
    const auto at = static_cast<int64_t>(static_cast<double>(budget) * i / points);
    std::vector<double> values;
    for (const auto& r : runs) {
      if (r.function != function || r.searcher != searcher) continue;
      const auto& e = r.result.evaluation_history;
      const auto it = std::upper_bound(e.begin(), e.end(), at);
      if (it == e.begin()) continue;
      values.push_back(r.result.best_history[static_cast<size_t>(it - e.begin() - 1)]);
    }
    if (values.empty()) continue;
    xs.push_back(static_cast<double>(at));
    ys.push_back(flt::detail::median(values));
  }
  return {xs, ys};
}

ComparisonCell summarize(const std::vector<ComparisonRun>& runs, const std::string& function,
                         const std::string& searcher) {
  std::vector<double> bests;
  int64_t successes = 0;
  for (const auto& r : runs) {
    if (r.function != function || r.searcher != searcher) continue;
    bests.push_back(r.result.best_value);
    successes += r.success ? 1 : 0;
  }
  ComparisonCell cell;
  cell.runs = static_cast<int64_t>(bests.size());
  if (bests.empty()) return cell;
  cell.median = flt::detail::median(bests);
  cell.success_rate = static_cast<double>(successes) / static_cast<double>(bests.size());
  return cell;
}

}  // namespace flt::harness
