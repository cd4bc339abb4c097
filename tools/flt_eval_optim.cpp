// flt-eval-optim: compares the learned optimizers with tuned Adam and SGD-momentum, and with the
// baselines that claim to need no tuning (Prodigy, Schedule-Free AdamW), on held-out tasks.
//
//   flt-eval-optim [--suite synthetic|real|development|all] [--out DIR] [--seeds 5]
//                  [--tuning-seeds 3]
//                  [--tasks rastrigin-2d,...] [--weights NAME=[DESIGN:]FILE ...]
//                  [--no-baselines-sgd]
//                  [--tune-learned] [--quick] [--steps-scale 1] [--part K/N] [--tuning-cache FILE]
//                  [--threads 1]
//
// --suite synthetic (default): the synthetic suite below. --suite real: held-out real training
// runs (training_runs.h: real torch::nn models in ordinary minibatch loops, scored on held-out
// data) against Adam at lr 1e-3 and Adam / AdamW with cosine decay tuned per run; writes
// DIR/eval-real.csv, DIR/eval-real-curves.csv, DIR/eval-real.png and DIR/eval-real-TASK.png.
// --suite development: the same for the development runs, real runs of the same kinds on other
// data, where a design is chosen before the held-out runs test it.
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

#include "eval_real_suite.h"
#include "flt/detail/cli_checks.h"
#include "flt/detail/raster_plot.h"
#include "flt/detail/statistics.h"
#include "flt/harness/evaluate.h"
#include "flt/harness/training_runs.h"
#include "flt/optim/mnemosyne.h"
#include "flt/runtime.h"
#include "memory_views.h"

namespace fo = flt::optim;

namespace fh = flt::harness;
using flt::tools::memory_view;
using flt::tools::schedule_views;
using flt::tools::write_memory_views;

