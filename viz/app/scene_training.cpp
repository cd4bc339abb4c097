// Live Training: the model's knobs, loss and accuracy curves, and the attention maps of a fixed
// probe sequence, all read from the training worker's snapshots (the UI never waits on a step).

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "app/panels.h"
#include "app/widgets.h"
#include "logic/plot_math.h"
#include "logic/variants.h"

namespace flt::viz {

namespace {

// The second design's schedule as it trains: the step size of every tensor over the run (coloured
// by the part of the model it belongs to) and what the schedule's memory weighs an entry Delta
// steps back, over the run so far.
void show_schedule(const ScheduleTrace& trace, int64_t step, float plot_w) {
  constexpr ImU32 kGroupColors[] = {IM_COL32(120, 200, 255, 200), IM_COL32(255, 150, 80, 200),
                                    IM_COL32(140, 230, 120, 200), IM_COL32(200, 200, 200, 160),
                                    IM_COL32(230, 110, 230, 200)};
  std::vector<Series> sizes;
  bool named[std::size(kScheduleGroupNames)] = {};
  for (size_t i = 0; i < trace.tensors.size(); ++i) {
    const int group = trace.groups[i];
    sizes.push_back({named[group] ? "" : kScheduleGroupNames[group], trace.sizes[i],
                     kGroupColors[group], trace.steps});
    named[group] = true;
  }
  line_plot("schedule_sizes", sizes, ImVec2(plot_w, 200), true, "step", "step size");
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip(
        "Step size per tensor: the second design's step for each of the model's %zu\n"
        "tensors (lr included), coloured by the part of the model it belongs to,\n"
        "decided every step from the run's history; recorded every %lld steps.",
        trace.tensors.size(), static_cast<long long>(trace.grid.interval()));
  ImGui::SameLine();
  if (trace.weight.empty()) {
    ImGui::TextDisabled("(this schedule's %s memory has no step-distance weights)",
                        trace.memory.c_str());
    return;
  }
  // Over the run so far (at least 200 steps back), up to the trace's 2000.
  const size_t shown =
      std::min(trace.delta.size(), static_cast<size_t>(std::max<int64_t>(201, step + 1)));
  const auto head = [&](const std::vector<float>& v) {
    return std::vector<float>(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(shown));
  };
  char weight_label[64];
  std::snprintf(weight_label, sizeof(weight_label), "x gamma^Delta (%.4f)", trace.discount);
  line_plot("schedule_memory",
            {{"f(Delta)", head(trace.rpe), IM_COL32(255, 210, 90, 255), head(trace.delta)},
             {weight_label, head(trace.weight), IM_COL32(120, 220, 255, 255), head(trace.delta)}},
            ImVec2(plot_w, 200), false, "steps back (Delta)", "memory weight");
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip(
        "The schedule's %s memory reads the run's history: an entry Delta steps old\n"
        "weighs gamma^Delta f(Delta) before the content match (f: the RPE learned over\n"
        "step distance). Fixed by the schedule's weights; shown over the run so far.",
        trace.memory.c_str());
}

// The NaN banner over the bottom of the plots column, drawn last: a row inserted above the
// controls moved every control down under the pointer (the next click landed on another widget),
// and over the top of the plots it hid their legends. The attention maps' last rows matter least.
void show_nan_banner(const std::string& banner, ImVec2 origin, ImVec2 avail, TrainingView& view) {
  view.banner_min = ImVec2(0, 0);
  if (banner.empty()) return;
  const float left = 320 + ImGui::GetStyle().ItemSpacing.x;
  const float height =
      2 * ImGui::GetTextLineHeightWithSpacing() + 2 * ImGui::GetStyle().WindowPadding.y;
  ImGui::SetCursorScreenPos(ImVec2(origin.x + left, origin.y + avail.y - 4 - height));
  view.banner_min = ImGui::GetCursorScreenPos();
  ImGui::PushStyleColor(ImGuiCol_ChildBg, kBannerRed);
  ImGui::BeginChild("nan_banner", ImVec2(avail.x - left, height), true);
  ImGui::TextWrapped("%s", banner.c_str());
  ImGui::EndChild();
  ImGui::PopStyleColor();
}

}  // namespace

void show_training(LabState& lab, TrainingView& view) {
  auto& settings = lab.scenario.training;
  const auto snap = lab.training.session.snapshot();
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  ImGui::BeginChild("train_controls", ImVec2(320, avail.y - 4), true);
  // fixed widths leave the labels room ("payload length" was cut at the panel edge)
  ImGui::PushItemWidth(170);
  bool changed = false;
  changed |= enum_combo("task", &settings.task, kTrainingTaskCount, task_name);
  changed |= combo("attention", &settings.variant, variant_names());
  changed |= ImGui::SliderInt("layers", &settings.layers, 1, 4);
  int heads_index = settings.heads == 1 ? 0 : settings.heads == 2 ? 1 : 2;
  const char* head_choices[] = {"1", "2", "4"};
  if (ImGui::Combo("heads", &heads_index, head_choices, 3)) {
    settings.heads = 1 << heads_index;
    changed = true;
  }
  changed |= ImGui::SliderInt("payload length", &settings.length, 2, 16);
  changed |= enum_combo("optimizer", &settings.optimizer, kTrainingOptimizerCount, optimizer_name);
  if (settings.optimizer != TrainingOptimizer::kAdam) {
    changed |= slider_double("lr scale", &settings.learned_lr, 0.05, 10.0, "%.3g", true);
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip(
          settings.optimizer == TrainingOptimizer::kMnemosyne
              ? "flt::optim::CoordinateMnemosyne with the shipped pretrained\n"
                "meta-weights (a memory per coordinate);\n"
                "1 = the step size the meta-trained rule chose"
              : "flt::optim::ScheduleMnemosyne: a per-tensor schedule whose\n"
                "FLT memory spans the run, over Adam's moments (flt::optim::Mnemosyne);\n"
                "it ships untrained: the hand rule; 1 = its own step");
  } else {
    changed |= slider_double("Adam lr", &settings.lr, 1e-4, 1e-1, "%.2e", true);
  }
  if (changed) rebuild_scene(lab, SceneId::kTraining);
  ImGui::SliderFloat("smoothing", &settings.smoothing, 0.0f, 0.99f, "%.2f");
  ImGui::Checkbox("log loss axis", &settings.log_loss);
  ImGui::Separator();
  if (snap.playing) {
    ImGui::TextColored(kRunningColor, "training");
  } else {
    ImGui::TextDisabled("paused");
  }
  ImGui::SameLine();
  if (snap.steps_per_second > 0.0f) {
    ImGui::Text("step %lld   %.1f steps/s", static_cast<long long>(snap.step),
                snap.steps_per_second);
  } else {
    ImGui::Text("step %lld", static_cast<long long>(snap.step));
  }
  if (!snap.loss.empty())
    ImGui::Text("loss %.4f   accuracy %.3f", snap.loss.back(), snap.accuracy.back());
  if (ImGui::Button("Break it (inject NaN)")) lab.training.session.inject_nan_at(snap.step + 1);
  view.break_it_min = ImGui::GetItemRectMin();
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("Poisons the next step's loss to show the NaN guard.");
  ImGui::Separator();
  ImGui::Checkbox("compare with earlier runs", &view.compare);
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip(
        "The last run of each optimizer and attention variant stays on the plots as a\n"
        "faint curve: train with Adam, switch to Mnemosyne (or to another attention\n"
        "variant), and both share the plots.\n"
        "Changing the task forgets them.");
  if (!snap.previous.empty()) {
    ImGui::SameLine();
    if (ImGui::SmallButton("forget")) lab.training.session.clear_previous();
    for (const auto& run : snap.previous) {
      char line[200];
      std::snprintf(line, sizeof(line), "  %s: %zu steps, loss %.4f", run.label.c_str(),
                    run.loss.size(), run.loss.empty() ? 0.0f : run.loss.back());
      fitted_text(line, ImGui::GetContentRegionAvail().x, /*disabled=*/true);
    }
  }
  if (details("model_details")) {
    ImGui::TextWrapped("%s", snap.model.c_str());
    ImGui::TreePop();
  }
  ImGui::PopItemWidth();
  ImGui::EndChild();
  ImGui::SameLine();

  ImGui::BeginChild("train_plots", ImVec2(0, avail.y - 4), false);
  const ImVec2 right = ImGui::GetContentRegionAvail();
  const float plot_w = right.x * 0.5f - 8, plot_h = 250;
  // earlier runs first (smoothed, a colour each, the legend naming optimizer and variant), the
  // current run on top
  std::vector<Series> loss, accuracy;
  if (view.compare) {
    for (size_t i = 0; i < snap.previous.size(); ++i) {
      const auto& run = snap.previous[i];
      const Rgba c = earlier_run_color(static_cast<int>(i));
      const ImU32 color = IM_COL32(c[0], c[1], c[2], c[3]);
      loss.push_back({run.label, smooth_ema(run.loss, settings.smoothing), color});
      accuracy.push_back({run.label, smooth_ema(run.accuracy, settings.smoothing), color});
    }
  }
  const std::string now = snap.previous.empty() || !view.compare ? "" : " (" + snap.label + ")";
  loss.push_back({"loss (raw)", snap.loss, IM_COL32(255, 140, 60, 90)});
  loss.push_back(
      {"loss" + now, smooth_ema(snap.loss, settings.smoothing), IM_COL32(255, 140, 60, 255)});
  accuracy.push_back({"accuracy (raw)", snap.accuracy, IM_COL32(80, 200, 255, 90)});
  accuracy.push_back({"accuracy" + now, smooth_ema(snap.accuracy, settings.smoothing),
                      IM_COL32(80, 200, 255, 255)});
  line_plot("loss", loss, ImVec2(plot_w, plot_h), settings.log_loss, "step", "loss");
  ImGui::SameLine();
  line_plot("accuracy", accuracy, ImVec2(plot_w, plot_h), false, "step", "accuracy");
  view.plots_max_y = ImGui::GetItemRectMax().y;
  if (!snap.schedule.tensors.empty()) show_schedule(snap.schedule, snap.step, plot_w);
  // attention maps of the probe sequence, one per head of the chosen layer
  if (snap.layers > 0) {
    view.layer = std::clamp(view.layer, 0, snap.layers - 1);
    ImGui::SetNextItemWidth(160);
    ImGui::SliderInt("layer", &view.layer, 0, snap.layers - 1);
    ImGui::SameLine();
    ImGui::TextDisabled("attention of the probe sequence, updated every 5 steps (hover a cell)");
    const int L = snap.map_length;
    while (view.head_textures.size() < static_cast<size_t>(snap.heads)) {
      view.head_textures.push_back(std::make_unique<Texture>());
    }
    const float cell =
        std::min((right.x - 20) / snap.heads - 70, ImGui::GetContentRegionAvail().y - 30);
    for (int h = 0; h < snap.heads; ++h) {
      const size_t offset = static_cast<size_t>(view.layer * snap.heads + h) * L * L;
      std::vector<float> map(snap.maps.begin() + offset,
                             snap.maps.begin() + offset + static_cast<size_t>(L) * L);
      heatmap_texture(*view.head_textures[h], snap.maps_version * 64 + view.layer, map, L, L, 0.0f,
                      1.0f, Colormap::kViridis, false);
      if (h > 0) ImGui::SameLine();
      ImGui::BeginGroup();
      const std::string title =
          "layer " + std::to_string(view.layer) + " head " + std::to_string(h);
      heatmap(title.c_str(), *view.head_textures[h], map, L, L, 0.0f, 1.0f, Colormap::kViridis,
              false, ImVec2(cell + 62, cell), title.c_str());
      ImGui::EndGroup();
    }
  }
  ImGui::EndChild();
  show_nan_banner(snap.banner, origin, avail, view);
}

}  // namespace flt::viz
