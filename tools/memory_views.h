#pragma once
// flt-eval-optim's view of what the learned rules' memories see of the past (both designs): the
// discount per step and, for FLT, the learned RPE over step distance, as a CSV, a figure and a
// line per rule.

#include <torch/types.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "flt/detail/raster_plot.h"
#include "flt/optim/learned_schedule.h"
#include "flt/optim/mnemosyne.h"

namespace flt::tools {

/// A learned rule's memory over the step index, as the views below read it (both designs'
/// modules name these members alike).
struct MemoryView {
  std::string name;
  flt::optim::Memory memory = flt::optim::Memory::kNone;
  torch::Tensor discount_logit;
  flt::attention::FLTAttention flt{nullptr};
};

template <typename Module>
MemoryView memory_view(const std::string& name, const Module& module) {
  return {name, module->options.memory(), module->discount_logit, module->flt};
}

/// The memories of the ScheduleMnemosyne contenders (each makes an optimizer for one scalar to
/// read its schedule); the others are left out.
template <typename Contender>
std::vector<MemoryView> schedule_views(const std::vector<Contender>& contenders) {
  std::vector<MemoryView> views;
  for (const auto& c : contenders) {
    const auto optimizer = c.make(1.0)({torch::zeros({1}, torch::requires_grad())});
    const auto* scheduled = dynamic_cast<const flt::optim::ScheduleMnemosyne*>(optimizer.get());
    if (scheduled != nullptr) views.push_back(memory_view(c.name, scheduled->schedule()));
  }
  return views;
}

/// What the learned rules' memories see of the past: for every attention memory (FLT, Performer),
/// the discount gamma per step (an entry Delta steps old weighs gamma^Delta) and, for FLT, the
/// learned RPE f(Delta) over the step distance, and the two together, for Delta up to
/// `max_distance`. Writes DIR/memory.csv and DIR/memory-rpe.png; prints a line per rule.
inline void write_memory_views(const std::string& out, const std::vector<MemoryView>& rules,
                               int64_t max_distance) {
  torch::NoGradGuard no_grad;
  std::FILE* csv = std::fopen((out + "/memory.csv").c_str(), "w");
  TORCH_CHECK(csv, "flt-eval-optim: cannot write ", out, "/memory.csv");
  std::fprintf(csv, "optimizer,memory,gamma,delta,rpe,weight\n");
  std::vector<std::string> names;
  std::vector<std::vector<double>> rpe_series, weight_series;
  std::printf(
      "\nwhat the memories see (an entry Delta steps old weighs gamma^Delta, times f(Delta) "
      "for FLT):\n");
  for (const auto& [name, memory, discount_logit, flt_memory] : rules) {
    if (memory != flt::optim::Memory::kFLT && memory != flt::optim::Memory::kPerformer) continue;
    const double gamma = torch::sigmoid(discount_logit).item<double>();
    const auto weights =
        flt::optim::memory_weights(memory, discount_logit, flt_memory, max_distance).contiguous();
    const double* w = weights.data_ptr<double>();
    const std::vector<double> rpe(w, w + max_distance + 1),
        weight(w + max_distance + 1, w + 2 * (max_distance + 1));
    int64_t half_life = -1;
    for (int64_t d = 0; d <= max_distance; ++d) {
      if (half_life < 0 && std::abs(weight[d]) < 0.5 * std::abs(weight[0])) half_life = d;
      std::fprintf(csv, "%s,%s,%.6g,%lld,%.6g,%.6g\n", name.c_str(),
                   flt::optim::memory_name(memory).c_str(), gamma, static_cast<long long>(d),
                   rpe[d], weight[d]);
    }
    const std::string reach =
        half_life >= 0 ? "below half of Delta = 0's from Delta = " + std::to_string(half_life)
                       : "above half of Delta = 0's up to Delta = " + std::to_string(max_distance);
    std::printf("  %-22s %-9s gamma %.4f (1 / (1 - gamma) = %.1f steps); |weight| %s\n",
                name.c_str(), flt::optim::memory_name(memory).c_str(), gamma, 1.0 / (1.0 - gamma),
                reach.c_str());
    if (memory == flt::optim::Memory::kFLT) {
      names.push_back(name);
      rpe_series.push_back(rpe);
      weight_series.push_back(weight);
    }
  }
  std::fclose(csv);
  if (names.empty()) return;
  const int panel_w = 480, panel_h = 280;
  flt::detail::Canvas probe(2 * panel_w, 1);
  const int legend_h = flt::detail::draw_legend(probe, 2 * panel_w, names);
  flt::detail::Canvas canvas(2 * panel_w, legend_h + panel_h + 14);
  flt::detail::draw_legend(canvas, 2 * panel_w, names);
  flt::detail::plot_panel(canvas, 0, legend_h, panel_w, panel_h, "learned RPE f(Delta)", rpe_series,
                          false);
  flt::detail::plot_panel(canvas, panel_w, legend_h, panel_w, panel_h, "gamma^Delta f(Delta)",
                          weight_series, false);
  for (int panel = 0; panel < 2; ++panel) {
    canvas.text(panel * panel_w + 60, legend_h + panel_h - 10, "Delta = 0", {0, 0, 0});
    canvas.text(panel * panel_w + panel_w - 80, legend_h + panel_h - 10,
                std::to_string(max_distance) + " steps", {0, 0, 0});
  }
  canvas.save(out + "/memory-rpe.png");
}

}  // namespace flt::tools