namespace {

/// ScheduleMnemosyne untuned (lr 1), with the schedule `spec` names (fh::schedule_from_spec;
/// empty: its default, the untrained schedule).
fh::Contender learned_schedule(const std::string& name, const std::string& spec) {
  fh::Contender c;
  c.name = name;
  c.tune = false;
  c.fixed_lr = 1.0;
  const fo::LearnedSchedule schedule = fh::schedule_from_spec(spec);
  c.make = [schedule](double lr) -> fh::OptimizerFactory {
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

fh::Contender learned(const std::string& name, fo::LearnedOptimizerModel model) {
  fh::Contender c;
  c.name = name;
  c.tune = false;
  c.fixed_lr = 1.0;
  c.make = [model](double lr) -> fh::OptimizerFactory {
    return [model, lr](std::vector<torch::Tensor> params) {
      auto copy = std::dynamic_pointer_cast<fo::LearnedOptimizerModelImpl>(model->clone());
      return std::make_unique<fo::CoordinateMnemosyne>(
          std::move(params), fo::CoordinateMnemosyneOptions(lr), fo::LearnedOptimizerModel(copy));
    };
  };
  return c;
}

// What the command line sets; the defaults are those --help shows.
struct EvalArgs {
  std::string out = "out/eval-optim";
  fh::EvalOptions options;           // the synthetic suite's
  std::vector<std::string> only;     // --tasks
  std::vector<std::string> weights;  // --weights NAME=FILE
  bool quick = false;
  std::string part = "0/1";  // --part K/N
  bool no_sgd = false;
  bool tune_learned = false;  // also the FLT rule with its multiplier tuned like the baselines' lr
  std::string suite = "synthetic";
  std::string design = "coordinate-memory";
  flt::tools::RealSuiteOptions real;
  int threads = 1;
};

void declare_options(CLI::App& app, EvalArgs& a) {
  std::vector<std::string> task_names;
  for (const auto& task : fh::held_out_tasks()) task_names.push_back(task.name);
  for (const auto& name : fh::held_out_training_run_names()) task_names.push_back(name);
  for (const auto& name : fh::development_training_run_names()) task_names.push_back(name);
  app.description(
      "flt-eval-optim: compares the learned optimizers with Adam and SGD-momentum, their learning "
      "rates tuned per task, on held-out tasks; writes DIR/eval.csv and DIR/eval.png, and what the "
      "learned rules' memories see (DIR/memory.csv, DIR/memory-rpe.png). With "
      "--suite real: held-out real training runs (real models, minibatches, held-out data) "
      "against Adam 1e-3 and tuned Adam / AdamW with cosine decay; writes DIR/eval-real*.csv and "
      "DIR/eval-real*.png; --suite development: the same on the development runs (other data, for "
      "choosing a design). Both suites also run, untuned at their authors' defaults, Prodigy (lr "
      "1; prodigy-cosine: with cosine decay) and Schedule-Free AdamW (lr 0.0025, evaluated at its "
      "average; schedule-free-adamw-warmup: a linear warm-up over 5% of the steps).");
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--suite", a.suite,
                 "synthetic: the synthetic tasks; real: held-out real training runs; development: "
                 "real runs of their kinds on other data, for choosing a design; all: synthetic "
                 "and real")
      ->capture_default_str()
      ->check(CLI::IsMember({"synthetic", "real", "development", "all"}));
  app.add_option("--out", a.out, "output directory")->capture_default_str();
  app.add_option("--seeds", a.options.eval_seeds, "evaluation seeds")
      ->capture_default_str()
      ->check(flt::detail::integer_at_least(1));
  app.add_option("--tuning-seeds", a.options.tuning_seeds, "seeds for tuning learning rates")
      ->capture_default_str()
      ->check(flt::detail::integer_at_least(1));
  app.add_option("--tasks", a.only, "held-out tasks, comma-separated (default: all)")
      ->delimiter(',')
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->check(CLI::IsMember(task_names));
  app.add_option("--weights", a.weights,
                 "a learned optimizer's weights file, instead of the pretrained ones (repeatable; "
                 "real suite: an empty FILE is the design's default weights, untrained for "
                 "tensor-schedule, which ships none; FILE \"untrained\" is the rule with its "
                 "learned part zeroed; NAME=DESIGN:FILE picks this contender's design, e.g. "
                 "learned=tensor-schedule:best.pt beside the default design's contenders)")
      ->type_name("NAME=[DESIGN:]FILE")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            return v.find('=') == std::string::npos ? "expected NAME=FILE, got " + v : "";
          },
          ""));
  app.add_option("--design", a.design,
                 "which learned optimizer the default and the --weights contenders are: "
                 "coordinate-memory (CoordinateMnemosyne) or tensor-schedule "
                 "(ScheduleMnemosyne), both untuned at lr 1")
      ->capture_default_str()
      ->check(CLI::IsMember({"coordinate-memory", "tensor-schedule"}));
  app.add_flag("--no-baselines-sgd", a.no_sgd, "leave SGD-momentum out");
  app.add_flag("--tune-learned", a.tune_learned,
               "also run the FLT rule with its step multiplier tuned on 0.1..10");
  app.add_flag("--quick", a.quick,
               "3 evaluation and 2 tuning seeds, unless given; real suite: one small run (100 "
               "steps), 2 evaluation seeds and 1 tuning seed");
  app.add_option("--part", a.part,
                 "real suite: K/N runs only the runs whose index modulo N is K (0 <= K < N), so N "
                 "processes share the suite")
      ->type_name("K/N")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            long long k = -1, n = 0;
            char tail = 0;
            const bool parsed = std::sscanf(v.c_str(), "%lld/%lld%c", &k, &n, &tail) == 2;
            return parsed && n >= 1 && k >= 0 && k < n ? ""
                                                       : "expected K/N with 0 <= K < N, got " + v;
          },
          ""));
  app.add_option("--steps-scale", a.real.steps_scale,
                 "real suite: multiplies every run's steps (0.25 for a quick look)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--tuning-cache", a.real.eval.tuning_cache,
                 "real suite: CSV of the baselines' tuning results, reused where it matches a run "
                 "and its steps, extended with new ones (e.g. bench/eval-real-tuning.csv)");
  app.add_flag("--known-length", a.real.known_length,
               "real suite: also run Mnemosyne told each run's length (the options' total_steps: "
               "a half cosine to 0, as the tuned baselines' schedule)");
  app.add_option("--threads", a.threads, "LibTorch intra-op threads")
      ->capture_default_str()
      ->check(flt::detail::integer_at_least(1));
}

