#include "eval_real_suite.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "flt/detail/raster_plot.h"
#include "flt/detail/statistics.h"
#include "memory_views.h"

namespace fh = flt::harness;

namespace flt::tools {
namespace {

std::string verdict(int comparison) {
  return comparison > 0 ? "win" : comparison < 0 ? "loss" : "tie";
}

std::string speedup_text(double s) {
  if (std::isinf(s)) return "never";
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f", s);
  return text;
}

const fh::RunRow& find_row(const std::vector<fh::RunRow>& rows, const std::string& task,
                           const std::string& who) {
  for (const auto& r : rows) {
    if (r.task == task && r.contender == who) return r;
  }
  TORCH_CHECK(false, "flt-eval-optim: no result for ", who, " on ", task);
}

/// The contenders of the real suite: the learned ones the options name, the tuned baselines and
/// the no-tuning ones (`no_tuning`: what a user picks to avoid tuning).
struct RealContenders {
  std::vector<fh::RunContender> all;
  std::vector<std::string> no_tuning;
};

RealContenders real_contenders(const RealSuiteOptions& options) {
  RealContenders out;
  auto& contenders = out.all;
  if (options.weights.empty()) {
    contenders.push_back(fh::mnemosyne_contender("mnemosyne", "", options.design));
  }
  for (const auto& text : options.weights) {
    const auto spec = weights_spec(text, options.design);
    contenders.push_back(fh::mnemosyne_contender(spec.name, spec.file, spec.design));
  }
  if (options.known_length) {
    // The loop's cosine schedule on lr is the options' total_steps(run steps): the same
    // half cosine, applied by the loop because an optimizer factory does not see the run.
    auto told = fh::mnemosyne_contender("mnemosyne-total-steps", "", options.design);
    told.schedule = fh::Schedule::kCosine;
    contenders.push_back(std::move(told));
  }
  for (auto& c : fh::baseline_contenders()) contenders.push_back(std::move(c));
  // What a user picks to avoid tuning: Adam at its default and the self-tuning optimizers.
  out.no_tuning = {"adam-1e-3"};
  for (auto& c : fh::untuned_baseline_contenders()) {
    out.no_tuning.push_back(c.name);
    contenders.push_back(std::move(c));
  }
  return out;
}

/// Wins, ties and losses of one contender over the runs, and its per-run figures.
struct Tally {
  int vs_default[3] = {0, 0, 0}, vs_tuned[3] = {0, 0, 0}, vs_peer[3] = {0, 0, 0};  // W, T, L
  int late_rise = 0, diverged = 0;
  std::vector<double> speedups, peer_ratios;
};

/// One table per run (printed, and into DIR/eval-real.csv); returns each contender's tally.
std::map<std::string, Tally> print_run_tables(const std::vector<fh::TrainingRun>& runs,
                                              const RealContenders& real,
                                              const std::vector<fh::RunRow>& rows,
                                              const RealSuiteOptions& options) {
  const auto& contenders = real.all;
  const auto& no_tuning = real.no_tuning;
  const auto find = [&](const std::string& task, const std::string& who) -> const fh::RunRow& {
    return find_row(rows, task, who);
  };
  std::filesystem::create_directories(options.out);
  std::FILE* csv = std::fopen((options.out + "/eval-real.csv").c_str(), "w");
  TORCH_CHECK(csv, "flt-eval-optim: cannot write ", options.out, "/eval-real.csv");
  std::fprintf(csv,
               "task,family,optimizer,steps,lr,lr_from_cache,seeds,median_final,median_best,"
               "median_final_error,late_rise,diverged,seconds_per_run,vs_adam_1e-3,vs_best_tuned,"
               "vs_best_no_tuning,ratio_to_best_no_tuning,speedup_vs_adam_cosine\n");
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
                run.loss == fh::LossKind::kCrossEntropy ? "cross-entropy" : "MSE",
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
      const int vs_default = fh::compare_finals(r.median_final, adam.median_final);
      const int vs_tuned = fh::compare_finals(r.median_final, best_tuned.median_final);
      const int vs_peer = fh::compare_finals(r.median_final, peer);
      const double peer_ratio = r.median_final / peer;
      const double speed = fh::speedup(r, adam_cosine);
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

  return tally;
}

/// The summary over runs: wins, ties and losses against each reference, ratios, speed-ups.
void print_summary(const std::vector<fh::TrainingRun>& runs,
                   const std::vector<fh::RunContender>& contenders,
                   std::map<std::string, Tally>& tally) {
  std::printf(
      "\nsummary over %zu runs (median final held-out loss per run; a tie is within %.0f%% "
      "relative;\n\"best tuned\" = the better of adam-cosine and adamw-cosine on each run; "
      "speed-up = steps tuned\nadam-cosine needs to reach the optimizer's final held-out loss / "
      "its steps, \"never\" = not within\nits budget, so > 1; \"peer\" = the best of the other "
      "no-tuning optimizers\n(adam-1e-3, prodigy, prodigy-cosine, schedule-free-adamw with and "
      "without warm-up) on each run,\nratio = final loss / the peer's, median and worst over "
      "runs):\n",
      runs.size(), 100 * fh::kRunTieTolerance);
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
}

/// DIR/eval-real-curves.csv: the median over seeds at each evaluation step.
void write_curves(const std::vector<fh::RunRow>& rows, const std::string& out) {
  // Curves: median over seeds at each evaluation step.
  std::FILE* curves = std::fopen((out + "/eval-real-curves.csv").c_str(), "w");
  TORCH_CHECK(curves, "flt-eval-optim: cannot write ", out, "/eval-real-curves.csv");
  std::fprintf(curves, "task,optimizer,step,median_held_out,median_param_norm\n");
  for (const auto& r : rows) {
    for (size_t i = 0; i < r.curve_steps.size(); ++i) {
      std::fprintf(curves, "%s,%s,%lld,%.6g,%.6g\n", r.task.c_str(), r.contender.c_str(),
                   static_cast<long long>(r.curve_steps[i]), r.median_curve[i],
                   r.median_param_norm[i]);
    }
  }
  std::fclose(curves);
}

/// Per run, held-out loss and parameter norms side by side; all runs' losses in one figure; the
/// schedule design's memory views (returns whether a contender had one).
bool draw_figures(const std::vector<fh::TrainingRun>& runs,
                  const std::vector<fh::RunContender>& contenders,
                  const std::vector<fh::RunRow>& rows, const RealSuiteOptions& options) {
  const auto find = [&](const std::string& task, const std::string& who) -> const fh::RunRow& {
    return find_row(rows, task, who);
  };
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
  const auto x_label = [](flt::detail::Canvas& canvas, int x, int y, int w, int64_t steps) {
    canvas.text(x + 60, y, "0", {0, 0, 0});
    const std::string last = "step " + std::to_string(steps);
    canvas.text(x + w - 12 - stb_easy_font_width(const_cast<char*>(last.c_str())), y, last,
                {0, 0, 0});
  };
  for (const auto& run : runs) {
    flt::detail::Canvas probe(2 * panel_w, 1);
    const int legend_h = flt::detail::draw_legend(probe, 2 * panel_w, names);
    flt::detail::Canvas canvas(2 * panel_w, legend_h + panel_h + 14);
    flt::detail::draw_legend(canvas, 2 * panel_w, names);
    flt::detail::plot_panel(canvas, 0, legend_h, panel_w, panel_h,
                            run.name + ": held-out loss (log)", series(run.name, false), true);
    flt::detail::plot_panel(canvas, panel_w, legend_h, panel_w, panel_h,
                            "sum of parameter norms (log)", series(run.name, true), true);
    x_label(canvas, 0, legend_h + panel_h - 10, panel_w, run.steps);
    x_label(canvas, panel_w, legend_h + panel_h - 10, panel_w, run.steps);
    canvas.save(options.out + "/eval-real-" + run.name + ".png");
  }
  const int columns = std::min<int>(4, static_cast<int>(runs.size()));
  const int rows_n = (static_cast<int>(runs.size()) + columns - 1) / columns;
  const int small_w = 330, small_h = 220;
  flt::detail::Canvas probe(columns * small_w, 1);
  const int legend_h = flt::detail::draw_legend(probe, columns * small_w, names);
  flt::detail::Canvas overview(columns * small_w, legend_h + rows_n * small_h);
  flt::detail::draw_legend(overview, columns * small_w, names);
  for (size_t i = 0; i < runs.size(); ++i) {
    flt::detail::plot_panel(overview, static_cast<int>(i % columns) * small_w,
                            legend_h + static_cast<int>(i / columns) * small_h, small_w, small_h,
                            runs[i].name, series(runs[i].name, false), true);
  }
  overview.save(options.out + "/eval-real.png");
  // The second design's memories span the run: their view reaches the longest run's length.
  const auto views = schedule_views(contenders);
  if (!views.empty()) {
    int64_t longest = 0;
    for (const auto& run : runs) longest = std::max(longest, run.steps);
    write_memory_views(options.out, views, longest);
  }
  return !views.empty();
}

}  // namespace

WeightsSpec weights_spec(const std::string& spec, fh::MnemosyneDesign fallback) {
  const auto eq = spec.find('=');
  TORCH_CHECK(eq != std::string::npos && eq > 0,
              "flt-eval-optim: --weights expects NAME=FILE or NAME=DESIGN:FILE, got \"", spec,
              "\"");
  WeightsSpec out{spec.substr(0, eq), spec.substr(eq + 1), fallback};
  for (auto design :
       {fh::MnemosyneDesign::kCoordinateMemory, fh::MnemosyneDesign::kTensorSchedule}) {
    const auto prefix = fh::design_name(design) + ":";
    if (out.file.rfind(prefix, 0) == 0) {
      out.design = design;
      out.file = out.file.substr(prefix.size());
    }
  }
  return out;
}

void run_real_suite(const RealSuiteOptions& options) {
  std::vector<std::string> skipped;
  std::vector<fh::TrainingRun> runs;
  if (options.quick) {
    runs.push_back(fh::quick_training_run());
  } else {
    auto all = options.development
                   ? fh::development_training_runs(options.steps_scale, options.only)
                   : fh::held_out_training_runs(options.steps_scale, options.only, &skipped);
    for (size_t i = 0; i < all.size(); ++i) {
      if (static_cast<int64_t>(i) % options.parts == options.part)
        runs.push_back(std::move(all[i]));
    }
  }
  for (const auto& s : skipped) std::fprintf(stderr, "skipped %s\n", s.c_str());
  TORCH_CHECK(!runs.empty(), "flt-eval-optim: no real training runs to evaluate");
  const auto real = real_contenders(options);
  const auto& contenders = real.all;
  std::fprintf(stderr,
               "%s: %zu runs x %zu optimizers, %lld evaluation seeds, lr tuned on "
               "%lld other seeds%s%s\n",
               options.development ? "development runs" : "real training runs", runs.size(),
               contenders.size(), static_cast<long long>(options.eval.eval_seeds),
               static_cast<long long>(options.eval.tuning_seeds),
               options.eval.tuning_cache.empty() ? "" : ", tuning cache ",
               options.eval.tuning_cache.c_str());
  const auto rows = fh::evaluate_training_runs(runs, contenders, options.eval);
  auto tally = print_run_tables(runs, real, rows, options);
  print_summary(runs, contenders, tally);
  write_curves(rows, options.out);
  const bool memory_views = draw_figures(runs, contenders, rows, options);
  std::printf(
      "\nwrote %s/eval-real.csv, eval-real-curves.csv, eval-real.png, one eval-real-TASK.png per "
      "run%s\n",
      options.out.c_str(), memory_views ? ", memory.csv and memory-rpe.png" : "");
}

}  // namespace flt::tools
