// The transport bar every scene shares: play / step / reset, speed, seed, the state string and
// exports. What the buttons do is in logic/lab.h; this file only draws them.

#define GLFW_INCLUDE_NONE
#include <GLFW/glfw3.h>

#include <algorithm>
#include <fstream>

#include "app/app.h"
#include "app/panels.h"

namespace flt::viz {
namespace {

bool write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  return static_cast<bool>(out);
}

// Rebuilds the current scene from the scenario, paused.
void reset(LabState& lab) {
  apply_scenario(lab, lab.scenario, lab.scenario.scene);
}

// Keyboard transport (when no text field has focus): Space play/pause, S or Right step, R reset.
void transport_keys(LabState& lab) {
  if (ImGui::GetIO().WantTextInput) return;
  const SceneId scene = lab.scenario.scene;
  if (ImGui::IsKeyPressed(GLFW_KEY_SPACE, false))
    set_scene_playing(lab, scene, !scene_playing(lab, scene));
  if (ImGui::IsKeyPressed(GLFW_KEY_S) || ImGui::IsKeyPressed(GLFW_KEY_RIGHT))
    step_scene(lab, scene);
  if (ImGui::IsKeyPressed(GLFW_KEY_R, false)) reset(lab);
}

void export_buttons(AppState& s) {
  const SceneId scene = s.lab.scenario.scene;
  const std::string stem = s.export_dir + "/flt-lab-" + scene_key(scene);
  if (ImGui::Button("Export PNG")) {
    s.pending_screenshot = stem + ".png";
    s.screenshot_panel_only = false;
  }
  ImGui::SameLine();
  if (ImGui::Button("Export panel PNG")) {
    s.pending_screenshot = stem + "-panel.png";
    s.screenshot_panel_only = true;
  }
  ImGui::SameLine();
  ImGui::BeginDisabled(scene != SceneId::kArena && scene != SceneId::kTraining);
  if (ImGui::Button("Export CSV")) {
    const std::string path = stem + ".csv";
    const bool ok =
        write_text(path, scene == SceneId::kArena ? s.lab.arena.game.trajectories_csv()
                                                  : s.lab.training.session.curves_csv());
    s.lab.message = ok ? "wrote " + path : "could not write " + path;
  }
  ImGui::EndDisabled();
}

}  // namespace

void show_transport(AppState& s) {
  LabState& lab = s.lab;
  const SceneId scene = lab.scenario.scene;
  transport_keys(lab);  // every scene: play, step (a new random draw where that is the step), reset
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
    ImGui::SetClipboardText(encode_state(lab.scenario).c_str());
    lab.message = "state string copied to the clipboard";
  }
  ImGui::SameLine();
  if (ImGui::Button("Paste state")) {
    const char* clip = ImGui::GetClipboardText();
    apply_state_string(lab, clip ? clip : "");
  }
  ImGui::SameLine();
  export_buttons(s);
  ImGui::TextDisabled("state: %s", encode_state(lab.scenario).c_str());  // always visible
}

}  // namespace flt::viz
