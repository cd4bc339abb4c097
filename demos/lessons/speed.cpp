// Lesson 2, FLT Fig. 1: forward time and peak memory of one transformer layer with FLT, Performer
// and exact softmax attention as the length grows. The paper: FLT adds "negligible" memory over
// the regular Performer and scales linearly; softmax is quadratic.

#include <torch/types.h>
#include <torch/utils.h>

#include "flt/attention/transformer.h"
#include "flt/detail/allocation_counter.h"
#include "flt/runtime.h"
#include "lessons/common.h"

namespace flt::demos {

void run_speed(const LessonSettings& settings, LessonResult& result) {
  namespace fa = flt::attention;
  torch::NoGradGuard no_grad;
  const bool quick = settings.quick;
  const std::vector<int64_t> lengths = quick ? std::vector<int64_t>{128, 256, 512, 1024}
                                             : std::vector<int64_t>{256, 512, 1024, 2048, 4096};
  const int runs = quick ? 2 : 3;
  const int64_t embed = 256, heads = 4, ff = 1024, batch = 1;
  struct Variant {
    std::string name;
    fa::AttentionOptions options;
  };
  const std::vector<Variant> variants = {
      {"softmax", fa::SoftmaxAttentionOptions()},
      {"performer", fa::PerformerAttentionOptions().features(64)},
      {"flt", fa::FLTAttentionOptions().features(64).rpe_features(32)},
  };
  result.setup = {
      "One pre-LN transformer layer, causal: E = 256, H = 4 (D = 64), FFN 1024, batch 1",
      "(the paper: E = 768, 12 heads, FFN 3072, batch 8, on a GPU). Performer and FLT: m = 64",
      "features; FLT: r = 32 RPE features, Gaussian-mixture RPE. Forward only, no gradients;",
      "median of " + std::to_string(runs) +
          " runs after a warm-up; peak = LibTorch CPU bytes "
          "allocated above the inputs during one forward.",
      flt::runtime_summary(flt::init(/*quiet=*/true))};
  result.csv_columns = {"variant", "L", "forward_ms", "peak_mib"};

  Progress progress(settings, static_cast<double>(variants.size() * lengths.size()));
  PlotPanel time_panel{"forward time vs L (one layer)", "L", "ms", true, true, {}};
  PlotPanel memory_panel{"peak memory vs L (one layer)", "L", "MiB", true, true, {}};
  std::map<std::string, std::vector<double>> ms, mib;
  for (const auto& variant : variants) {
    torch::manual_seed(settings.seed);
    fa::TransformerLayer layer(
        fa::TransformerLayerOptions(embed, heads).ff_dim(ff).attention(variant.options));
    layer->eval();
    for (int64_t length : lengths) {
      progress.stage(variant.name + ", L = " + std::to_string(length));
      const auto x = torch::randn({batch, length, embed});
      fa::AttentionCall call;
      call.causal = true;
      const double seconds = median_seconds([&] { layer->forward(x, call); }, runs);
      const size_t bytes = flt::peak_cpu_bytes_during([&] { layer->forward(x, call); });
      ms[variant.name].push_back(1e3 * seconds);
      mib[variant.name].push_back(static_cast<double>(bytes) / (1 << 20));
      result.csv_rows.push_back({variant.name, std::to_string(length), format_number(1e3 * seconds),
                                 format_number(static_cast<double>(bytes) / (1 << 20))});
      progress.advance(1, variant.name);
    }
    std::vector<double> xs(lengths.begin(), lengths.end());
    time_panel.series.push_back({variant.name, xs, ms[variant.name]});
    memory_panel.series.push_back({variant.name, xs, mib[variant.name]});
  }
  const std::string at = "L = " + std::to_string(lengths.back());
  const double time_ratio = ms["flt"].back() / ms["performer"].back();
  const double memory_ratio = mib["flt"].back() / mib["performer"].back();
  const double softmax_time = ms["softmax"].back() / ms["flt"].back();
  const double softmax_memory = mib["softmax"].back() / mib["flt"].back();
  std::vector<double> xs(lengths.begin(), lengths.end());
  // Growth exponents over the two largest lengths (where the attention dominates the layer).
  const auto tail_slope = [&](const std::vector<double>& y) {
    const size_t n = y.size();
    return log_log_slope({xs[n - 2], xs[n - 1]}, {y[n - 2], y[n - 1]});
  };
  result.metrics = {{"flt_over_performer_time", time_ratio},
                    {"flt_over_performer_memory", memory_ratio},
                    {"softmax_over_flt_time", softmax_time},
                    {"softmax_over_flt_memory", softmax_memory},
                    {"time_exponent_softmax", tail_slope(ms["softmax"])},
                    {"time_exponent_flt", tail_slope(ms["flt"])},
                    {"memory_exponent_softmax", tail_slope(mib["softmax"])},
                    {"memory_exponent_flt", tail_slope(mib["flt"])}};
  result.table = {
      {"FLT / Performer peak memory, " + at, "\"negligible\" overhead (Fig. 1 right)",
       format_number(memory_ratio) + "x", verdict(memory_ratio < 1.2)},
      {"FLT / Performer forward time, " + at, "close to Performer (Fig. 1 left)",
       format_number(time_ratio) + "x",
       time_ratio < 1.2 ? "agrees"
                        : (time_ratio < 1.5 ? "partly (overhead visible)" : "disagrees")},
      {"softmax / FLT forward time, " + at, "> 1, growing with L",
       format_number(softmax_time) + "x", verdict(softmax_time > 1.0)},
      {"softmax / FLT peak memory, " + at, "> 1, growing with L",
       format_number(softmax_memory) + "x", verdict(softmax_memory > 1.0)},
      {"time growth exponent (last two L): softmax | FLT", "2 | 1 (O(L^2) vs O(L))",
       format_number(tail_slope(ms["softmax"])) + " | " + format_number(tail_slope(ms["flt"])),
       verdict(tail_slope(ms["softmax"]) > tail_slope(ms["flt"]))},
  };
  result.panels = {time_panel, memory_panel};
}

}  // namespace flt::demos
