// RPE Studio: an FLT spectrum family's g(xi), its RPE function f(delta) exactly and from r random
// features, the error as r grows, the 2-D shape, and the live model's learned spectra.

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "app/panels.h"
#include "app/widgets.h"

namespace flt::viz {
namespace {

// A colour from cold (old) to bright (new) for a history of curves.
ImU32 history_color(size_t i, size_t count) {
  const float t = count > 1 ? static_cast<float>(i) / static_cast<float>(count - 1) : 1.0f;
  const Rgba c = colormap(Colormap::kViridis, 0.3f + 0.7f * t);
  return to_imu32(c, static_cast<uint8_t>(90 + 165 * t));
}

// The learned spectra of the live model's heads (FLT attention only), from training snapshots.
void show_learned_spectra(const TrainingSession& training, RpeView& view, float width,
                          float height) {
  const auto snap = training.snapshot();
  section("Learned spectra during live training (layer 0 of the Live Training model)");
  if (snap.spectrum_heads == 0 || snap.spectra.empty()) {
    ImGui::TextDisabled(
        "The Live Training model does not use FLT attention. Choose \"flt\" as its attention in "
        "the\n"
        "Live Training tab and press Play: each head's spectrum g and RPE function f appear here\n"
        "as they are learned (old steps dark, the latest bright).");
    return;
  }
  view.head = std::clamp(view.head, 0, snap.spectrum_heads - 1);
  ImGui::SetNextItemWidth(120);
  ImGui::SliderInt("head", &view.head, 0, snap.spectrum_heads - 1);
  ImGui::SameLine();
  ImGui::TextDisabled("step %lld, %d frames (log-spaced)", static_cast<long long>(snap.step),
                      static_cast<int>(snap.spectra.size()));
  const size_t nx = snap.spectrum_xi.size(), nd = snap.spectrum_delta.size();
  std::vector<Series> g_series, f_series;
  for (size_t i = 0; i < snap.spectra.size(); ++i) {
    const auto& frame = snap.spectra[i];
    const ImU32 color = history_color(i, snap.spectra.size());
    const bool last = i + 1 == snap.spectra.size();
    const std::string label =
        (i == 0 || last) ? "step " + std::to_string(frame.step) : std::string();
    g_series.push_back({label,
                        std::vector<float>(frame.g.begin() + view.head * nx,
                                           frame.g.begin() + (view.head + 1) * nx),
                        color, snap.spectrum_xi});
    f_series.push_back({label,
                        std::vector<float>(frame.f.begin() + view.head * nd,
                                           frame.f.begin() + (view.head + 1) * nd),
                        color, snap.spectrum_delta});
  }
  line_plot("learned_g", g_series, ImVec2(width * 0.5f - 4, height), false, "xi", "g(xi)");
  ImGui::SameLine();
  line_plot("learned_f", f_series, ImVec2(width * 0.5f - 4, height), false, "delta (tokens)",
            "f(delta)");
}

}  // namespace

void show_rpe(LabState& lab, RpeView& view) {
  auto& settings = lab.scenario.rpe;
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  ImGui::BeginChild("rpe_controls", ImVec2(300, avail.y - 4), true);
  section("Spectrum g and RPE f (FLT)");
  bool changed = false;
  ImGui::SetNextItemWidth(170);
  changed |= combo("family", &settings.family, rpe_family_labels());
  ImGui::SetNextItemWidth(170);
  changed |= ImGui::SliderInt("components T", &settings.components, 1, 8);
  ImGui::BeginDisabled(!rpe_family_uses_smoothness(settings.family));
  ImGui::SetNextItemWidth(170);
  changed |= ImGui::SliderInt("smoothness k", &settings.smoothness, 1, 4);
  ImGui::EndDisabled();
  ImGui::SetNextItemWidth(170);
  changed |= slider_double("scale", &settings.scale, 0.05, 5.0, "%.3g", true);
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("sigma_0 (mixture), radius unit (local), lambda (kernels), s_0 (basis)");
  section("Random features");
  ImGui::SetNextItemWidth(170);
  changed |= ImGui::SliderInt("features r", &settings.features, 1, 4096, "%d",
                              ImGuiSliderFlags_Logarithmic);
  ImGui::SetNextItemWidth(170);
  changed |= enum_combo("proposal p", &settings.proposal, kRpeProposalCount, rpe_proposal_label);
  ImGui::SetNextItemWidth(170);
  changed |= slider_double("proposal scale", &settings.proposal_sigma, 0.05, 5.0, "%.3g", true);
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip(
        "Match the width of g: the estimate averages g(xi) / p(xi), whose variance\n"
        "explodes where p's tails are thinner than g's.");
  if (ImGui::Button("redraw features")) step_scene(lab, SceneId::kRpe);
  ImGui::SameLine();
  ImGui::TextDisabled("draw %d", settings.draw);
  section("Positions");
  int dim_choice = settings.position_dim - 1;
  changed |= ImGui::RadioButton("1-D", &dim_choice, 0);
  ImGui::SameLine();
  changed |= ImGui::RadioButton("2-D (Fig. 4)", &dim_choice, 1);
  settings.position_dim = dim_choice + 1;
  ImGui::SetNextItemWidth(170);
  changed |= slider_double("delta range", &settings.extent, 1.0, 32.0, "%.3g", true);
  ImGui::SetNextItemWidth(170);
  changed |= slider_double("xi range", &settings.xi_extent, 0.1, 10.0, "%.3g", true);
  ImGui::BeginDisabled(settings.position_dim != 2);
  ImGui::Checkbox("3-D surface", &settings.surface);
  ImGui::EndDisabled();
  if (changed) rebuild_scene(lab, SceneId::kRpe);
  const RpeCurves& c = lab.rpe.curves.result();
  ImGui::Separator();
  job_status(lab.rpe.curves.busy(), c.error);
  if (!c.exact.empty()) {
    ImGui::Text("max |f^ - f| with r = %d: %.3e", settings.features, c.max_error);
    float fmax = 0.0f;
    for (float v : c.exact) fmax = std::max(fmax, std::abs(v));
    ImGui::TextDisabled("(max |f| = %.3g; Monte Carlo: ~1/sqrt(r))", fmax);
  }
  // The swarm optimizer's learned RPE: f per head against the distance between two
  // particles in units of the particles' RMS distance from the swarm's centre;
  // positive f pulls a particle's attention to near ones.
  section("Swarm optimizer: learned f(|x_i - x_j|)");
  const SwarmRpeCurve& swarm = swarm_rpe_curve();
  std::vector<Series> swarm_series;
  for (size_t h = 0; h < swarm.f.size(); ++h)
    swarm_series.push_back({"head " + std::to_string(h), swarm.f[h],
                            h == 0 ? IM_COL32(255, 150, 70, 255) : IM_COL32(120, 200, 255, 255),
                            swarm.distance});
  line_plot("swarm_rpe", swarm_series, ImVec2(280, 150), false, "distance / RMS radius", nullptr);
  ImGui::TextDisabled("flt::optim::Swarm, %s", swarm.note.c_str());
  ImGui::EndChild();
  ImGui::SameLine();

  ImGui::BeginChild("rpe_plots", ImVec2(0, avail.y - 4), false);
  const ImVec2 region = ImGui::GetContentRegionAvail();
  const float learned_h = 200.0f;
  const float row_h =
      (region.y - learned_h - 5 * ImGui::GetTextLineHeightWithSpacing() - 20) * 0.5f;
  const float half = region.x * 0.5f - 6;
  if (!c.exact.empty()) {
    // row 1: g(xi); f exact vs the r-feature estimate
    ImGui::BeginGroup();
    ImGui::Text("spectrum g(xi): %s", rpe_family_label(settings.family).c_str());
    line_plot("g", {{"g", c.g, IM_COL32(120, 200, 255, 255), c.xi}}, ImVec2(half, row_h), false,
              "xi (first axis)", nullptr);
    ImGui::EndGroup();
    ImGui::SameLine();
    ImGui::BeginGroup();
    ImGui::Text("f(delta): exact vs %d random features (max error %.3g)", settings.features,
                c.max_error);
    line_plot("f",
              {{"exact f", c.exact, IM_COL32(120, 220, 120, 255), c.delta},
               {"estimate", c.approx, IM_COL32(255, 170, 60, 255), c.delta}},
              ImVec2(half, row_h), false, "delta (first axis)", nullptr);
    ImGui::EndGroup();
    // row 2: error vs r (log-log); the 2-D shape as a heatmap or a rotatable surface
    ImGui::BeginGroup();
    ImGui::TextUnformatted("max error vs features r (same seed; log axes)");
    std::vector<float> rs(c.error_features.begin(), c.error_features.end());
    std::vector<float> reference;  // C / sqrt(r) through the first point: the Monte Carlo rate
    for (float r : rs)
      reference.push_back(
          c.error_by_features.empty() ? 0.0f : c.error_by_features[0] * std::sqrt(rs[0] / r));
    line_plot("error_r",
              {{"max error", c.error_by_features, IM_COL32(255, 110, 110, 255), rs},
               {"1/sqrt(r)", reference, IM_COL32(160, 160, 170, 160), rs}},
              ImVec2(half, row_h), true, "r", nullptr, /*log_x=*/true);
    ImGui::EndGroup();
    ImGui::SameLine();
    ImGui::BeginGroup();
    if (c.grid > 0) {
      const float side = std::max(60.0f, std::min(row_h, half - 62));
      if (settings.surface) {
        ImGui::TextUnformatted("2-D f(delta) as a surface (drag to rotate)");
        surface_plot("rpe_surface", c.map_2d, c.grid, c.grid, ImVec2(side + 62, side), &view.yaw,
                     &view.pitch, Colormap::kViridis, false);
      } else {
        heatmap_texture(view.map, lab.rpe.version, c.map_2d, c.grid, c.grid, c.map_lo, c.map_hi,
                        Colormap::kViridis, false);
        heatmap("rpe_map", view.map, c.map_2d, c.grid, c.grid, c.map_lo, c.map_hi,
                Colormap::kViridis, false, ImVec2(side + 62, side),
                "2-D f(delta) over [-range, range]^2 (FLT paper Fig. 4)");
      }
    } else {
      ImGui::TextDisabled("choose 2-D positions for the 2-D RPE shape (FLT paper Fig. 4)");
    }
    ImGui::EndGroup();
  } else if (!lab.rpe.curves.busy()) {
    ImGui::TextDisabled("no curves yet");
  }
  show_learned_spectra(lab.training.session, view, region.x, learned_h - 40);
  ImGui::EndChild();
}

}  // namespace flt::viz
