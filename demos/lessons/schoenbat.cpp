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

void run_schoenbat(const LessonSettings& settings, LessonResult& result) {
  namespace fa = flt::attention;
  torch::NoGradGuard no_grad;
  const bool quick = settings.quick;
  const auto& kernels = fa::schoenberg_kernels();
  const std::vector<int64_t> features = quick ? std::vector<int64_t>{8, 32, 128, 512}
                                              : std::vector<int64_t>{8, 16, 32, 64, 128, 256, 512};
  const std::vector<int64_t> dims = {10, 50, 200};
  const int repeats = quick ? 4 : 20;
  const int64_t tokens = 100;
  const std::vector<int64_t> lengths = quick ? std::vector<int64_t>{500, 1000, 2000}
                                             : std::vector<int64_t>{1000, 2000, 3000, 4000, 5000};
  const int64_t speed_heads = 8, speed_dim = 50, speed_features = 64;
  const int runs = quick ? 1 : 2;
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

  // Fig. 4: errors.
  PlotPanel error_panel{
      "RMFA error vs features D (d = 50)", "features D", "mean |error|", true, true, {}};
  PlotPanel dim_panel{
      "exp kernel: error vs D for input dims d", "features D", "mean |error|", true, true, {}};
  double baseline_d50 = 0.0;
  std::map<std::string, std::vector<double>> errors_d50;
  const int64_t raw_features = 32;  // in both feature lists
  double raw_error = 0.0, raw_baseline = 0.0;
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

  // Fig. 5: speed-up.
  PlotPanel speed_panel{
      "speed-up over exact kernelized attention vs L", "L", "speed-up", false, false, {}};
  std::map<std::string, std::vector<double>> speedups;
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

  // Table.
  int falling = 0, beating_baseline = 0, growing = 0;
  std::string slopes, finals, speed_text;
  for (const auto& kernel : kernels) {
    const double slope = result.metrics["error_slope_" + kernel];
    falling += slope < 0;
    beating_baseline += errors_d50[kernel].back() < baseline_d50;
    growing += speedups[kernel].back() > speedups[kernel].front();
    slopes += (slopes.empty() ? "" : ", ") + kernel + " " + format_number(slope);
    finals +=
        (finals.empty() ? "" : ", ") + kernel + " " + format_number(errors_d50[kernel].back());
    speed_text += (speed_text.empty() ? "" : ", ") + kernel + " " +
                  format_number(speedups[kernel].front()) + "->" +
                  format_number(speedups[kernel].back());
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
  result.panels = {error_panel, dim_panel, speed_panel};
}

}  // namespace flt::demos
