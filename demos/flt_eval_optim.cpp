// flt-eval-optim: compares the learned optimizers with tuned Adam and SGD-momentum, and with the
// baselines that claim to need no tuning (Prodigy, Schedule-Free AdamW), on held-out tasks.
//
//   flt-eval-optim [--suite synthetic|real|all] [--out DIR] [--seeds 5] [--tuning-seeds 3]
//                  [--tasks rastrigin-2d,...] [--weights NAME=FILE ...] [--no-baselines-sgd]
//                  [--tune-learned] [--quick] [--steps-scale 1] [--tuning-cache FILE]
//                  [--threads 1]
//
// --suite synthetic (default): the synthetic suite below. --suite real: held-out real training
// runs (training_runs.h: real torch::nn models in ordinary minibatch loops, scored on held-out
// data) against Adam at lr 1e-3 and Adam / AdamW with cosine decay tuned per run; writes
// DIR/eval-real.csv, DIR/eval-real-curves.csv, DIR/eval-real.png and DIR/eval-real-TASK.png.
//
// Both suites also run Prodigy (lr 1, constant and with cosine decay) and Schedule-Free AdamW
// (lr 0.0025, without and with a 5% warm-up, evaluated at its average x) untuned, at their
// authors' defaults (training_runs.h, untuned_baseline_contenders).
//
// Baselines get their learning rate tuned per task on the 7-point grid 1e-4..1e-1 (tuning seeds
// disjoint from the evaluation seeds); learned optimizers run with lr = 1 (their own step), and
// with
// --tune-learned the FLT rule also runs with its step multiplier tuned the same way on 0.1..10.
// Prints a table (median final loss, median steps to the target = tuned Adam's median loss at half
// budget, win rate against tuned Adam) and writes DIR/eval.csv and DIR/eval.png (median loss
// curves), and DIR/memory.csv and DIR/memory-rpe.png: how far back each learned rule's memory
// looks (its discount and, for FLT, its learned RPE over the step distance).
#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "cli_checks.h"
#include "flt/detail/statistics.h"
#include "flt/harness/evaluate.h"
#include "flt/harness/training_runs.h"
#include "flt/optim/mnemosyne.h"
#include "flt/runtime.h"
#include "memory_views.h"
#include "raster_plot.h"

namespace fo = flt::optim;
using flt::demos::memory_view;
using flt::demos::schedule_views;
using flt::demos::write_memory_views;

