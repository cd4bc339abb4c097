// Lesson 6, SchoenbAt Fig. 4 and Fig. 5: the error of random Maclaurin feature attention (RMFA)
// against exact kernelized attention falls as the number of features D grows, for the five
// dot-product kernels; and SchoenbAt's speed-up over exact kernelized attention grows with the
// length L. Errors are shown next to the running mean (uniform attention), which after ppSBN's
// pre-normalisation is already close to the exact attention (PEERS.md).

#include "flt/attention/schoenbat.h"

#include <torch/types.h>
#include <torch/utils.h>

#include "lessons/common.h"

namespace flt::demos {

namespace fa = flt::attention;

namespace {

// The lesson's sizes (quick: fewer features, draws and lengths).
struct Sizes {
  std::vector<int64_t> features, dims = {10, 50, 200}, lengths;
  int repeats = 0, runs = 0;
  int64_t tokens = 100, speed_heads = 8, speed_dim = 50, speed_features = 64;
  int64_t raw_features = 32;  // in both feature lists: the exp kernel without ppSBN
};

Sizes sizes_for(bool quick) {
  Sizes z;
  z.features = quick ? std::vector<int64_t>{8, 32, 128, 512}
                     : std::vector<int64_t>{8, 16, 32, 64, 128, 256, 512};
  z.lengths = quick ? std::vector<int64_t>{500, 1000, 2000}
                    : std::vector<int64_t>{1000, 2000, 3000, 4000, 5000};
  z.repeats = quick ? 4 : 20;
  z.runs = quick ? 1 : 2;
  return z;
}

// Fig. 4's results beyond its CSV rows and metrics.
struct ErrorFigure {
  PlotPanel error_panel, dim_panel;
  std::map<std::string, std::vector<double>> errors_d50;
  double baseline_d50 = 0.0, raw_error = 0.0, raw_baseline = 0.0;
};

// Fig. 4: RMFA's error against exact kernelized attention as D grows, per kernel and input dim.
ErrorFigure error_figure(const LessonSettings& settings, const Sizes& z, Progress& progress,
                         LessonResult& result) {
  const auto& kernels = fa::schoenberg_kernels();
  const auto& features = z.features;
  const auto& dims = z.dims;
  const int repeats = z.repeats;
  const int64_t tokens = z.tokens, raw_features = z.raw_features;
  ErrorFigure fig{
      {"RMFA error vs features D (d = 50)", "features D", "mean |error|", true, true, {}},
      {"exp kernel: error vs D for input dims d", "features D", "mean |error|", true, true, {}},
      {}};
  auto& error_panel = fig.error_panel;
  auto& dim_panel = fig.dim_panel;
  auto& errors_d50 = fig.errors_d50;
  double& baseline_d50 = fig.baseline_d50;
  double& raw_error = fig.raw_error;
  double& raw_baseline = fig.raw_baseline;
  for (const auto& kernel : kernels) {
    for (int64_t d : dims) {
      std::vector<double> errs;
      double baseline = 0.0;
      for (int64_t f : features) {
        progress.stage("Fig. 4: " + kernel + ", d = " + std::to_string(d) +
                       ", D = " + std::to_string(f));
        double total = 0.0, base_total = 0.0;
        for (int rep = 0; rep < repeats; ++rep) {
          torch::manual_seed(settings.seed * 100003 + rep);
          const auto q = torch::randn({1, 1, tokens, d}, torch::kDouble);
          const auto k = torch::randn({1, 1, tokens, d}, torch::kDouble);
          const auto v = torch::randn({1, 1, tokens, d}, torch::kDouble);
          fa::SchoenbAttention module(
              fa::SchoenbAttentionOptions().kernel(kernel).features(f).heads(1).head_dim(d).seed(
                  settings.seed * 7 + rep));
          module->to(torch::kDouble);
          const auto qn = fa::ppsbn_pre(q, false), kn = fa::ppsbn_pre(k, false);
          const auto exact = fa::kernelized_attention(qn, kn, v, kernel);
          total += (module->rmfa(qn, kn, v, false) - exact).abs().mean().item<double>();
          base_total += (v.mean(2, true) - exact).abs().mean().item<double>();
          if (kernel == "exp" && d == 50 && f == raw_features) {
            // Without ppSBN: RMFA on the raw inputs, against kernelized attention on them.
            const auto exact_raw = fa::kernelized_attention(q, k, v, kernel);
            raw_error +=
                (module->rmfa(q, k, v, false) - exact_raw).abs().mean().item<double>() / repeats;
            raw_baseline += (v.mean(2, true) - exact_raw).abs().mean().item<double>() / repeats;
          }
        }
        errs.push_back(total / repeats);
        baseline = base_total / repeats;  // independent of D
        result.csv_rows.push_back({"4", kernel, std::to_string(d), std::to_string(f), "",
                                   format_number(errs.back()), format_number(baseline)});
        progress.advance(1, kernel);
      }
      std::vector<double> xs(features.begin(), features.end());
      if (d == 50) {
        error_panel.series.push_back({kernel, xs, errs});
        errors_d50[kernel] = errs;
        baseline_d50 = baseline;
        result.metrics["error_slope_" + kernel] = log_log_slope(xs, errs);
        result.metrics["error_max_features_" + kernel] = errs.back();
      }
      if (kernel == "exp") dim_panel.series.push_back({"d = " + std::to_string(d), xs, errs});
    }
  }
  std::vector<double> fx(features.begin(), features.end());
  error_panel.series.push_back(
      {"running mean", {fx.front(), fx.back()}, {baseline_d50, baseline_d50}, true});
  result.metrics["baseline_error_d50"] = baseline_d50;

  return fig;
}

// Fig. 5's per-kernel speed-ups over the lengths, and its panel.
struct SpeedFigure {
  PlotPanel speed_panel;
  std::map<std::string, std::vector<double>> speedups;
};

// Fig. 5: SchoenbAt's forward against exact kernelized attention as L grows.
SpeedFigure speed_figure(const LessonSettings& settings, const Sizes& z, Progress& progress,
                         LessonResult& result) {
  const auto& kernels = fa::schoenberg_kernels();
  const auto& lengths = z.lengths;
  const int runs = z.runs;
  const int64_t speed_heads = z.speed_heads, speed_dim = z.speed_dim,
                speed_features = z.speed_features;
  SpeedFigure fig{
      {"speed-up over exact kernelized attention vs L", "L", "speed-up", false, false, {}}, {}};
  auto& speed_panel = fig.speed_panel;
  auto& speedups = fig.speedups;
  for (const auto& kernel : kernels) {
    fa::SchoenbAttention module(fa::SchoenbAttentionOptions()
                                    .kernel(kernel)
                                    .features(speed_features)
                                    .heads(speed_heads)
                                    .head_dim(speed_dim)
                                    .seed(settings.seed));
    for (int64_t length : lengths) {
      progress.stage("Fig. 5: " + kernel + ", L = " + std::to_string(length));
      torch::manual_seed(settings.seed + length);
      const auto q = torch::randn({1, speed_heads, length, speed_dim});
      const auto k = torch::randn({1, speed_heads, length, speed_dim});
      const auto v = torch::randn({1, speed_heads, length, speed_dim});
      const auto qn = fa::ppsbn_pre(q, false), kn = fa::ppsbn_pre(k, false);
      const double exact =
          median_seconds([&] { fa::kernelized_attention(qn, kn, v, kernel); }, runs);
      const double fast = median_seconds([&] { module->forward(q, k, v); }, runs);
      speedups[kernel].push_back(exact / fast);
      result.csv_rows.push_back({"5", kernel, std::to_string(speed_dim),
                                 std::to_string(speed_features), std::to_string(length),
                                 format_number(exact / fast), ""});
      progress.advance(4, kernel);
    }
    std::vector<double> xs(lengths.begin(), lengths.end());
    speed_panel.series.push_back({kernel, xs, speedups[kernel]});
    result.metrics["speedup_first_" + kernel] = speedups[kernel].front();
    result.metrics["speedup_last_" + kernel] = speedups[kernel].back();
  }

  return fig;
}

// The comparison with the paper's claims.
void write_table(const Sizes& z, const ErrorFigure& errors, const SpeedFigure& speed,
                 LessonResult& result) {
  const auto& kernels = fa::schoenberg_kernels();
  const auto& features = z.features;
  const auto& lengths = z.lengths;
  const auto& errors_d50 = errors.errors_d50;
  const double baseline_d50 = errors.baseline_d50, raw_error = errors.raw_error,
               raw_baseline = errors.raw_baseline;
  const auto& speedups = speed.speedups;
  int falling = 0, beating_baseline = 0, growing = 0;
  std::string slopes, finals, speed_text;
  for (const auto& kernel : kernels) {
    const double slope = result.metrics["error_slope_" + kernel];
    falling += slope < 0;
    beating_baseline += errors_d50.at(kernel).back() < baseline_d50;
    growing += speedups.at(kernel).back() > speedups.at(kernel).front();
    slopes += (slopes.empty() ? "" : ", ") + kernel + " " + format_number(slope);
    finals +=
        (finals.empty() ? "" : ", ") + kernel + " " + format_number(errors_d50.at(kernel).back());
    speed_text += (speed_text.empty() ? "" : ", ") + kernel + " " +
                  format_number(speedups.at(kernel).front()) + "->" +
                  format_number(speedups.at(kernel).back());
  }
  const int n = static_cast<int>(kernels.size());
  const std::string d_max = std::to_string(features.back());
  result.table = {
      {"error slope vs D (d = 50), 5 kernels", "falls as D grows (Fig. 4)", slopes,
       falling == n ? "agrees" : "disagrees"},
      {"error at D = " + d_max + " (d = 50)", "small", finals, "see baseline"},
      {"running-mean baseline error (d = 50)", "- (not reported)", format_number(baseline_d50),
       beating_baseline == n ? "RMFA beats it for all kernels"
                             : "RMFA beats it for " + std::to_string(beating_baseline) + " of " +
                                   std::to_string(n) + " kernels"},
      {"exp kernel without ppSBN (raw N(0,1), D = 32)", "diverges (needs ppSBN)",
       format_number(raw_error) + " (running mean " + format_number(raw_baseline) + ")",
       raw_error > raw_baseline ? "agrees (worse than the baseline)" : "disagrees"},
      {"speed-up, L = " + std::to_string(lengths.front()) + " -> " + std::to_string(lengths.back()),
       "> 1, grows with L (Fig. 5)", speed_text,
       growing == n ? "agrees"
                    : "partly (grows for " + std::to_string(growing) + " of " + std::to_string(n) +
                          " kernels)"},
  };
}

}  // namespace

void run_schoenbat(const LessonSettings& settings, LessonResult& result) {
  torch::NoGradGuard no_grad;
  const Sizes z = sizes_for(settings.quick);
  const auto& kernels = fa::schoenberg_kernels();
  const auto& features = z.features;
  const auto& dims = z.dims;
  const auto& lengths = z.lengths;
  const int repeats = z.repeats, runs = z.runs;
  const int64_t tokens = z.tokens, speed_features = z.speed_features;
  result.setup = {
      "Fig. 4: Q, K, V ~ N(0, 1), " + std::to_string(tokens) +
          " tokens, input dim d = 10, 50, 200; ppSBN pre-normalises Q and K, then RMFA with D",
      "features vs exact kernelized attention on the same normalised inputs: mean |difference|, "
      "mean over " +
          std::to_string(repeats) + " draws.",
      "Trivial baseline: the running mean (every query averages all values: uniform attention).",
      "Fig. 5: H = 8, d = 50, D = " + std::to_string(speed_features) +
          "; time of SchoenbAt's forward (ppSBN, RMFA, post) vs exact kernelized attention on "
          "normalised inputs, median of " +
          std::to_string(runs) + " after a warm-up."};
  result.csv_columns = {"figure", "kernel", "d", "D", "L", "error_or_speedup", "baseline_error"};
  const double units = static_cast<double>(kernels.size() * dims.size() * features.size()) +
                       static_cast<double>(kernels.size() * lengths.size()) * 4.0;
  Progress progress(settings, units);

  const auto errors = error_figure(settings, z, progress, result);
  const auto speed = speed_figure(settings, z, progress, result);
  write_table(z, errors, speed, result);
  result.panels = {errors.error_panel, errors.dim_panel, speed.speed_panel};
}

}  // namespace flt::demos
