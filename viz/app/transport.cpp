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

// The absolute form of `path` with its folder created; empty (and `error` set) when it cannot be.
std::string prepare_path(const std::string& path, std::string* error) {
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::absolute(path, ec);
  if (ec || path.empty()) {
    *error = "Could not export to '" + path + "': not a valid path";
    return {};
  }
  if (absolute.has_parent_path()) std::filesystem::create_directories(absolute.parent_path(), ec);
  if (ec) {
    *error = "Could not create " + absolute.parent_path().string() + ": " + ec.message();
    return {};
  }
  return absolute.string();
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
  const std::string path = default_export_path(s.export_dir, scene_key(s.lab.scenario.scene), what,
                                               extension, std::time(nullptr));
  std::snprintf(s.export_dialog.path, sizeof(s.export_dialog.path), "%s", path.c_str());
  s.export_dialog.kind = kind;
  s.export_dialog.open_requested = true;
}

}  // namespace

void run_export(AppState& s) {
  std::string error;
  const std::string path = prepare_path(s.export_dialog.path, &error);
  if (path.empty()) {
    confirm(s, error);
    return;
  }
  const SceneId scene = s.lab.scenario.scene;
  switch (s.export_dialog.kind) {
    case ExportDialog::Kind::kWindowPng:
    case ExportDialog::Kind::kPanelPng:
      s.pending_screenshot = path;  // confirmed when written, after the next frame renders
      s.screenshot_panel_only = s.export_dialog.kind == ExportDialog::Kind::kPanelPng;
      s.screenshot_skip_frames = 1;  // this frame still draws the dialog that asked for it
      break;
    case ExportDialog::Kind::kCsv: {
      const bool ok = write_text(path, scene_csv(s.lab, scene));
      confirm(s, ok ? "Wrote " + path : "Could not write " + path);
      break;
    }
  }
}

namespace {

void export_dialog(AppState& s) {
  if (s.export_dialog.open_requested) {
    ImGui::OpenPopup("Export");
    s.export_dialog.open_requested = false;
  }
  if (!ImGui::BeginPopupModal("Export", nullptr, ImGuiWindowFlags_AlwaysAutoResize)) return;
  static const char* kWhat[] = {"the window as a PNG", "the scene panel as a PNG",
                                "the data as CSV"};
  ImGui::Text("Export %s to:", kWhat[static_cast<int>(s.export_dialog.kind)]);
  ImGui::SetNextItemWidth(560);
  if (ImGui::IsWindowAppearing()) ImGui::SetKeyboardFocusHere();
  const bool enter = ImGui::InputText("##path", s.export_dialog.path, sizeof(s.export_dialog.path),
                                      ImGuiInputTextFlags_EnterReturnsTrue);
  std::error_code ec;
  ImGui::TextDisabled("= %s", std::filesystem::absolute(s.export_dialog.path, ec).string().c_str());
  ImGui::TextDisabled("(a relative path starts in the folder flt-lab was started from)");
  if (ImGui::Button("Save", ImVec2(100, 0)) || enter) {
    ImGui::CloseCurrentPopup();
    run_export(s);
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
  ImGui::BeginDisabled(scene != SceneId::kArena && scene != SceneId::kTraining);
  if (ImGui::Button("Export CSV...")) request_export(s, ExportDialog::Kind::kCsv);
  ImGui::EndDisabled();
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
    apply_state_string(lab, clip ? clip : "");
    confirm(s, lab.message == "state applied" ? "Applied the state string from the clipboard"
                                              : lab.message);
  }
  ImGui::SameLine();
  export_buttons(s);
  // always visible, on one line: the whole string in a tooltip and through Copy state
  fitted_text("state: " + encode_state(lab.scenario), ImGui::GetContentRegionAvail().x,
              /*disabled=*/true);
}

}  // namespace flt::viz