namespace {

/// ScheduleMnemosyne untuned (lr 1), with the schedule `spec` names (fo::schedule_from_spec;
/// empty: its default, the untrained schedule).
fo::Contender learned_schedule(const std::string& name, const std::string& spec) {
  fo::Contender c;
  c.name = name;
  c.tune = false;
  c.fixed_lr = 1.0;
  const fo::LearnedSchedule schedule = fo::schedule_from_spec(spec);
  c.make = [schedule](double lr) -> fo::OptimizerFactory {
    return [schedule,
            lr](std::vector<torch::Tensor> params) -> std::unique_ptr<torch::optim::Optimizer> {
      if (!schedule)
        return std::make_unique<fo::ScheduleMnemosyne>(std::move(params),
                                                       fo::ScheduleMnemosyneOptions(lr));
      return std::make_unique<fo::ScheduleMnemosyne>(
          std::move(params), fo::ScheduleMnemosyneOptions(lr),
          fo::LearnedSchedule(
              std::dynamic_pointer_cast<fo::LearnedScheduleImpl>(schedule->clone())));
    };
  };
  return c;
}

fo::Contender learned(const std::string& name, fo::LearnedOptimizerModel model) {
  fo::Contender c;
  c.name = name;
  c.tune = false;
  c.fixed_lr = 1.0;
  c.make = [model](double lr) -> fo::OptimizerFactory {
    return [model, lr](std::vector<torch::Tensor> params) {
      auto copy = std::dynamic_pointer_cast<fo::LearnedOptimizerModelImpl>(model->clone());
      return std::make_unique<fo::CoordinateMnemosyne>(
          std::move(params), fo::CoordinateMnemosyneOptions(lr), fo::LearnedOptimizerModel(copy));
    };
  };
  return c;
}

std::string verdict(int comparison) {
  return comparison > 0 ? "win" : comparison < 0 ? "loss" : "tie";
}

std::string speedup_text(double s) {
  if (std::isinf(s)) return "never";
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f", s);
  return text;
}

struct RealSuiteOptions {
  std::string out;
  std::vector<std::string> only;
  std::vector<std::string> weights;  // NAME=FILE
  fo::MnemosyneDesign design = fo::MnemosyneDesign::kCoordinateMemory;
  fo::RunEvalOptions eval;
  double steps_scale = 1.0;
  bool quick = false;
  bool known_length = false;  // also Mnemosyne told the run's length (its cosine annealing)
};

/// The held-out real training runs: tables, summary, CSVs and figures.
void run_real_suite(const RealSuiteOptions& options) {
  std::vector<std::string> skipped;
  std::vector<fo::TrainingRun> runs;
  if (options.quick) {
    runs.push_back(fo::quick_training_run());
  } else {
    runs = fo::held_out_training_runs(options.steps_scale, options.only, &skipped);
  }
  for (const auto& s : skipped) std::fprintf(stderr, "skipped %s\n", s.c_str());
  TORCH_CHECK(!runs.empty(), "flt-eval-optim: no real training runs to evaluate");

  std::vector<fo::RunContender> contenders;
  std::vector<std::string> learned;
  if (options.weights.empty()) {
    contenders.push_back(fo::mnemosyne_contender("mnemosyne", "", options.design));
  }
  for (const auto& spec : options.weights) {
    const auto eq = spec.find('=');
    contenders.push_back(
        fo::mnemosyne_contender(spec.substr(0, eq), spec.substr(eq + 1), options.design));
  }
  if (options.known_length) {
    // The loop's cosine schedule on lr is the options' total_steps(run steps): the same
    // half cosine, applied by the loop because an optimizer factory does not see the run.
    auto told = fo::mnemosyne_contender("mnemosyne-total-steps", "", options.design);
    told.schedule = fo::Schedule::kCosine;
    contenders.push_back(std::move(told));
  }
  for (const auto& c : contenders) learned.push_back(c.name);
  for (auto& c : fo::baseline_contenders()) contenders.push_back(std::move(c));
  // What a user picks to avoid tuning: Adam at its default and the self-tuning optimizers.
  std::vector<std::string> no_tuning = {"adam-1e-3"};
  for (auto& c : fo::untuned_baseline_contenders()) {
    no_tuning.push_back(c.name);
    contenders.push_back(std::move(c));
  }
  std::fprintf(stderr,
               "real training runs: %zu runs x %zu optimizers, %lld evaluation seeds, lr tuned on "
               "%lld other seeds%s%s\n",
               runs.size(), contenders.size(), static_cast<long long>(options.eval.eval_seeds),
               static_cast<long long>(options.eval.tuning_seeds),
               options.eval.tuning_cache.empty() ? "" : ", tuning cache ",
               options.eval.tuning_cache.c_str());
  const auto rows = fo::evaluate_training_runs(runs, contenders, options.eval);

  const auto find = [&](const std::string& task, const std::string& who) -> const fo::RunRow& {
    for (const auto& r : rows) {
      if (r.task == task && r.contender == who) return r;
    }
    TORCH_CHECK(false, "flt-eval-optim: no result for ", who, " on ", task);
  };
  std::filesystem::create_directories(options.out);
  std::FILE* csv = std::fopen((options.out + "/eval-real.csv").c_str(), "w");
  TORCH_CHECK(csv, "flt-eval-optim: cannot write ", options.out, "/eval-real.csv");
  std::fprintf(csv,
               "task,family,optimizer,steps,lr,lr_from_cache,seeds,median_final,median_best,"
               "median_final_error,late_rise,diverged,seconds_per_run,vs_adam_1e-3,vs_best_tuned,"
               "vs_best_no_tuning,ratio_to_best_no_tuning,speedup_vs_adam_cosine\n");
  struct Tally {
    int vs_default[3] = {0, 0, 0}, vs_tuned[3] = {0, 0, 0}, vs_peer[3] = {0, 0, 0};  // W, T, L
    int late_rise = 0, diverged = 0;
    std::vector<double> speedups, peer_ratios;
  };
  std::map<std::string, Tally> tally;
  for (const auto& run : runs) {
    const auto& adam = find(run.name, "adam-1e-3");
    const auto& adam_cosine = find(run.name, "adam-cosine");
    const auto& adamw_cosine = find(run.name, "adamw-cosine");
    const auto& best_tuned =
        adamw_cosine.median_final < adam_cosine.median_final ? adamw_cosine : adam_cosine;
    std::printf("\n%s: %s\n  %lld steps, batch %lld, %lld seeds, held-out %s every %lld steps\n",
                run.name.c_str(), run.family.c_str(), static_cast<long long>(run.steps),
                static_cast<long long>(run.batch), static_cast<long long>(options.eval.eval_seeds),
                run.loss == fo::LossKind::kCrossEntropy ? "cross-entropy" : "MSE",
                static_cast<long long>(run.eval_every));
    std::printf("  %-26s %8s %10s %10s %6s %6s %6s %8s %8s %8s %8s %7s\n", "optimizer", "lr",
                "final", "best", "error", "rise", "div", "vs 1e-3", "vs tuned", "vs peer",
                "speed-up", "s/run");
    for (const auto& c : contenders) {
      const auto& r = find(run.name, c.name);
      // The best no-tuning optimizer on this run, the contender itself left out.
      double peer = INFINITY;
      for (const auto& name : no_tuning) {
        if (name != c.name) peer = std::min(peer, find(run.name, name).median_final);
      }
      const int vs_default = fo::compare_finals(r.median_final, adam.median_final);
      const int vs_tuned = fo::compare_finals(r.median_final, best_tuned.median_final);
      const int vs_peer = fo::compare_finals(r.median_final, peer);
      const double peer_ratio = r.median_final / peer;
      const double speed = fo::speedup(r, adam_cosine);
      char error[16] = "-";
      if (std::isfinite(r.median_final_error)) {
        std::snprintf(error, sizeof(error), "%.1f%%", 100.0 * r.median_final_error);
      }
      std::printf(
          "  %-26s %8.2g %10.4g %10.4g %6s %4lld/%lld %4lld/%lld %8s %8s %8s %8s %7.1f\n",
          r.contender.c_str(), r.lr, r.median_final, r.median_best, error,
          static_cast<long long>(r.late_rise), static_cast<long long>(options.eval.eval_seeds),
          static_cast<long long>(r.diverged), static_cast<long long>(options.eval.eval_seeds),
          r.contender == "adam-1e-3" ? "-" : verdict(vs_default).c_str(), verdict(vs_tuned).c_str(),
          verdict(vs_peer).c_str(), speedup_text(speed).c_str(), r.seconds);
      std::fprintf(csv, "%s,%s,%s,%lld,%g,%d,%lld,%.6g,%.6g,%.6g,%lld,%lld,%.3f,%s,%s,%s,%.6g,%g\n",
                   r.task.c_str(), r.family.c_str(), r.contender.c_str(),
                   static_cast<long long>(r.steps), r.lr, r.tuned_from_cache ? 1 : 0,
                   static_cast<long long>(options.eval.eval_seeds), r.median_final, r.median_best,
                   r.median_final_error, static_cast<long long>(r.late_rise),
                   static_cast<long long>(r.diverged), r.seconds, verdict(vs_default).c_str(),
                   verdict(vs_tuned).c_str(), verdict(vs_peer).c_str(), peer_ratio, speed);
      auto& t = tally[c.name];
      t.vs_default[1 - vs_default] += 1;
      t.vs_tuned[1 - vs_tuned] += 1;
      t.vs_peer[1 - vs_peer] += 1;
      t.peer_ratios.push_back(peer_ratio);
      t.late_rise += r.late_rise > 0 ? 1 : 0;
      t.diverged += r.diverged > 0 ? 1 : 0;
      t.speedups.push_back(speed);
    }
  }
  std::fclose(csv);

  std::printf(
      "\nsummary over %zu runs (median final held-out loss per run; a tie is within %.0f%% "
      "relative;\n\"best tuned\" = the better of adam-cosine and adamw-cosine on each run; "
      "speed-up = steps tuned\nadam-cosine needs to reach the optimizer's final held-out loss / "
      "its steps, \"never\" = not within\nits budget, so > 1; \"peer\" = the best of the other "
      "no-tuning optimizers\n(adam-1e-3, prodigy, prodigy-cosine, schedule-free-adamw with and "
      "without warm-up) on each run,\nratio = final loss / the peer's, median and worst over "
      "runs):\n",
      runs.size(), 100 * fo::kRunTieTolerance);
  std::printf("  %-26s %16s %16s %16s %13s %11s %11s %16s\n", "optimizer", "vs adam-1e-3 W/T/L",
              "vs tuned W/T/L", "vs peer W/T/L", "ratio med/max", "late rise", "diverged",
              "median speed-up");
  const auto wtl = [](const int(&counts)[3]) {
    return std::to_string(counts[0]) + "/" + std::to_string(counts[1]) + "/" +
           std::to_string(counts[2]);
  };
  for (const auto& c : contenders) {
    auto& t = tally[c.name];
    const double med = flt::detail::median(t.speedups);
    char ratios[32];
    std::snprintf(ratios, sizeof(ratios), "%.2f/%.2f", flt::detail::median(t.peer_ratios),
                  *std::max_element(t.peer_ratios.begin(), t.peer_ratios.end()));
    std::printf("  %-26s %16s %16s %16s %13s %7d run%s %7d run%s %16s\n", c.name.c_str(),
                c.name == "adam-1e-3" ? "-" : wtl(t.vs_default).c_str(), wtl(t.vs_tuned).c_str(),
                wtl(t.vs_peer).c_str(), ratios, t.late_rise, t.late_rise == 1 ? " " : "s",
                t.diverged, t.diverged == 1 ? " " : "s", speedup_text(med).c_str());
  }

  // Curves: median over seeds at each evaluation step.
  std::FILE* curves = std::fopen((options.out + "/eval-real-curves.csv").c_str(), "w");
  TORCH_CHECK(curves, "flt-eval-optim: cannot write ", options.out, "/eval-real-curves.csv");
  std::fprintf(curves, "task,optimizer,step,median_held_out,median_param_norm\n");
  for (const auto& r : rows) {
    for (size_t i = 0; i < r.curve_steps.size(); ++i) {
      std::fprintf(curves, "%s,%s,%lld,%.6g,%.6g\n", r.task.c_str(), r.contender.c_str(),
                   static_cast<long long>(r.curve_steps[i]), r.median_curve[i],
                   r.median_param_norm[i]);
    }
  }
  std::fclose(curves);

  // Figures: per run, held-out loss and parameter norms side by side; and all runs' losses.
  std::vector<std::string> names;
  for (const auto& c : contenders) names.push_back(c.name);
  const int panel_w = 420, panel_h = 260;
  const auto series = [&](const std::string& task, bool norms) {
    std::vector<std::vector<double>> out;
    for (const auto& c : contenders) {
      const auto& r = find(task, c.name);
      out.push_back(norms ? r.median_param_norm : r.median_curve);
    }
    return out;
  };
  const auto x_label = [](flt::demos::Canvas& canvas, int x, int y, int w, int64_t steps) {
    canvas.text(x + 60, y, "0", {0, 0, 0});
    const std::string last = "step " + std::to_string(steps);
    canvas.text(x + w - 12 - stb_easy_font_width(const_cast<char*>(last.c_str())), y, last,
                {0, 0, 0});
  };
  for (const auto& run : runs) {
    flt::demos::Canvas probe(2 * panel_w, 1);
    const int legend_h = flt::demos::draw_legend(probe, 2 * panel_w, names);
    flt::demos::Canvas canvas(2 * panel_w, legend_h + panel_h + 14);
    flt::demos::draw_legend(canvas, 2 * panel_w, names);
    flt::demos::plot_panel(canvas, 0, legend_h, panel_w, panel_h,
                           run.name + ": held-out loss (log)", series(run.name, false), true);
    flt::demos::plot_panel(canvas, panel_w, legend_h, panel_w, panel_h,
                           "sum of parameter norms (log)", series(run.name, true), true);
    x_label(canvas, 0, legend_h + panel_h - 10, panel_w, run.steps);
    x_label(canvas, panel_w, legend_h + panel_h - 10, panel_w, run.steps);
    canvas.save(options.out + "/eval-real-" + run.name + ".png");
  }
  const int columns = std::min<int>(4, static_cast<int>(runs.size()));
  const int rows_n = (static_cast<int>(runs.size()) + columns - 1) / columns;
  const int small_w = 330, small_h = 220;
  flt::demos::Canvas probe(columns * small_w, 1);
  const int legend_h = flt::demos::draw_legend(probe, columns * small_w, names);
  flt::demos::Canvas overview(columns * small_w, legend_h + rows_n * small_h);
  flt::demos::draw_legend(overview, columns * small_w, names);
  for (size_t i = 0; i < runs.size(); ++i) {
    flt::demos::plot_panel(overview, static_cast<int>(i % columns) * small_w,
                           legend_h + static_cast<int>(i / columns) * small_h, small_w, small_h,
                           runs[i].name, series(runs[i].name, false), true);
  }
  overview.save(options.out + "/eval-real.png");
  // The second design's memories span the run: their view reaches the longest run's length.
  if (options.design == fo::MnemosyneDesign::kTensorSchedule) {
    const auto views = schedule_views(contenders);
    int64_t longest = 0;
    for (const auto& run : runs) longest = std::max(longest, run.steps);
    write_memory_views(options.out, views, longest);
  }
  std::printf(
      "\nwrote %s/eval-real.csv, eval-real-curves.csv, eval-real.png, one eval-real-TASK.png per "
      "run%s\n",
      options.out.c_str(),
      options.design == fo::MnemosyneDesign::kTensorSchedule ? ", memory.csv and memory-rpe.png"
                                                             : "");
}

}  // namespace

