// flt-eval-optim: compares the learned optimizers with tuned Adam and SGD-momentum on held-out
// tasks.
//
//   flt-eval-optim [--out DIR] [--seeds 5] [--tuning-seeds 3] [--tasks rastrigin-2d,...]
//                  [--weights NAME=FILE ...] [--no-baselines-sgd] [--tune-learned] [--quick]
//
// Baselines get their learning rate tuned per task on the 7-point grid 1e-4..1e-1 (tuning seeds
// disjoint from the evaluation seeds); learned optimizers run with lr = 1 (their own step), and
// with
// --tune-learned the FLT rule also runs with its step multiplier tuned the same way on 0.1..10.
// Prints a table (median final loss, median steps to the target = tuned Adam's median loss at half
// budget, win rate against tuned Adam) and writes DIR/eval.csv and DIR/eval.png (median loss
// curves).
#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "cli_checks.h"
#include "flt/optim/evaluate.h"
#include "flt/optim/mnemosyne.h"
#include "flt/runtime.h"
#include "raster_plot.h"

namespace fo = flt::optim;

namespace {

fo::Contender learned(const std::string& name, fo::LearnedOptimizerModel model) {
  fo::Contender c;
  c.name = name;
  c.tune = false;
  c.fixed_lr = 1.0;
  c.make = [model](double lr) -> fo::OptimizerFactory {
    return [model, lr](std::vector<torch::Tensor> params) {
      auto copy = std::dynamic_pointer_cast<fo::LearnedOptimizerModelImpl>(model->clone());
      return std::make_unique<fo::Mnemosyne>(std::move(params), fo::MnemosyneOptions(lr),
                                             fo::LearnedOptimizerModel(copy));
    };
  };
  return c;
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

  CLI::App app{
      "flt-eval-optim: compares the learned optimizers with Adam and SGD-momentum, their learning "
      "rates tuned per task, on held-out tasks; writes DIR/eval.csv and DIR/eval.png."};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
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
                 "a learned optimizer's weights file, instead of the pretrained ones (repeatable)")
      ->type_name("NAME=FILE")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            return v.find('=') == std::string::npos ? "expected NAME=FILE, got " + v : "";
          },
          ""));
  app.add_flag("--no-baselines-sgd", no_sgd, "leave SGD-momentum out");
  app.add_flag("--tune-learned", tune_learned,
               "also run the FLT rule with its step multiplier tuned on 0.1..10");
  app.add_flag("--quick", quick, "3 evaluation and 2 tuning seeds, unless given");
  CLI11_PARSE(app, argc, argv);
  if (quick) {
    if (app.count("--seeds") == 0) options.eval_seeds = 3;
    if (app.count("--tuning-seeds") == 0) options.tuning_seeds = 2;
  }

  flt::init();
  try {
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
    if (weights.empty()) {
      for (auto memory : fo::pretrained_memories()) {
        contenders.push_back(
            learned("mnemosyne-" + fo::memory_name(memory), fo::load_pretrained_model(memory)));
      }
    }
    for (const auto& spec : weights) {
      const auto eq = spec.find('=');
      contenders.push_back(learned(spec.substr(0, eq), fo::load_model(spec.substr(eq + 1))));
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
      if (only.empty() || std::find(only.begin(), only.end(), t.name) != only.end()) {
        tasks.push_back(std::move(t));
      }
    }
    std::fprintf(stderr,
                 "evaluating %zu optimizers on %zu held-out tasks (%lld seeds, lr tuned on %lld)\n",
                 contenders.size(), tasks.size(), static_cast<long long>(options.eval_seeds),
                 static_cast<long long>(options.tuning_seeds));
    const auto rows = fo::evaluate(tasks, contenders, options);

    std::filesystem::create_directories(out);
    std::printf("\n%-18s %-22s %9s %14s %14s %9s %5s %5s\n", "task", "optimizer", "lr",
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
      std::printf("%-18s %-22s %9.2g %14.4g %14.0f %8.0f%% %4.0f%% %5lld\n", r.task.c_str(),
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
      std::printf("  %-22s %+.3f\n", c.name.c_str(), total / count);
    }
    std::printf(
        "\ntasks where the optimizer beats tuned Adam on most seeds (a final loss within %.1g "
        "relative\n"
        "of Adam's is a tie; \"tied\" = tasks not won where wins and ties make a majority):\n",
        fo::kTieTolerance);
    for (const auto& c : contenders) {
      if (c.name == contenders[0].name) continue;
      const auto& t = tally[c.name];
      std::printf("  %-22s %d / %d (%.0f%%), tied %d\n", c.name.c_str(), t.won, t.tasks,
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
    std::printf("\nwrote %s/eval.csv and %s/eval.png\n", out.c_str(), out.c_str());
  } catch (const c10::Error& e) {
    std::fprintf(stderr, "flt-eval-optim: %s\n", e.what_without_backtrace());
    return 1;
  }
  return 0;
}
