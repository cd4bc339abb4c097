#pragma once
// Small widgets the panels share: headings, sliders over doubles, menus over the library's
// enumerations, status lines.

#include <imgui.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace flt::viz {

inline const ImVec4 kHeadingColor(0.55f, 0.8f, 1.0f, 1.0f);
inline const ImVec4 kWarningColor(1.0f, 0.8f, 0.3f, 1.0f);
inline const ImVec4 kGoldColor(1.0f, 0.85f, 0.2f, 1.0f);       ///< stars
inline const ImVec4 kRunningColor(0.45f, 0.95f, 0.55f, 1.0f);  ///< "training", confirmations
inline constexpr ImU32 kBannerRed = IM_COL32(200, 40, 40, 255);

/// A racer's or series' colour.
ImU32 rgb(const std::array<uint8_t, 3>& c, uint8_t alpha = 255);

/// A coloured heading with a separator under it.
void section(const char* title);

/// SliderScalar over a double, logarithmic when `log`; `flags` adds ImGuiSliderFlags (e.g.
/// AlwaysClamp, so a value typed with Ctrl+click stays in range).
bool slider_double(const char* label, double* value, double lo, double hi, const char* format,
                   bool log, ImGuiSliderFlags flags = 0);

/// A combo box over `items` (e.g. the library's list of spectrum families); *index is clamped
/// into the list when drawn.
bool combo(const char* label, int* index, const std::vector<std::string>& items);

/// A combo box over the values 0 .. count - 1 of an enum, named by `name_of`.
template <typename Enum>
bool enum_combo(const char* label, Enum* value, int count, const char* (*name_of)(Enum)) {
  std::vector<std::string> names;
  for (int i = 0; i < count; ++i) names.emplace_back(name_of(static_cast<Enum>(i)));
  int index = static_cast<int>(*value);
  const bool changed = combo(label, &index, names);
  *value = static_cast<Enum>(index);
  return changed;
}

/// "computing..." while a scene's worker is busy, and the error it reported, if any.
void job_status(bool busy, const std::string& error);

/// `text` shortened with "..." to fit `width` pixels (fit_text); the full text as a tooltip when
/// shortened. Returns whether it was shortened.
bool fitted_text(const std::string& text, float width, bool disabled = false);
/// The shortened form of `text` for `width` pixels (for labels of selectables and combos).
std::string fitted(const std::string& text, float width);

/// A "details" line that opens to show technical readouts; returns whether it is open (then the
/// caller draws them and calls ImGui::TreePop()).
bool details(const char* id);

}  // namespace flt::viz
