// flt-eval-optim: compares the learned optimizers with tuned Adam and SGD-momentum on held-out tasks.
//
//   flt-eval-optim [--out DIR] [--seeds 5] [--tuning-seeds 3] [--tasks rastrigin-2d,...]
//                  [--weights NAME=FILE ...] [--tune-learned] [--quick]
//
// Baselines get their learning rate tuned per task on the 7-point grid 1e-4..1e-1 (tuning seeds
// disjoint from the evaluation seeds); learned optimizers run with lr = 1 (their own step), and with
// --tune-learned the FLT rule also runs with its step multiplier tuned the same way on 0.1..10. Prints a
// table (median final loss, median steps to the target = tuned Adam's median loss at half budget,
// win rate against tuned Adam) and writes DIR/eval.csv and DIR/eval.png (median loss curves).
#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>
#include <set>
#include <string>

#include "flt/optim/evaluate.h"
#include "flt/optim/mnemosyne.h"
#include "flt/runtime.h"
#include "cli_args.h"
#include "raster_plot.h"

namespace fo = flt::optim;

namespace {

[[noreturn]] void usage(const std::string& problem) {
  std::fprintf(stderr,
               "flt-eval-optim: %s\n"
               "usage: flt-eval-optim [--out DIR] [--seeds N] [--tuning-seeds N] [--tasks a,b,...]\n"
               "       [--weights NAME=FILE]... [--no-baselines-sgd] [--tune-learned] [--quick]\n",
               problem.c_str());
  std::exit(2);
}

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
  flt::init();
  std::string out = "out/eval-optim";
  fo::EvalOptions options;
  std::set<std::string> only;
  std::vector<std::pair<std::string, std::string>> weights;
  bool with_sgd = true;
  bool tune_learned = false;  // also run the FLT rule with its multiplier tuned like the baselines' lr
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage("missing value after " + arg);
      return argv[++i];
    };
    const auto count = [&]() {
      const std::string v = value();
      const auto n = flt::demos::parse_integer(v);
      if (!n) usage("not an integer for " + arg + ": " + v);
      return *n;
    };
    if (arg == "--out") out = value();
    else if (arg == "--seeds") options.eval_seeds = count();
    else if (arg == "--tuning-seeds") options.tuning_seeds = count();
    else if (arg == "--quick") { options.eval_seeds = 3; options.tuning_seeds = 2; }
    else if (arg == "--no-baselines-sgd") with_sgd = false;
    else if (arg == "--tune-learned") tune_learned = true;
    else if (arg == "--tasks") {
      std::stringstream list(value());
      for (std::string name; std::getline(list, name, ',');) only.insert(name);
    } else if (arg == "--weights") {
      const std::string v = value();
      const auto eq = v.find('=');
      if (eq == std::string::npos) usage("--weights takes NAME=FILE, got " + v);
      weights.emplace_back(v.substr(0, eq), v.substr(eq + 1));
    } else usage("unknown argument " + arg);
  }
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
    if (with_sgd) {
      fo::Contender sgd;
      sgd.name = "sgd-momentum (tuned)";
      sgd.make = [](double lr) -> fo::OptimizerFactory {
        return [lr](std::vector<torch::Tensor> p) {
          return std::make_unique<torch::optim::SGD>(std::move(p), torch::optim::SGDOptions(lr).momentum(0.9));
        };
      };
      contenders.push_back(sgd);
    }
    if (weights.empty()) {
      for (auto memory : fo::pretrained_memories()) {
        contenders.push_back(learned("mnemosyne-" + fo::memory_name(memory), fo::load_pretrained_model(memory)));
      }
    }
    for (const auto& [name, path] : weights) contenders.push_back(learned(name, fo::load_model(path)));
    if (tune_learned) {
      // Equal tuning budget: the same seeds and a 7-point grid, over the step multiplier.
      auto tuned = learned("mnemosyne-flt (lr tuned)", fo::load_pretrained_model(fo::Memory::kFLT));
      tuned.tune = true;
      tuned.grid = fo::multiplier_grid();
      contenders.push_back(tuned);
    }

    std::vector<fo::EvalTask> tasks;
    for (auto& t : fo::held_out_tasks()) {
      if (only.empty() || only.count(t.name)) tasks.push_back(std::move(t));
    }
    if (tasks.empty()) usage("no task matches --tasks");
    std::fprintf(stderr, "evaluating %zu optimizers on %zu held-out tasks (%lld seeds, lr tuned on %lld)\n",
                 contenders.size(), tasks.size(), static_cast<long long>(options.eval_seeds),
                 static_cast<long long>(options.tuning_seeds));
    const auto rows = fo::evaluate(tasks, contenders, options);

    std::filesystem::create_directories(out);
    std::printf("\n%-18s %-22s %9s %14s %14s %9s %5s %5s\n", "task", "optimizer", "lr", "median final",
                "steps->target", "win rate", "ties", "div");
    struct Tally {
      int won = 0, tied = 0, tasks = 0;
    };
    std::map<std::string, Tally> tally;  // per contender
    std::FILE* csv = std::fopen((out + "/eval.csv").c_str(), "w");
    TORCH_CHECK(csv, "flt-eval-optim: cannot write ", out, "/eval.csv");
    std::fprintf(csv, "task,optimizer,lr,median_final,median_steps_to_target,win_rate,tie_rate,diverged,meta_objective\n");
    for (const auto& r : rows) {
      std::printf("%-18s %-22s %9.2g %14.4g %14.0f %8.0f%% %4.0f%% %5lld\n", r.task.c_str(), r.contender.c_str(),
                  r.lr, r.median_final, r.median_steps_to_target, 100 * r.win_rate, 100 * r.tie_rate,
                  static_cast<long long>(r.diverged));
      std::fprintf(csv, "%s,%s,%g,%g,%g,%g,%g,%lld,%g\n", r.task.c_str(), r.contender.c_str(), r.lr, r.median_final,
                   r.median_steps_to_target, r.win_rate, r.tie_rate, static_cast<long long>(r.diverged),
                   r.meta_objective);
      auto& t = tally[r.contender];
      t.tasks += 1;
      if (r.win_rate > 0.5) t.won += 1;
      else if (r.win_rate + r.tie_rate > 0.5) t.tied += 1;  // no clear majority either way, mostly ties
    }
    std::fclose(csv);
    std::printf("\nmeta-objective (mean over tasks, seeds and steps of log(loss / start); lower is better):\n");
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
    std::printf("\ntasks where the optimizer beats tuned Adam on most seeds (a final loss within %.1g relative\n"
                "of Adam's is a tie; \"tied\" = tasks not won where wins and ties make a majority):\n",
                fo::kTieTolerance);
    for (const auto& c : contenders) {
      if (c.name == contenders[0].name) continue;
      const auto& t = tally[c.name];
      std::printf("  %-22s %d / %d (%.0f%%), tied %d\n", c.name.c_str(), t.won, t.tasks, 100.0 * t.won / t.tasks,
                  t.tied);
    }

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
    flt::demos::Canvas canvas(columns * panel_w, legend_h + ((panels + columns - 1) / columns) * panel_h);
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
      flt::demos::plot_panel(canvas, (t % columns) * panel_w, legend_h + (t / columns) * panel_h, panel_w,
                             panel_h, tasks[t].name, series, /*log_y=*/true);
    }
    canvas.save(out + "/eval.png");
    std::printf("\nwrote %s/eval.csv and %s/eval.png\n", out.c_str(), out.c_str());
  } catch (const c10::Error& e) {
    std::fprintf(stderr, "flt-eval-optim: %s\n", e.what_without_backtrace());
    return 1;
  }
  return 0;
}