int main(int argc, char** argv) {
  std::string out = "out/eval-optim";
  fo::EvalOptions options;
  std::vector<std::string> only;     // --tasks
  std::vector<std::string> weights;  // --weights NAME=FILE
  bool quick = false;
  bool no_sgd = false;
  bool tune_learned = false;  // also the FLT rule with its multiplier tuned like the baselines' lr
  std::vector<std::string> task_names;
  for (const auto& task : fo::held_out_tasks()) task_names.push_back(task.name);
  for (const auto& name : fo::held_out_training_run_names()) task_names.push_back(name);
  std::string suite = "synthetic";
  RealSuiteOptions real;
  int threads = 1;

  CLI::App app{
      "flt-eval-optim: compares the learned optimizers with Adam and SGD-momentum, their learning "
      "rates tuned per task, on held-out tasks; writes DIR/eval.csv and DIR/eval.png, and what the "
      "learned rules' memories see (DIR/memory.csv, DIR/memory-rpe.png). With "
      "--suite real: held-out real training runs (real models, minibatches, held-out data) "
      "against Adam 1e-3 and tuned Adam / AdamW with cosine decay; writes DIR/eval-real*.csv and "
      "DIR/eval-real*.png. Both suites also run, untuned at their authors' defaults, Prodigy (lr "
      "1; prodigy-cosine: with cosine decay) and Schedule-Free AdamW (lr 0.0025, evaluated at its "
      "average; schedule-free-adamw-warmup: a linear warm-up over 5% of the steps)."};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--suite", suite,
                 "synthetic: the synthetic tasks; real: held-out real training runs; all: both")
      ->capture_default_str()
      ->check(CLI::IsMember({"synthetic", "real", "all"}));
  app.add_option("--out", out, "output directory")->capture_default_str();
  app.add_option("--seeds", options.eval_seeds, "evaluation seeds")
      ->capture_default_str()
      ->check(flt::demos::integer_at_least(1));
  app.add_option("--tuning-seeds", options.tuning_seeds, "seeds for tuning learning rates")
      ->capture_default_str()
      ->check(flt::demos::integer_at_least(1));
  app.add_option("--tasks", only, "held-out tasks, comma-separated (default: all)")
      ->delimiter(',')
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->check(CLI::IsMember(task_names));
  app.add_option("--weights", weights,
                 "a learned optimizer's weights file, instead of the pretrained ones (repeatable; "
                 "real suite: an empty FILE is the design's default weights, untrained for "
                 "tensor-schedule, which ships none; FILE \"untrained\" is the rule with its "
                 "learned part zeroed)")
      ->type_name("NAME=FILE")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            return v.find('=') == std::string::npos ? "expected NAME=FILE, got " + v : "";
          },
          ""));
  std::string design = "coordinate-memory";
  app.add_option("--design", design,
                 "which learned optimizer the default and the --weights contenders are: "
                 "coordinate-memory (CoordinateMnemosyne) or tensor-schedule "
                 "(ScheduleMnemosyne), both untuned at lr 1")
      ->capture_default_str()
      ->check(CLI::IsMember({"coordinate-memory", "tensor-schedule"}));
  app.add_flag("--no-baselines-sgd", no_sgd, "leave SGD-momentum out");
  app.add_flag("--tune-learned", tune_learned,
               "also run the FLT rule with its step multiplier tuned on 0.1..10");
  app.add_flag("--quick", quick,
               "3 evaluation and 2 tuning seeds, unless given; real suite: one small run (100 "
               "steps), 2 evaluation seeds and 1 tuning seed");
  app.add_option("--steps-scale", real.steps_scale,
                 "real suite: multiplies every run's steps (0.25 for a quick look)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--tuning-cache", real.eval.tuning_cache,
                 "real suite: CSV of the baselines' tuning results, reused where it matches a run "
                 "and its steps, extended with new ones (e.g. bench/eval-real-tuning.csv)");
  app.add_flag("--known-length", real.known_length,
               "real suite: also run Mnemosyne told each run's length (the options' total_steps: "
               "a half cosine to 0, as the tuned baselines' schedule)");
  app.add_option("--threads", threads, "LibTorch intra-op threads")
      ->capture_default_str()
      ->check(flt::demos::integer_at_least(1));
  CLI11_PARSE(app, argc, argv);
  // The real suite's defaults: 5 evaluation seeds, 2 tuning seeds (quick: 2 and 1).
  real.eval.eval_seeds = app.count("--seeds") ? options.eval_seeds : quick ? 2 : 5;
  real.eval.tuning_seeds = app.count("--tuning-seeds") ? options.tuning_seeds : quick ? 1 : 2;
  real.out = out;
  real.quick = quick;
  real.weights = weights;
  real.design = fo::design_from_name(design);
  if (tune_learned && real.design != fo::MnemosyneDesign::kCoordinateMemory) {
    std::fprintf(stderr,
                 "flt-eval-optim: --tune-learned tunes the first design's FLT rule; "
                 "leave out --design tensor-schedule\n");
    return 1;
  }
  if (quick) {
    if (app.count("--seeds") == 0) options.eval_seeds = 3;
    if (app.count("--tuning-seeds") == 0) options.tuning_seeds = 2;
  }
  std::vector<std::string> synthetic_only;
  for (const auto& name : only) {
    const auto real_names = fo::held_out_training_run_names();
    if (std::find(real_names.begin(), real_names.end(), name) != real_names.end())
      real.only.push_back(name);
    else
      synthetic_only.push_back(name);
  }
  const bool run_synthetic = (suite != "real") && (only.empty() || !synthetic_only.empty());
  const bool run_real = (suite != "synthetic") && (only.empty() || !real.only.empty());
  if (only.size() > 0 && !run_synthetic && !run_real) {
    std::fprintf(stderr, "flt-eval-optim: --tasks names no task of --suite %s\n", suite.c_str());
    return 1;
  }

  flt::init();
  flt::set_threads(threads);
  try {
    if (run_real) run_real_suite(real);
    if (!run_synthetic) return 0;
    std::vector<fo::Contender> contenders;
    fo::Contender adam;
    adam.name = "adam (tuned)";
    adam.make = [](double lr) -> fo::OptimizerFactory {
      return [lr](std::vector<torch::Tensor> p) {
        return std::make_unique<torch::optim::Adam>(std::move(p), torch::optim::AdamOptions(lr));
      };
    };
    contenders.push_back(adam);
    if (!no_sgd) {
      fo::Contender sgd;
      sgd.name = "sgd-momentum (tuned)";
      sgd.make = [](double lr) -> fo::OptimizerFactory {
        return [lr](std::vector<torch::Tensor> p) {
          return std::make_unique<torch::optim::SGD>(std::move(p),
                                                     torch::optim::SGDOptions(lr).momentum(0.9));
        };
      };
      contenders.push_back(sgd);
    }
    std::vector<std::pair<std::string, fo::LearnedOptimizerModel>> rules;
    if (real.design == fo::MnemosyneDesign::kTensorSchedule) {
      if (weights.empty()) contenders.push_back(learned_schedule("mnemosyne-schedule", ""));
      for (const auto& spec : weights) {
        const auto eq = spec.find('=');
        contenders.push_back(learned_schedule(spec.substr(0, eq), spec.substr(eq + 1)));
      }
    } else if (weights.empty()) {
      for (auto memory : fo::pretrained_memories())
        rules.emplace_back("mnemosyne-" + fo::memory_name(memory),
                           fo::load_pretrained_model(memory));
    }
    if (real.design == fo::MnemosyneDesign::kCoordinateMemory) {
      for (const auto& spec : weights) {
        const auto eq = spec.find('=');
        rules.emplace_back(spec.substr(0, eq), fo::load_model(spec.substr(eq + 1)));
      }
    }
    for (const auto& [name, model] : rules) contenders.push_back(learned(name, model));
    // The untuned baselines of the real suite, with the same factories, schedules and hooks.
    for (const auto& c : fo::untuned_baseline_contenders()) {
      fo::Contender untuned;
      untuned.name = c.name;
      untuned.make = c.make;
      untuned.tune = false;
      untuned.fixed_lr = c.fixed_lr;
      untuned.schedule = c.schedule;
      untuned.evaluation = c.evaluation;
      contenders.push_back(std::move(untuned));
    }
    if (tune_learned) {
      // Equal tuning budget: the same seeds and a 7-point grid, over the step multiplier.
      auto tuned = learned("mnemosyne-flt (lr tuned)", fo::load_pretrained_model(fo::Memory::kFLT));
      tuned.tune = true;
      tuned.grid = fo::multiplier_grid();
      contenders.push_back(tuned);
    }

    std::vector<fo::EvalTask> tasks;
    for (auto& t : fo::held_out_tasks()) {
      if (synthetic_only.empty() ||
          std::find(synthetic_only.begin(), synthetic_only.end(), t.name) != synthetic_only.end()) {
        tasks.push_back(std::move(t));
      }
    }
    std::fprintf(stderr,
                 "evaluating %zu optimizers on %zu held-out tasks (%lld seeds, lr tuned on %lld)\n",
                 contenders.size(), tasks.size(), static_cast<long long>(options.eval_seeds),
                 static_cast<long long>(options.tuning_seeds));
    const auto rows = fo::evaluate(tasks, contenders, options);

    std::filesystem::create_directories(out);
    std::printf("\n%-18s %-26s %9s %14s %14s %9s %5s %5s\n", "task", "optimizer", "lr",
                "median final", "steps->target", "win rate", "ties", "div");
    struct Tally {
      int won = 0, tied = 0, tasks = 0;
    };
    std::map<std::string, Tally> tally;  // per contender
    std::FILE* csv = std::fopen((out + "/eval.csv").c_str(), "w");
    TORCH_CHECK(csv, "flt-eval-optim: cannot write ", out, "/eval.csv");
    std::fprintf(csv,
                 "task,optimizer,lr,median_final,median_steps_to_target,win_rate,tie_rate,diverged,"
                 "meta_objective\n");
    for (const auto& r : rows) {
      std::printf("%-18s %-26s %9.2g %14.4g %14.0f %8.0f%% %4.0f%% %5lld\n", r.task.c_str(),
                  r.contender.c_str(), r.lr, r.median_final, r.median_steps_to_target,
                  100 * r.win_rate, 100 * r.tie_rate, static_cast<long long>(r.diverged));
      std::fprintf(csv, "%s,%s,%g,%g,%g,%g,%g,%lld,%g\n", r.task.c_str(), r.contender.c_str(), r.lr,
                   r.median_final, r.median_steps_to_target, r.win_rate, r.tie_rate,
                   static_cast<long long>(r.diverged), r.meta_objective);
      auto& t = tally[r.contender];
      t.tasks += 1;
      if (r.win_rate > 0.5)
        t.won += 1;
      else if (r.win_rate + r.tie_rate > 0.5)
        t.tied += 1;  // no clear majority either way, mostly ties
    }
    std::fclose(csv);
    std::printf(
        "\nmeta-objective (mean over tasks, seeds and steps of log(loss / start); lower is "
        "better):\n");
    for (const auto& c : contenders) {
      double total = 0.0;
      int count = 0;
      for (const auto& r : rows) {
        if (r.contender == c.name) {
          total += r.meta_objective;
          ++count;
        }
      }
      std::printf("  %-26s %+.3f\n", c.name.c_str(), total / count);
    }
    std::printf(
        "\ntasks where the optimizer beats tuned Adam on most seeds (a final loss within %.1g "
        "relative\n"
        "of Adam's is a tie; \"tied\" = tasks not won where wins and ties make a majority):\n",
        fo::kTieTolerance);
    for (const auto& c : contenders) {
      if (c.name == contenders[0].name) continue;
      const auto& t = tally[c.name];
      std::printf("  %-26s %d / %d (%.0f%%), tied %d\n", c.name.c_str(), t.won, t.tasks,
                  100.0 * t.won / t.tasks, t.tied);
    }

    // Figure: one panel per task, median loss curves on a log axis, legend on top.
    const int columns = 4, panel_w = 330, panel_h = 220, legend_row = 22;
    const int panels = static_cast<int>(tasks.size());
    // Legend entries flow left to right and wrap to a new row when the width runs out.
    std::vector<std::pair<int, int>> legend_at;  // (x, y) of each contender's swatch
    int legend_x = 8, legend_y = 8;
    for (const auto& contender : contenders) {
      const int width =
          20 + 2 * stb_easy_font_width(const_cast<char*>(contender.name.c_str())) + 24;
      if (legend_x > 8 && legend_x + width > columns * panel_w)
        legend_x = 8, legend_y += legend_row;
      legend_at.emplace_back(legend_x, legend_y);
      legend_x += width;
    }
    const int legend_h = legend_y + legend_row + 6;
    flt::demos::Canvas canvas(columns * panel_w,
                              legend_h + ((panels + columns - 1) / columns) * panel_h);
    for (size_t c = 0; c < contenders.size(); ++c) {
      const auto [x, y] = legend_at[c];
      canvas.rect(x, y, x + 14, y + 14, flt::demos::series_color(c));
      canvas.text(x + 20, y, contenders[c].name, {0, 0, 0}, 2);
    }
    for (int t = 0; t < panels; ++t) {
      std::vector<std::vector<double>> series;
      for (const auto& r : rows) {
        if (r.task == tasks[t].name) series.push_back(r.median_curve);
      }
      flt::demos::plot_panel(canvas, (t % columns) * panel_w, legend_h + (t / columns) * panel_h,
                             panel_w, panel_h, tasks[t].name, series, /*log_y=*/true);
    }
    canvas.save(out + "/eval.png");
    auto views = schedule_views(contenders);  // the second design's; the first's below
    for (const auto& [name, model] : rules) views.push_back(memory_view(name, model));
    write_memory_views(out, views, /*max_distance=*/rules.empty() ? 300 : 100);
    std::printf("\nwrote %s/eval.csv, eval.png, memory.csv and memory-rpe.png\n", out.c_str());
  } catch (const c10::Error& e) {
    std::fprintf(stderr, "flt-eval-optim: %s\n", e.what_without_backtrace());
    return 1;
  }
  return 0;
}
