// The transport bar every scene shares: play / step / reset, speed, seed, the state string and
// exports. What the buttons do is in logic/lab.h; this file only draws them.

#define GLFW_INCLUDE_NONE
#include <GLFW/glfw3.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "app/app.h"
#include "app/panels.h"
#include "app/widgets.h"

namespace flt::viz {
namespace {

bool write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  return static_cast<bool>(out);
}

// Creates the folder of `path` (the export folder the user chose); false with `error` set.
bool create_folder_of(const std::string& path, std::string* error) {
  std::error_code ec;
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  std::filesystem::create_directories(folder, ec);
  if (ec) *error = "Could not create the folder " + folder.string() + ": " + ec.message();
  return !ec;
}

// Rebuilds the current scene from the scenario, paused.
void reset(LabState& lab) {
  apply_scenario(lab, lab.scenario, lab.scenario.scene);
}

// Keyboard transport (when no text field has focus): Space play/pause, S or Right step, R reset.
// Presses come from GLFW's key callback too, so one released within the frame is not lost.
void transport_keys(AppState& s) {
  LabState& lab = s.lab;
  const auto presses = [&](int key, bool repeat) {
    return presses_this_frame(s.keys.take(key), ImGui::IsKeyPressed(key, repeat));
  };
  const int space = presses(GLFW_KEY_SPACE, false);
  const int step = presses(GLFW_KEY_S, true) + presses(GLFW_KEY_RIGHT, true);
  const int reset_presses = presses(GLFW_KEY_R, false);
  s.keys.clear();  // keys typed into a text field or not ours are not kept for later
  if (ImGui::GetIO().WantTextInput) return;
  const SceneId scene = lab.scenario.scene;
  for (int i = 0; i < space; ++i) set_scene_playing(lab, scene, !scene_playing(lab, scene));
  for (int i = 0; i < step; ++i) step_scene(lab, scene);
  if (reset_presses > 0) reset(lab);
}

// Opens the export dialog for `kind` with a new timestamped default path under export_dir.
void request_export(AppState& s, ExportDialog::Kind kind) {
  const char* what = kind == ExportDialog::Kind::kPanelPng ? "panel" : "";
  const char* extension = kind == ExportDialog::Kind::kCsv ? "csv" : "png";
  const std::string name =
      default_export_path("", scene_key(s.lab.scenario.scene), what, extension, std::time(nullptr));
  auto& dialog = s.export_dialog;
  std::snprintf(dialog.folder, sizeof(dialog.folder), "%s", s.export_dir.c_str());
  std::snprintf(dialog.name, sizeof(dialog.name), "%s", name.c_str());
  dialog.error.clear();
  dialog.kind = kind;
  dialog.open_requested = true;
}

}  // namespace

bool run_export(AppState& s) {
  auto& dialog = s.export_dialog;
  const std::string path = export_target(dialog.folder, dialog.name, &dialog.error);
  if (path.empty() || !create_folder_of(path, &dialog.error)) {
    report_failure(s, "Not exported: " + dialog.error);
    return false;
  }
  s.export_dir = dialog.folder;  // the next export offers the folder chosen now
  const SceneId scene = s.lab.scenario.scene;
  switch (s.export_dialog.kind) {
    case ExportDialog::Kind::kWindowPng:
    case ExportDialog::Kind::kPanelPng:
      s.pending_screenshot = path;  // confirmed when written, after the next frame renders
      s.screenshot_panel_only = s.export_dialog.kind == ExportDialog::Kind::kPanelPng;
      s.screenshot_skip_frames = 1;  // this frame still draws the dialog that asked for it
      break;
    case ExportDialog::Kind::kCsv:
      if (!write_text(path, scene_csv(s.lab, scene))) {
        report_failure(s, "Could not write " + path);
        return false;
      }
      confirm(s, "Wrote " + path);
      break;
  }
  return true;
}

