// flt-swarm: meta-trains the swarm optimizer and compares it with its baselines.
//
//   flt-swarm train --variant flt --out optimizer/pretrained/swarm_flt.pt [--iterations 300]
//   flt-swarm eval [--seeds 10] [--budget-per-dim 200] [--out-dir swarm-eval]
//   flt-swarm describe [--weights-dir DIR]      (what the weights learned)
//   flt-swarm --help, flt-swarm train --help, flt-swarm eval --help
//
// train resumes from --checkpoint when the file exists and is deterministic for a seed. eval runs
// every searcher on the held-out functions at equal budgets and writes a markdown table (stdout),
// a CSV of every run and one PNG per function (median best-so-far against evaluations).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "flt/detail/cli_checks.h"
#include "flt/detail/progress.h"
#include "flt/detail/raster_plot.h"
#include "flt/harness/swarm_comparison.h"
#include "flt/metatrain/swarm_meta_train.h"
#include "flt/optim/swarm.h"
#include "flt/runtime.h"

namespace fo = flt::optim;

namespace fh = flt::harness;

namespace fm = flt::metatrain;

using flt::detail::integer_at_least;
using flt::detail::library_name;

namespace {

int run_eval(const fh::ComparisonOptions& base, const std::string& out_dir, bool tune) {
  auto options = base;
  if (tune) {
    const std::vector<double> grid = {0.001, 0.003, 0.01, 0.03, 0.1};
    std::fprintf(stderr, "tuning Adam's lr on shifted/rotated Rastrigin-10 (training family)...\n");
    options.adam_lr = fh::tune_adam_lr(grid, 5, options.budget_per_dim, options.particles);
  }
  std::fprintf(stderr, "Adam restarts lr = %g box widths per step\n", options.adam_lr);
  flt::detail::ProgressBar bar("flt-swarm eval");
  options.progress = [&bar](double done, const std::string& what) { bar.update(done, what); };
  const auto runs = fh::compare_searchers(options);
  bar.finish();
  std::filesystem::create_directories(out_dir);
  std::ofstream csv(out_dir + "/runs.csv");
  csv << "function,searcher,seed,evaluations,best,success\n";
  for (const auto& r : runs) {
    csv << r.function << "," << r.searcher << "," << r.seed << "," << r.result.evaluations << ","
        << r.result.best_value << "," << (r.success ? 1 : 0) << "\n";
  }
  const auto searchers = options.searchers.empty() ? fh::all_searcher_names() : options.searchers;
  std::vector<fh::BenchmarkFunction> functions;
  for (const auto& f : fh::swarm_benchmark_functions()) {
    if (options.functions.empty() || std::find(options.functions.begin(), options.functions.end(),
                                               f.name) != options.functions.end())
      functions.push_back(f);
  }
  std::printf(
      "Median best value over %lld seeds (success rate: best < target), budget %lld x n "
      "evaluations, %lld particles; Adam lr %g\n\n",
      static_cast<long long>(options.seeds), static_cast<long long>(options.budget_per_dim),
      static_cast<long long>(options.particles), options.adam_lr);
  std::printf("| function (target) |");
  for (const auto& s : searchers) std::printf(" %s |", s.c_str());
  std::printf("\n|---|");
  for (size_t i = 0; i < searchers.size(); ++i) std::printf("---|");
  std::printf("\n");
  for (const auto& f : functions) {
    std::printf("| %s (< %g) |", f.name.c_str(), f.target);
    double best_median = INFINITY;
    for (const auto& s : searchers)
      best_median = std::min(best_median, fh::summarize(runs, f.name, s).median);
    for (const auto& s : searchers) {
      const auto cell = fh::summarize(runs, f.name, s);
      const bool bold = cell.median == best_median;
      std::printf(" %s%.3g (%.0f%%)%s |", bold ? "**" : "", cell.median, 100.0 * cell.success_rate,
                  bold ? "**" : "");
    }
    std::printf("\n");
    // One PNG per function: median best-so-far vs evaluations, log y.
    const int64_t budget = options.budget_per_dim * f.box.dims();
    std::vector<flt::detail::XySeries> series;
    for (size_t i = 0; i < searchers.size(); ++i) {
      auto curve = fh::median_best_curve(runs, f.name, searchers[i], budget, 60);
      for (auto& y : curve.second) y = std::max(y, 1e-12);  // log axis
      series.push_back({searchers[i], curve.first, curve.second, flt::detail::series_color(i)});
    }
    flt::detail::Canvas canvas(760, 460);
    flt::detail::plot_xy_panel(
        canvas, 0, 0, 760, 460,
        f.name + ": median best so far over " + std::to_string(options.seeds) + " seeds",
        "function evaluations", "best value", series, false, true);
    canvas.save(out_dir + "/" + f.name + ".png");
  }
  std::fprintf(stderr, "wrote %s/runs.csv and one PNG per function there\n", out_dir.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "flt-swarm: meta-trains the FLT swarm optimizer and compares it with PSO, CMA-ES, "
      "Adam restarts and random search on held-out functions at equal budgets."};
  app.require_subcommand(1);
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  int threads = 1;
  app.add_option("--threads", threads, "intra-op threads")
      ->capture_default_str()
      ->check(integer_at_least(1));

  auto* train = app.add_subcommand("train",
                                   "meta-train a swarm variant (antithetic ES) and write "
                                   "its weights");
  fm::SwarmMetaTrainOptions train_options;
  fo::SwarmModelOptions model_options;
  std::string out;
  train->add_option("--out", out, "weights file to write")->required();
  train
      ->add_option_function<std::string>(
          "--variant",
          [&](const std::string& name) {
            model_options.variant(fo::swarm_variant_from_name(name));
          },
          "flt, performer, independent or lstm")
      ->default_str("flt")
      ->check(library_name(fo::swarm_variant_from_name));
  const auto count = [](CLI::Option* option) {
    return option->capture_default_str()->check(integer_at_least(1));
  };
  count(train->add_option("--iterations", train_options.iterations(), "outer ES steps"));
  count(train->add_option("--pairs", train_options.pairs(), "antithetic pairs per iteration"));
  count(train->add_option("--tasks", train_options.tasks(), "tasks per iteration (batched)"));
  count(train->add_option("--particles", train_options.particles(), "particles per swarm"));
  count(train->add_option("--min-steps", train_options.min_steps(), "shortest episode"));
  count(train->add_option("--max-steps", train_options.max_steps(), "longest episode"));
  train->add_option("--sigma", train_options.sigma(), "ES perturbation std")->capture_default_str();
  train->add_option("--meta-lr", train_options.meta_lr(), "outer Adam lr")->capture_default_str();
  train->add_option("--seed", train_options.seed(), "seed")->capture_default_str();
  train->add_option("--checkpoint", train_options.checkpoint(), "checkpoint (resumed if present)");
  train->add_option("--csv", train_options.csv(), "per-iteration log");
  train->add_flag_callback(
      "--quiet", [&] { train_options.progress(false); }, "no progress bar");

  auto* describe = app.add_subcommand(
      "describe", "print what swarm weights learned (base rule, step-size schedule, RPE)");
  std::string describe_dir;
  describe->add_option("--weights-dir", describe_dir,
                       "read swarm_<variant>.pt from here instead of the shipped weights; "
                       "\"untrained\": the hand-set base rule");
  auto* eval = app.add_subcommand("eval",
                                  "compare the swarm variants and the baselines on "
                                  "held-out functions");
  fh::ComparisonOptions compare;
  std::string out_dir = "swarm-eval";
  bool no_tune = false;
  count(eval->add_option("--seeds", compare.seeds, "seeds per (function, searcher)"));
  count(eval->add_option("--budget-per-dim", compare.budget_per_dim,
                         "function evaluations per dimension"));
  count(eval->add_option("--particles", compare.particles,
                         "population size (CMA-ES: its default "
                         "lambda)"));
  eval->add_option("--functions", compare.functions,
                   "function names, comma-separated (default "
                   "all)")
      ->delimiter(',');
  eval->add_option("--searchers", compare.searchers,
                   "searcher names, comma-separated (default "
                   "all)")
      ->delimiter(',');
  eval->add_option("--weights-dir", compare.weights_dir,
                   "read swarm_<variant>.pt from here instead of the shipped weights; "
                   "\"untrained\": the hand-set base rule meta-training starts from");
  eval->add_option("--adam-lr", compare.adam_lr, "Adam's lr (with --no-tune)")
      ->capture_default_str();
  eval->add_flag("--no-tune", no_tune, "skip tuning Adam's lr on the training family");
  eval->add_option("--out-dir", out_dir, "where runs.csv and the PNGs go")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  flt::init();
  try {
    flt::set_threads(threads);
    if (*train) {
      torch::manual_seed(train_options.seed());
      model_options.seed(train_options.seed());
      fo::SwarmModel model(model_options);
      std::fprintf(stderr, "meta-training swarm-%s: %lld iterations x %lld pairs x %lld tasks\n",
                   fo::swarm_variant_name(model_options.variant()).c_str(),
                   static_cast<long long>(train_options.iterations()),
                   static_cast<long long>(train_options.pairs()),
                   static_cast<long long>(train_options.tasks()));
      const auto history = fm::meta_train_swarm(model, train_options);
      model->save(out);
      double tail = 0.0;
      const size_t n = std::min<size_t>(20, history.size());
      for (size_t i = history.size() - n; i < history.size(); ++i) tail += history[i] / n;
      std::printf("wrote %s (mean meta-loss of the last %zu iterations: %.4f)\n%s", out.c_str(), n,
                  tail, model->describe().c_str());
      return 0;
    }
    if (*describe) {
      for (auto variant : fo::all_swarm_variants()) {
        const auto searcher =
            fh::make_searcher("swarm-" + fo::swarm_variant_name(variant), 2, 0, 0.0, describe_dir);
        std::printf("%s", static_cast<fo::Swarm&>(*searcher).model()->describe().c_str());
      }
      return 0;
    }
    return run_eval(compare, out_dir, !no_tune);
  } catch (const c10::Error& e) {
    std::fprintf(stderr, "flt-swarm: %s\n", e.what_without_backtrace());
    return 1;
  }
}
