// Lesson 7, FLT paper Fig. 3 (right), Sec. 5.4: population ("swarm") learned optimizers on
// Rastrigin-like functions. The paper compares an FLT swarm (members attending to each other with
// an RPE over their positions) with Performer and LSTM learned optimizers and Adam, and reports
// "drastic improvements" for FLT (no numbers; the figure comes from a private conversation). Here:
// the shipped swarm weights (flt-swarm train) against Adam with random restarts, PSO and CMA-ES on
// the standard Rastrigin function (held out: training used shifted, rotated, scaled, noisy ones),
// at equal function-evaluation budgets.

#include <torch/types.h>

#include <algorithm>
#include <cmath>

#include "flt/harness/swarm_comparison.h"
#include "lessons/common.h"

namespace flt::demos {

void run_swarm(const LessonSettings& settings, LessonResult& result) {
  namespace fh = flt::harness;
  torch::NoGradGuard no_grad;
  const bool quick = settings.quick;
  fh::ComparisonOptions options;
  options.functions =
      quick ? std::vector<std::string>{"rastrigin-10"}
            : std::vector<std::string>{"rastrigin-10", "rastrigin-30", "rastrigin-30-shifted"};
  options.searchers =
      quick
          ? std::vector<std::string>{"swarm-flt", "swarm-performer", "swarm-lstm", "adam-restarts"}
          : std::vector<std::string>{"swarm-flt",  "swarm-performer", "swarm-independent",
                                     "swarm-lstm", "adam-restarts",   "pso",
                                     "cma-es"};
  options.seeds = quick ? 3 : 10;
  options.budget_per_dim = quick ? 100 : 200;
  options.particles = 16;
  options.adam_lr = fh::tune_adam_lr({0.003, 0.01, 0.03, 0.1}, quick ? 2 : 5,
                                     options.budget_per_dim, options.particles);
  Progress progress(settings, 1.0);
  double reported = 0.0;
  options.progress = [&](double done, const std::string& stage) {
    progress.advance(done - reported, stage);
    reported = done;
  };
  result.setup = {
      "Standard Rastrigin on [-5.12, 5.12]^n (held out), " +
          std::to_string(options.budget_per_dim) +
          " x n evaluations per run, 16 particles, median best value over " +
          std::to_string(options.seeds) + " seeds.",
      "Swarms: the shipped meta-weights (flt-swarm train: antithetic ES on shifted/rotated/scaled/"
      "noisy Rastrigin, n = 2..30).",
      "Adam restarts: 16 Adam runs from uniform points, restarted after 50 steps without "
      "progress; lr " +
          format_number(options.adam_lr) + " box widths/step, tuned on the training family."};
  const auto runs = fh::compare_searchers(options);
  result.csv_columns = {"function", "searcher", "seed", "best"};
  for (const auto& r : runs) {
    result.csv_rows.push_back(
        {r.function, r.searcher, std::to_string(r.seed), format_number(r.result.best_value)});
  }
  for (const auto& function : options.functions) {
    std::string best_name;
    double best_median = INFINITY;
    std::string cells;
    for (const auto& searcher : options.searchers) {
      const double median = fh::summarize(runs, function, searcher).median;
      result.metrics[function + " " + searcher] = median;
      cells += (cells.empty() ? "" : " | ") + searcher + " " + format_number(median);
      if (median < best_median) {
        best_median = median;
        best_name = searcher;
      }
    }
    result.table.push_back({"median best, " + function + ": " + cells,
                            "FLT swarm best, \"drastic\" gains (Fig. 3 right, no numbers)",
                            "lowest: " + best_name + " (" + format_number(best_median) + ")",
                            best_name == "swarm-flt" ? "agrees" : "disagrees"});
    // The paper's own contenders only: FLT, Performer and LSTM learned optimizers, and Adam.
    std::string paper_best;
    double paper_median = INFINITY;
    for (const auto* name : {"swarm-flt", "swarm-performer", "swarm-lstm", "adam-restarts"}) {
      const double median = fh::summarize(runs, function, name).median;
      if (median < paper_median) {
        paper_median = median;
        paper_best = name;
      }
    }
    result.table.push_back(
        {"lowest of the paper's set (FLT, Performer, LSTM swarms; Adam), " + function, "FLT",
         paper_best + " (" + format_number(paper_median) + ")",
         paper_best == "swarm-flt" ? "agrees" : "disagrees"});
    const int64_t dims = function.rfind("rastrigin-30", 0) == 0 ? 30 : 10;
    PlotPanel panel{
        function + ": median best so far", "function evaluations", "best value", false, true, {}};
    for (const auto& searcher : options.searchers) {
      auto curve =
          fh::median_best_curve(runs, function, searcher, options.budget_per_dim * dims, 40);
      panel.series.push_back({searcher, curve.first, curve.second});
    }
    result.panels.push_back(panel);
  }
}

}  // namespace flt::demos
