// Kernel Explorer: FourierFormer's kernel phi(s(R x)) in 1-D and 2-D, its density estimator next
// to a Gaussian KDE and the true density, and its regression estimator (library computations).

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "app/panels.h"
#include "app/widgets.h"

namespace flt::viz {
namespace {

// A map of a correlated Gaussian's density (or its estimate) with the shared colour range.
void density_map(const char* id, Texture& texture, int64_t version,
                 const std::vector<float>& values, int grid, float lo, float hi, float side,
                 const char* title) {
  heatmap_texture(texture, version, values, grid, grid, lo, hi, Colormap::kViridis, false);
  heatmap(id, texture, values, grid, grid, lo, hi, Colormap::kViridis, false,
          ImVec2(side + 62, side), title);
}

// The left column: the kernel's and the estimators' settings, and the estimators' errors.
void show_kernel_controls(LabState& lab, float height) {
  auto& settings = lab.scenario.kernel;
  const KernelScene& kernel = lab.kernel;
  ImGui::BeginChild("kernel_controls", ImVec2(300, height), true);
  section("Kernel  phi(s(R x)),  s(x) = sin x / x");
  bool changed = false;
  ImGui::SetNextItemWidth(170);
  changed |= slider_double("R", &settings.R, 0.1, 20.0, "%.3g", true);
  ImGui::SetNextItemWidth(170);
  changed |= enum_combo("phi", &settings.phi, kKernelPhiCount, kernel_phi_label);
  KernelSettings followed = settings;
  followed.follow_r = true;
  const double followed_extent = kernel_view_extent(followed);
  if (ImGui::Checkbox("view follows R", &settings.follow_r)) {
    changed = true;
    // unticked: the knob starts from the view on screen, not from a value set long ago
    if (!settings.follow_r) settings.extent = std::clamp(followed_extent, 0.5, 20.0);
  }
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip(
        "The plots cover |x| <= 4 pi / R: the main lobe and three side lobes,\n"
        "whatever R is. Untick to set the extent yourself.");
  ImGui::BeginDisabled(settings.follow_r);
  ImGui::SetNextItemWidth(170);
  double extent = settings.follow_r ? followed_extent : settings.extent;  // what the plots use
  if (slider_double("extent", &extent, 0.5, 20.0, "%.2g", true) && !settings.follow_r) {
    settings.extent = extent;
    changed = true;
  }
  ImGui::EndDisabled();
  section("Estimators (FourierFormer Sec. 3)");
  ImGui::SetNextItemWidth(170);
  changed |= ImGui::SliderInt("samples N", &settings.samples, 10, 5000, "%d",
                              ImGuiSliderFlags_Logarithmic);
  ImGui::SetNextItemWidth(170);
  changed |= slider_double("correlation", &settings.rho, -0.95, 0.95, "%.2f", false);
  ImGui::SetNextItemWidth(170);
  changed |= slider_double("KDE bandwidth", &settings.bandwidth, 0.03, 2.0, "%.3g", true);
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("Gaussian KDE h; Scott's rule for 2-D: N^(-1/6) = %.3g",
                      std::pow(static_cast<double>(settings.samples), -1.0 / 6.0));
  ImGui::SetNextItemWidth(170);
  changed |= slider_double("noise", &settings.noise, 0.0, 1.0, "%.2f", false);
  if (ImGui::Button("new draw")) step_scene(lab, SceneId::kKernel);
  if (changed) rebuild_scene(lab, SceneId::kKernel);
  const KernelEstimates& est = kernel.estimates.result();

  ImGui::Separator();
  if (!kernel.curves.error.empty()) ImGui::TextWrapped("kernel: %s", kernel.curves.error.c_str());
  job_status(kernel.estimates.busy(), est.error);
  if (est.valid) {
    ImGui::TextUnformatted("integrated squared error");
    ImGui::TextDisabled("(the paper's MISE, eq. 13, this draw)");
    if (est.density_error.empty()) {
      ImGui::Text("  Fourier  %.3e", est.fourier_mise);
    } else {
      ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
      ImGui::TextWrapped("  Fourier  none for this phi (see the map)");
      ImGui::PopStyleColor();
    }
    ImGui::Text("  KDE      %.3e", est.kde_mise);
    ImGui::Text("regression MSE  %.3e", est.reg_mse);
    ImGui::TextDisabled("theory: R ~ N^(1/4) for 2-D density\n(N^(1/4) = %.2f here)",
                        std::pow(static_cast<double>(settings.samples), 0.25));
    if (!est.density_error.empty() && details("kernel_details")) {
      ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
      ImGui::TextWrapped("the library: %s", est.density_error.c_str());
      ImGui::PopStyleColor();
      ImGui::TreePop();
    }
  }
  ImGui::EndChild();
}

// Row 1: the 1-D kernel, the 2-D kernel, the regression estimate.
void show_kernel_row(LabState& lab, KernelView& view, const ImVec2& region, float row_h) {
  const auto& settings = lab.scenario.kernel;
  const KernelScene& kernel = lab.kernel;
  const KernelEstimates& est = kernel.estimates.result();
  const auto& c = kernel.curves;
  const float map_side = std::max(60.0f, std::min(row_h, region.x * 0.28f - 62));
  const float plot_w = (region.x - map_side - 62 - 24) * 0.5f;
  ImGui::BeginGroup();
  // titles are shortened to their plot's width (full text in a tooltip): a long one must not push
  // the plots beside it off the window
  fitted_text(std::string("K(x) = phi(s(R x)) / phi(1), phi = ") + kernel_phi_label(settings.phi) +
                  ", R = " + tick_label(settings.R),
              plot_w);
  line_plot("kernel1d", {{"kernel", c.kernel_1d, IM_COL32(255, 170, 60, 255), c.xs}},
            ImVec2(plot_w, row_h), false, "x", nullptr);
  ImGui::EndGroup();
  ImGui::SameLine();
  ImGui::BeginGroup();
  if (c.grid > 0) {
    heatmap_texture(view.kernel_map, kernel.curves_version, c.kernel_2d, c.grid, c.grid, c.lo, c.hi,
                    Colormap::kViridis, false);
    heatmap("kernel2d", view.kernel_map, c.kernel_2d, c.grid, c.grid, c.lo, c.hi,
            Colormap::kViridis, false, ImVec2(map_side + 62, map_side),
            fitted("2-D kernel K(x, y) / K(0, 0)", map_side + 62).c_str());
  }
  ImGui::EndGroup();
  ImGui::SameLine();
  ImGui::BeginGroup();
  fitted_text(
      "regression: f(x) = sin 2x, N = " + std::to_string(settings.samples) + " noisy samples",
      plot_w);
  if (est.valid) {
    line_plot("regression",
              {{"samples", est.reg_sample_y, IM_COL32(150, 150, 160, 150), est.reg_sample_x, true},
               {"f", est.reg_truth, IM_COL32(120, 220, 120, 255), est.reg_x},
               {"Fourier estimate", est.reg_fourier, IM_COL32(255, 170, 60, 255), est.reg_x}},
              ImVec2(plot_w, row_h), false, "x", nullptr);
  } else {
    ImGui::Dummy(ImVec2(plot_w, row_h));
  }
  ImGui::EndGroup();
}

// Row 2: the true density with the samples, the Fourier estimate and the KDE, one colour range.
void show_density_row(LabState& lab, KernelView& view, const ImVec2& region, float row_h) {
  const auto& settings = lab.scenario.kernel;
  const KernelScene& kernel = lab.kernel;
  const KernelEstimates& est = kernel.estimates.result();
  if (est.valid && est.grid > 0) {
    const float side = std::max(60.0f, std::min(row_h, (region.x - 3 * 70) / 3.0f));
    ImGui::BeginGroup();
    const std::string truth_title =
        "true density, rho = " + std::to_string(settings.rho).substr(0, 5);
    density_map("truth", view.truth_map, kernel.estimates_version, est.truth, est.grid, est.lo,
                est.hi, side, truth_title.c_str());
    // the samples over the true density (at most 600 of them)
    const ImVec2 mn = ImGui::GetItemRectMin();
    ImDrawList* draw = ImGui::GetWindowDrawList();
    draw->PushClipRect(mn, ImVec2(mn.x + side, mn.y + side), true);
    const size_t count = est.samples_xy.size() / 2;
    const size_t stride = std::max<size_t>(1, count / 600);
    const float scale = side / static_cast<float>(2 * kDensityExtent);
    for (size_t i = 0; i < count; i += stride) {
      const float x = est.samples_xy[2 * i], y = est.samples_xy[2 * i + 1];
      draw->AddCircleFilled(ImVec2(mn.x + (x + static_cast<float>(kDensityExtent)) * scale,
                                   mn.y + (static_cast<float>(kDensityExtent) - y) * scale),
                            1.5f, IM_COL32(255, 255, 255, 140), 4);
    }
    draw->PopClipRect();
    ImGui::EndGroup();
    ImGui::SameLine();
    ImGui::BeginGroup();
    if (est.density_error.empty()) {
      const std::string title = std::string("Fourier estimate (") + kernel_phi_label(settings.phi) +
                                ", R = " + tick_label(settings.R) + ")";
      density_map("fourier", view.fourier_map, kernel.estimates_version, est.fourier, est.grid,
                  est.lo, est.hi, side, title.c_str());
    } else {
      ImGui::TextUnformatted("Fourier estimate");
      ImGui::PushTextWrapPos(ImGui::GetCursorPosX() + side);
      ImGui::TextColored(kWarningColor, "%s", est.density_hint.c_str());
      ImGui::PopTextWrapPos();
      ImGui::Dummy(ImVec2(side + 62, 0));
    }
    ImGui::EndGroup();
    ImGui::SameLine();
    ImGui::BeginGroup();
    const std::string kde_title = "Gaussian KDE (h = " + tick_label(settings.bandwidth) + ")";
    density_map("kde", view.kde_map, kernel.estimates_version, est.kde, est.grid, est.lo, est.hi,
                side, kde_title.c_str());
    ImGui::EndGroup();
  } else if (!kernel.estimates.busy()) {
    ImGui::TextDisabled("no estimates yet");
  }
}

}  // namespace

void show_kernel(LabState& lab, KernelView& view) {
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  show_kernel_controls(lab, avail.y - 4);
  ImGui::SameLine();
  ImGui::BeginChild("kernel_plots", ImVec2(0, avail.y - 4), false);
  const ImVec2 region = ImGui::GetContentRegionAvail();
  const float text_h = ImGui::GetTextLineHeightWithSpacing();
  const float row_h = (region.y - 2 * text_h - 16) * 0.5f;
  show_kernel_row(lab, view, region, row_h);
  show_density_row(lab, view, region, row_h);
  ImGui::EndChild();
}

}  // namespace flt::viz
