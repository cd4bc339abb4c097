#include "app/widgets.h"

#include <algorithm>

#include "logic/interaction.h"

namespace flt::viz {

ImU32 rgb(const std::array<uint8_t, 3>& c, uint8_t alpha) {
  return IM_COL32(c[0], c[1], c[2], alpha);
}

void section(const char* title) {
  ImGui::Spacing();
  ImGui::TextColored(kHeadingColor, "%s", title);
  ImGui::Separator();
}

bool slider_double(const char* label, double* value, double lo, double hi, const char* format,
                   bool log, ImGuiSliderFlags flags) {
  return ImGui::SliderScalar(label, ImGuiDataType_Double, value, &lo, &hi, format,
                             flags | (log ? ImGuiSliderFlags_Logarithmic : ImGuiSliderFlags_None));
}

bool combo(const char* label, int* index, const std::vector<std::string>& items) {
  if (items.empty()) return false;
  *index = std::clamp(*index, 0, static_cast<int>(items.size()) - 1);
  const auto item = [](void* data, int i, const char** text) {
    *text = (*static_cast<const std::vector<std::string>*>(data))[i].c_str();
    return true;
  };
  return ImGui::Combo(label, index, item, const_cast<std::vector<std::string>*>(&items),
                      static_cast<int>(items.size()));
}

void job_status(bool busy, const std::string& error) {
  if (busy) ImGui::TextColored(kWarningColor, "computing...");
  if (!error.empty()) ImGui::TextWrapped("error: %s", error.c_str());
}

std::string fitted(const std::string& text, float width) {
  return fit_text(text, width,
                  [](const std::string& t) { return ImGui::CalcTextSize(t.c_str()).x; });
}

bool fitted_text(const std::string& text, float width, bool disabled) {
  const std::string shown = fitted(text, width);
  if (disabled) {
    ImGui::TextDisabled("%s", shown.c_str());
  } else {
    ImGui::TextUnformatted(shown.c_str());
  }
  const bool shortened = shown != text;
  if (shortened && ImGui::IsItemHovered()) ImGui::SetTooltip("%s", text.c_str());
  return shortened;
}

bool details(const char* id) {
  ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
  const bool open = ImGui::TreeNode(id, "details");
  ImGui::PopStyleColor();
  return open;
}

}  // namespace flt::viz