/// The synthetic suite's contenders: tuned Adam (and SGD-momentum), the learned optimizers the
/// arguments name (the first design's models also into `rules`, for their memory views) and the
/// no-tuning baselines.
std::vector<fh::Contender> synthetic_contenders(
    const EvalArgs& a, std::vector<std::pair<std::string, fo::LearnedOptimizerModel>>& rules) {
  std::vector<fh::Contender> contenders;
  fh::Contender adam;
  adam.name = "adam (tuned)";
  adam.make = [](double lr) -> fh::OptimizerFactory {
    return [lr](std::vector<torch::Tensor> p) {
      return std::make_unique<torch::optim::Adam>(std::move(p), torch::optim::AdamOptions(lr));
    };
  };
  contenders.push_back(adam);
  if (!a.no_sgd) {
    fh::Contender sgd;
    sgd.name = "sgd-momentum (tuned)";
    sgd.make = [](double lr) -> fh::OptimizerFactory {
      return [lr](std::vector<torch::Tensor> p) {
        return std::make_unique<torch::optim::SGD>(std::move(p),
                                                   torch::optim::SGDOptions(lr).momentum(0.9));
      };
    };
    contenders.push_back(sgd);
  }
  if (a.weights.empty()) {
    if (a.real.design == fh::MnemosyneDesign::kTensorSchedule) {
      contenders.push_back(learned_schedule("mnemosyne-schedule", ""));
    } else {
      for (auto memory : fo::pretrained_memories())
        rules.emplace_back("mnemosyne-" + fo::memory_name(memory),
                           fo::load_pretrained_model(memory));
    }
  }
  for (const auto& text : a.weights) {
    const auto spec = flt::tools::weights_spec(text, a.real.design);
    if (spec.design == fh::MnemosyneDesign::kTensorSchedule) {
      contenders.push_back(learned_schedule(spec.name, spec.file));
    } else {
      rules.emplace_back(spec.name, fo::load_model(spec.file));
    }
  }
  for (const auto& [name, model] : rules) contenders.push_back(learned(name, model));
  // The untuned baselines of the real suite, with the same factories, schedules and hooks.
  for (const auto& c : fh::untuned_baseline_contenders()) {
    fh::Contender untuned;
    untuned.name = c.name;
    untuned.make = c.make;
    untuned.tune = false;
    untuned.fixed_lr = c.fixed_lr;
    untuned.schedule = c.schedule;
    untuned.evaluation = c.evaluation;
    contenders.push_back(std::move(untuned));
  }
  if (a.tune_learned) {
    // Equal tuning budget: the same seeds and a 7-point grid, over the step multiplier.
    auto tuned = learned("mnemosyne-flt (lr tuned)", fo::load_pretrained_model(fo::Memory::kFLT));
    tuned.tune = true;
    tuned.grid = fh::multiplier_grid();
    contenders.push_back(tuned);
  }

  return contenders;
}

/// The table, DIR/eval.csv, the meta-objective and the tallies against tuned Adam.
void report_synthetic(const std::vector<fh::EvalRow>& rows,
                      const std::vector<fh::Contender>& contenders, const std::string& out) {
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
      fh::kTieTolerance);
  for (const auto& c : contenders) {
    if (c.name == contenders[0].name) continue;
    const auto& t = tally[c.name];
    std::printf("  %-26s %d / %d (%.0f%%), tied %d\n", c.name.c_str(), t.won, t.tasks,
                100.0 * t.won / t.tasks, t.tied);
  }
}

/// DIR/eval.png: one panel per task, median loss curves on a log axis, legend on top.
void draw_synthetic_figure(const std::vector<fh::EvalTask>& tasks,
                           const std::vector<fh::EvalRow>& rows,
                           const std::vector<fh::Contender>& contenders, const std::string& out) {
  // Figure: one panel per task, median loss curves on a log axis, legend on top.
  const int columns = 4, panel_w = 330, panel_h = 220, legend_row = 22;
  const int panels = static_cast<int>(tasks.size());
  // Legend entries flow left to right and wrap to a new row when the width runs out.
  std::vector<std::pair<int, int>> legend_at;  // (x, y) of each contender's swatch
  int legend_x = 8, legend_y = 8;
  for (const auto& contender : contenders) {
    const int width = 20 + 2 * stb_easy_font_width(const_cast<char*>(contender.name.c_str())) + 24;
    if (legend_x > 8 && legend_x + width > columns * panel_w) legend_x = 8, legend_y += legend_row;
    legend_at.emplace_back(legend_x, legend_y);
    legend_x += width;
  }
  const int legend_h = legend_y + legend_row + 6;
  flt::detail::Canvas canvas(columns * panel_w,
                             legend_h + ((panels + columns - 1) / columns) * panel_h);
  for (size_t c = 0; c < contenders.size(); ++c) {
    const auto [x, y] = legend_at[c];
    canvas.rect(x, y, x + 14, y + 14, flt::detail::series_color(c));
    canvas.text(x + 20, y, contenders[c].name, {0, 0, 0}, 2);
  }
  for (int t = 0; t < panels; ++t) {
    std::vector<std::vector<double>> series;
    for (const auto& r : rows) {
      if (r.task == tasks[t].name) series.push_back(r.median_curve);
    }
    flt::detail::plot_panel(canvas, (t % columns) * panel_w, legend_h + (t / columns) * panel_h,
                            panel_w, panel_h, tasks[t].name, series, /*log_y=*/true);
  }
  canvas.save(out + "/eval.png");
}

