// Attention Lab: per head, the chosen variant's attention matrix next to the exact attention it
// approximates and their difference, with the variant's own knobs; computed on a worker.

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "app/panels.h"
#include "app/widgets.h"
#include "logic/variants.h"

namespace flt::viz {

namespace {

// The chosen variant's own options; true when one changed.
bool variant_knobs(AttentionLabSettings& settings) {
  bool changed = false;
  const std::string& variant = variant_name(settings.variant);
  if (variant == "softmax") {
    changed |= slider_double("logit scale", &settings.softmax_scale, 0.0, 2.0, "%.3f", false);
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("SoftmaxAttentionOptions::scale; 0 means 1/sqrt(D)");
  } else if (variant == "linear") {
    changed |= slider_double("eps", &settings.linear_eps, 1e-9, 1e-2, "%.1e", true);
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("LinearAttentionOptions::eps: floor of the normaliser");
  } else if (variant == "fourier") {
    // clamped: a typed 0 would mean "R from the head dimension" to the library, and below 0
    // nothing at all
    changed |= slider_double("R", &settings.fourier_r, 0.1, 20.0, "%.3g", true,
                             ImGuiSliderFlags_AlwaysClamp);
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip(
          "The kernel's width: phi(sin(R x) / (R x)), 0.1 to 20\n"
          "(FourierAttentionOptions::r_init)");
    changed |= enum_combo("phi", &settings.fourier_phi, kKernelPhiCount, kernel_phi_label);
  } else if (variant == "performer" || variant == "flt" || variant == "schoenbat") {
    changed |= ImGui::SliderInt(variant == "schoenbat" ? "features D" : "features m",
                                &settings.features, 4, 1024, "%d", ImGuiSliderFlags_Logarithmic);
    if (variant == "flt") {
      changed |= combo("spectrum", &settings.flt_family, rpe_family_labels());
      changed |= ImGui::SliderInt("components T", &settings.flt_components, 1, 8);
      changed |= ImGui::SliderInt("RPE features r", &settings.flt_rpe_features, 1, 512, "%d",
                                  ImGuiSliderFlags_Logarithmic);
    } else if (variant == "schoenbat") {
      changed |= combo("kernel", &settings.schoenbat_kernel, schoenbat_kernel_names());
    }
  }
  return changed;
}

}  // namespace

void show_attention(LabState& lab, AttentionView& view) {
  auto& settings = lab.scenario.attention;
  bool changed = false;
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  ImGui::BeginChild("attn_controls", ImVec2(360, avail.y - 4), true);
  const auto& variants = variant_names();
  ImGui::TextUnformatted("variant");
  for (int i = 0; i < static_cast<int>(variants.size()); ++i) {
    if (ImGui::RadioButton(variants[i].c_str(), settings.variant == i)) {
      settings.variant = i;
      changed = true;
    }
  }
  ImGui::Separator();
  changed |= enum_combo("input", &settings.input, kAttentionInputCount, attention_input_label);
  // The live model's probe sequence fixes L, D and the heads: those sliders would move nothing.
  const bool live = settings.input == AttentionInput::kLiveModel;
  const auto& shown = lab.attention.job.result();
  const auto live_tooltip = [&] {
    if (live && ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
      ImGui::SetTooltip(
          "The live model's probe sequence sets this: L = %d, %d heads (Live "
          "Training's task and model).",
          shown.length, shown.heads);
  };
  ImGui::BeginDisabled(live);
  changed |= ImGui::SliderInt("length L", &settings.length, 4, 256);
  live_tooltip();
  changed |= ImGui::SliderInt("head dim D", &settings.head_dim, 2, 64);
  live_tooltip();
  changed |= ImGui::SliderInt("heads", &settings.heads, 1, 4);
  live_tooltip();
  changed |= slider_double("q,k scale", &settings.input_scale, 0.1, 4.0, "%.2f", true);
  ImGui::EndDisabled();
  if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
    ImGui::SetTooltip(
        "q and k are multiplied by this before attention. Larger: sharper softmax, and the\n"
        "random-feature estimates' variance grows fast (Performer's error passes 1 at 1.0).\n"
        "The live model's q and k are used as the model computes them (no scale).");
  if (live && shown.valid)
    ImGui::TextDisabled("live model: L = %d, %d heads (its probe sequence)", shown.length,
                        shown.heads);
  changed |= variant_knobs(settings);
  changed |= ImGui::Checkbox("causal", &settings.causal);
  if (changed) rebuild_scene(lab, SceneId::kAttention);
  ImGui::Separator();
  const auto& result = lab.attention.job.result();
  job_status(lab.attention.job.busy(), result.error);
  if (!lab.attention.settings_error.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, kWarningColor);
    ImGui::TextWrapped("%s", lab.attention.settings_error.c_str());
    ImGui::PopStyleColor();
  }
  if (result.valid) {
    ImGui::Text("relative error vs exact %s", result.reference.c_str());
    ImGui::Text("  %.4g", result.relative_error);
    ImGui::PushStyleColor(ImGuiCol_Text, kHeadingColor);
    ImGui::TextWrapped("%s", attention_error_hint(result.variant).c_str());
    ImGui::PopStyleColor();
    if (details("attention_details")) {
      ImGui::TextDisabled("||A - A_exact||_F / ||A_exact||_F");
      ImGui::TextDisabled("max |difference| %.4g", result.diff_max_abs);
      ImGui::TextDisabled("forward: %s %.3f ms, softmax %.3f ms", result.variant.c_str(),
                          result.variant_ms, result.softmax_ms);
      ImGui::TextDisabled("(median of 5 calls, B=1, H=%d, L=%d)", result.heads, result.length);
      ImGui::TreePop();
    }
  }
  ImGui::EndChild();
  ImGui::SameLine();

  ImGui::BeginChild("attn_maps", ImVec2(0, avail.y - 4), false);
  if (result.valid) {
    // one row per head: the variant's matrix, exact softmax on the same q, k, and their difference
    const int L = result.length;
    const int heads = result.heads;
    while (view.maps.size() < static_cast<size_t>(3 * heads))
      view.maps.push_back(std::make_unique<Texture>());
    const ImVec2 region = ImGui::GetContentRegionAvail();
    const float row_height = (region.y - 10) / heads - ImGui::GetTextLineHeightWithSpacing() - 8;
    const float side = std::max(40.0f, std::min((region.x - 30) / 3.0f - 70, row_height));
    const float dmax = std::max(result.diff_max_abs, 1e-6f);
    if (ImGui::BeginTable("attn_grid", 3, ImGuiTableFlags_SizingFixedFit)) {
      for (int h = 0; h < heads; ++h) {
        const size_t offset = static_cast<size_t>(h) * L * L;
        const auto slice = [&](const std::vector<float>& all) {
          return std::vector<float>(all.begin() + offset,
                                    all.begin() + offset + static_cast<size_t>(L) * L);
        };
        const auto approx = slice(result.approx), exact = slice(result.exact),
                   diff = slice(result.diff);
        float hi = 1e-6f;
        for (float v : approx) hi = std::max(hi, v);
        for (float v : exact) hi = std::max(hi, v);
        auto& ta = *view.maps[3 * h];
        auto& te = *view.maps[3 * h + 1];
        auto& td = *view.maps[3 * h + 2];
        const int64_t version = lab.attention.version;
        heatmap_texture(ta, version, approx, L, L, 0.0f, hi, Colormap::kViridis, false);
        heatmap_texture(te, version, exact, L, L, 0.0f, hi, Colormap::kViridis, false);
        heatmap_texture(td, version, diff, L, L, -dmax, dmax, Colormap::kDiverging, false);
        const std::string head = "head " + std::to_string(h) + ": ";
        const std::string t1 = head + result.variant + " (materialize)",
                          t2 = head + "exact " + result.reference,
                          t3 = head + "difference (variant - exact)";
        ImGui::PushID(h);
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        const auto hover = heatmap("approx", ta, approx, L, L, 0.0f, hi, Colormap::kViridis, false,
                                   ImVec2(side + 64, side), t1.c_str());
        if (h == 0) view.hover = hover;
        ImGui::TableNextColumn();
        heatmap("exact", te, exact, L, L, 0.0f, hi, Colormap::kViridis, false,
                ImVec2(side + 64, side), t2.c_str());
        ImGui::TableNextColumn();
        heatmap("diff", td, diff, L, L, -dmax, dmax, Colormap::kDiverging, false,
                ImVec2(side + 64, side), t3.c_str());
        ImGui::PopID();
      }
      ImGui::EndTable();
    }
  } else if (!lab.attention.job.busy()) {
    ImGui::TextDisabled("no result yet");
  }
  ImGui::EndChild();
}

}  // namespace flt::viz