namespace {

void export_dialog(AppState& s) {
  auto& dialog = s.export_dialog;
  if (dialog.open_requested) {
    ImGui::OpenPopup("Export");
    dialog.open_requested = false;
  }
  if (!ImGui::BeginPopupModal("Export", nullptr, ImGuiWindowFlags_AlwaysAutoResize)) return;
  static const char* kWhat[] = {"the window as a PNG", "the scene panel as a PNG",
                                "the data as CSV"};
  ImGui::Text("Export %s", kWhat[static_cast<int>(dialog.kind)]);
  ImGui::SetNextItemWidth(480);
  ImGui::InputText("folder", dialog.folder, sizeof(dialog.folder));
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip(
        "Created if missing. A relative folder starts in the folder flt-lab was "
        "started from.");
  // The name opens with its whole text selected (typing replaces it), wherever the cursor was
  // left in the last dialog.
  ImGui::SetNextItemWidth(480);
  if (ImGui::IsWindowAppearing()) ImGui::SetKeyboardFocusHere();
  const bool enter =
      ImGui::InputText("name", dialog.name, sizeof(dialog.name),
                       ImGuiInputTextFlags_EnterReturnsTrue | ImGuiInputTextFlags_AutoSelectAll);
  std::string problem;
  const std::string target = export_target(dialog.folder, dialog.name, &problem);
  if (target.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, kWarningColor);
    ImGui::TextWrapped("%s", problem.c_str());
    ImGui::PopStyleColor();
  } else {
    ImGui::TextDisabled("= %s", target.c_str());
  }
  if (ImGui::Button("Save", ImVec2(100, 0)) || enter) {
    if (run_export(s)) ImGui::CloseCurrentPopup();  // refused: the dialog stays, saying why
  }
  ImGui::SameLine();
  if (ImGui::Button("Cancel", ImVec2(100, 0)) || ImGui::IsKeyPressed(GLFW_KEY_ESCAPE, false))
    ImGui::CloseCurrentPopup();
  ImGui::EndPopup();
}

void export_buttons(AppState& s) {
  const SceneId scene = s.lab.scenario.scene;
  if (ImGui::Button("Export PNG...")) request_export(s, ExportDialog::Kind::kWindowPng);
  ImGui::SameLine();
  if (ImGui::Button("Export panel PNG...")) request_export(s, ExportDialog::Kind::kPanelPng);
  ImGui::SameLine();
  const std::string no_csv = csv_unavailable_reason(scene);
  ImGui::BeginDisabled(!no_csv.empty());
  if (ImGui::Button("Export CSV...")) request_export(s, ExportDialog::Kind::kCsv);
  ImGui::EndDisabled();
  if (!no_csv.empty() && ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled)) {
    ImGui::BeginTooltip();
    ImGui::PushTextWrapPos(ImGui::GetFontSize() * 30.0f);
    ImGui::TextUnformatted(no_csv.c_str());
    ImGui::PopTextWrapPos();
    ImGui::EndTooltip();
  }
  export_dialog(s);
}

}  // namespace

void show_transport(AppState& s) {
  LabState& lab = s.lab;
  const SceneId scene = lab.scenario.scene;
  transport_keys(s);  // every scene: play, step (a new random draw where that is the step), reset
  const bool playing = scene_playing(lab, scene);
  if (ImGui::Button(playing ? "Pause" : "Play ", ImVec2(64, 0)))
    set_scene_playing(lab, scene, !playing);
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("Space");
  ImGui::SameLine();
  if (ImGui::Button("Step", ImVec2(64, 0))) step_scene(lab, scene);
  s.probe.step_min = ImGui::GetItemRectMin();
  s.probe.step_max = ImGui::GetItemRectMax();
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("S or Right arrow");
  ImGui::SameLine();
  if (ImGui::Button("Reset", ImVec2(64, 0))) reset(lab);
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("R: this scene from the state string, paused");
  ImGui::SameLine();
  ImGui::SetNextItemWidth(150);
  float speed = lab.scenario.speed;
  if (ImGui::SliderFloat("speed", &speed, 0.25f, 64.0f, "x%.2f", ImGuiSliderFlags_Logarithmic))
    set_speed(lab, speed);
  ImGui::SameLine();
  ImGui::SetNextItemWidth(110);
  long long seed = static_cast<long long>(lab.scenario.seed);
  if (ImGui::InputScalar("seed", ImGuiDataType_S64, &seed, nullptr, nullptr, "%lld",
                         ImGuiInputTextFlags_EnterReturnsTrue)) {
    Scenario scenario = lab.scenario;  // the seed belongs to every scene
    scenario.seed = static_cast<uint64_t>(std::max(0LL, seed));
    apply_scenario(lab, scenario);
  }
  ImGui::SameLine();
  if (ImGui::Button("Copy state")) {
    const std::string state = encode_state(lab.scenario);
    ImGui::SetClipboardText(state.c_str());
    confirm(s, "Copied the state string (" + std::to_string(state.size()) +
                   " characters) to the clipboard: paste it with Paste state or pass it to "
                   "flt-lab --state");
  }
  ImGui::SameLine();
  if (ImGui::Button("Paste state")) {
    const char* clip = ImGui::GetClipboardText();
    if (apply_state_string(lab, clip ? clip : "")) {
      confirm(s, lab.message);  // with a note when it opens a level still locked
    } else {
      report_failure(s, lab.message);
    }
  }
  ImGui::SameLine();
  export_buttons(s);
  // always visible, on one line: the whole string in a tooltip and through Copy state
  fitted_text("state: " + encode_state(lab.scenario), ImGui::GetContentRegionAvail().x,
              /*disabled=*/true);
}

}  // namespace flt::viz