/// The synthetic suite: every contender on the held-out tasks `only` names (all when empty).
void run_synthetic_suite(const EvalArgs& a, const std::vector<std::string>& only) {
  std::vector<std::pair<std::string, fo::LearnedOptimizerModel>> rules;
  const auto contenders = synthetic_contenders(a, rules);
  std::vector<fh::EvalTask> tasks;
  for (auto& t : fh::held_out_tasks()) {
    if (only.empty() || std::find(only.begin(), only.end(), t.name) != only.end()) {
      tasks.push_back(std::move(t));
    }
  }
  std::fprintf(stderr,
               "evaluating %zu optimizers on %zu held-out tasks (%lld seeds, lr tuned on %lld)\n",
               contenders.size(), tasks.size(), static_cast<long long>(a.options.eval_seeds),
               static_cast<long long>(a.options.tuning_seeds));
  const auto rows = fh::evaluate(tasks, contenders, a.options);

  report_synthetic(rows, contenders, a.out);
  draw_synthetic_figure(tasks, rows, contenders, a.out);
  auto views = schedule_views(contenders);  // the second design's; the first's below
  for (const auto& [name, model] : rules) views.push_back(memory_view(name, model));
  write_memory_views(a.out, views, /*max_distance=*/rules.empty() ? 300 : 100);
  std::printf("\nwrote %s/eval.csv, eval.png, memory.csv and memory-rpe.png\n", a.out.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  EvalArgs a;
  CLI::App app;
  declare_options(app, a);
  CLI11_PARSE(app, argc, argv);
  // The real suite's defaults: 5 evaluation seeds, 2 tuning seeds (quick: 2 and 1).
  a.real.eval.eval_seeds = app.count("--seeds") ? a.options.eval_seeds : a.quick ? 2 : 5;
  a.real.eval.tuning_seeds = app.count("--tuning-seeds") ? a.options.tuning_seeds : a.quick ? 1 : 2;
  a.real.out = a.out;
  a.real.quick = a.quick;
  long long part = 0, parts = 1;
  std::sscanf(a.part.c_str(), "%lld/%lld", &part, &parts);  // checked by the option's validator
  a.real.part = part;
  a.real.parts = parts;
  a.real.weights = a.weights;
  a.real.design = fh::design_from_name(a.design);
  if (a.tune_learned && a.real.design != fh::MnemosyneDesign::kCoordinateMemory) {
    std::fprintf(stderr,
                 "flt-eval-optim: --tune-learned tunes the first design's FLT rule; "
                 "leave out --design tensor-schedule\n");
    return 1;
  }
  if (a.quick) {
    if (app.count("--seeds") == 0) a.options.eval_seeds = 3;
    if (app.count("--tuning-seeds") == 0) a.options.tuning_seeds = 2;
  }
  a.real.development = a.suite == "development";
  std::vector<std::string> synthetic_only;
  const auto real_names =
      a.real.development ? fh::development_training_run_names() : fh::held_out_training_run_names();
  for (const auto& name : a.only) {
    if (std::find(real_names.begin(), real_names.end(), name) != real_names.end())
      a.real.only.push_back(name);
    else
      synthetic_only.push_back(name);
  }
  const bool synthetic_suite = a.suite == "synthetic" || a.suite == "all";
  const bool run_synthetic = synthetic_suite && (a.only.empty() || !synthetic_only.empty());
  const bool run_real = a.suite != "synthetic" && (a.only.empty() || !a.real.only.empty());
  if (!a.only.empty() && !run_synthetic && !run_real) {
    std::fprintf(stderr, "flt-eval-optim: --tasks names no task of --suite %s\n", a.suite.c_str());
    return 1;
  }

  flt::init();
  flt::set_threads(a.threads);
  try {
    if (run_real) flt::tools::run_real_suite(a.real);
    if (run_synthetic) run_synthetic_suite(a, synthetic_only);
  } catch (const c10::Error& e) {
    std::fprintf(stderr, "flt-eval-optim: %s\n", e.what_without_backtrace());
    return 1;
  }
  return 0;
}
