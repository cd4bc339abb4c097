#include "app/app.h"

#define GLFW_INCLUDE_NONE
#include <GL/gl.h>
#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <stb_image_write.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>

#include "flt/runtime.h"
#include "logic/variant_catalog.h"

namespace flt::viz {
namespace {

constexpr ImU32 kBannerRed = IM_COL32(200, 40, 40, 255);
const char* const kSceneTitles[kSceneCount] = {"Attention Lab", "Kernel Explorer", "RPE Studio",
                                               "Live Training", "Optimizer Arena"};

// Headless and scripted frames advance by a fixed 1/60 s so renders are reproducible.
constexpr double kFixedFrameSeconds = 1.0 / 60.0;

ImU32 rgb(const std::array<uint8_t, 3>& c, uint8_t alpha = 255) {
  return IM_COL32(c[0], c[1], c[2], alpha);
}

void section(const char* title) {
  ImGui::Spacing();
  ImGui::TextColored(ImVec4(0.55f, 0.8f, 1.0f, 1.0f), "%s", title);
  ImGui::Separator();
}

bool slider_double(const char* label, double* value, double lo, double hi, const char* format,
                   bool log) {
  return ImGui::SliderScalar(label, ImGuiDataType_Double, value, &lo, &hi, format,
                             log ? ImGuiSliderFlags_Logarithmic : ImGuiSliderFlags_None);
}

void glfw_error(int code, const char* description) {
  std::fprintf(stderr, "GLFW error %d: %s\n", code, description);
}

bool write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  return static_cast<bool>(out);
}

// ---- transport bar (every scene) ----------------------------------------------------------------

void reset_scene(AppState& s) {
  switch (s.scenario.scene) {
    case SceneId::kArena:
      s.arena.load(s.scenario.arena, s.scenario.seed);
      s.arena_view.playing = false;
      s.arena_view.recorded_level = -1;
      break;
    case SceneId::kTraining:
      s.training.configure(s.scenario.training, s.scenario.seed);
      s.training_view.uploaded_version = -1;
      break;
    case SceneId::kAttention:
      s.attention_view.dirty = true;
      break;
    case SceneId::kKernel:
      s.kernel_view.playing = false;
      s.kernel_view.dirty = true;
      break;
    case SceneId::kRpe:
      s.rpe_view.playing = false;
      s.scenario.rpe.draw = 0;
      s.rpe_view.dirty = true;
      break;
  }
}

bool scene_playing(AppState& s) {
  switch (s.scenario.scene) {
    case SceneId::kArena:
      return s.arena_view.playing;
    case SceneId::kTraining:
      return s.training.snapshot().playing;
    case SceneId::kAttention:
      return s.attention_view.playing;
    case SceneId::kKernel:
      return s.kernel_view.playing;
    case SceneId::kRpe:
      return s.rpe_view.playing;
  }
  return false;
}

void set_scene_playing(AppState& s, bool playing) {
  if (s.scenario.scene == SceneId::kArena) s.arena_view.playing = playing;
  if (s.scenario.scene == SceneId::kTraining) s.training.set_playing(playing);
  if (s.scenario.scene == SceneId::kAttention) s.attention_view.playing = playing;
  if (s.scenario.scene == SceneId::kKernel) s.kernel_view.playing = playing;
  if (s.scenario.scene == SceneId::kRpe) s.rpe_view.playing = playing;
}

void step_scene(AppState& s) {
  const SceneId scene = s.scenario.scene;
  if (scene == SceneId::kArena) s.arena.step();
  if (scene == SceneId::kTraining) {
    if (s.training_worker) {
      s.training.request_step();
    } else {
      s.training.run_steps(1);
    }
  }
  if (scene == SceneId::kAttention) {  // a new draw of the random inputs
    s.scenario.seed += 1;
    s.attention_view.dirty = true;
  }
  if (scene == SceneId::kKernel) {  // a new draw of the estimators' samples
    s.scenario.seed += 1;
    s.kernel_view.dirty = true;
  }
  if (scene == SceneId::kRpe) {  // a new draw of the RPE random features
    s.scenario.rpe.draw += 1;
    s.rpe_view.dirty = true;
  }
}

// Playing scenes whose "step" is a fresh random draw: twice a second at x1.
bool play_tick(bool playing, double* clock, double dt, float speed) {
  if (!playing) return false;
  *clock += dt * speed;
  if (*clock < 0.5) return false;
  *clock = 0.0;
  return true;
}

// Keyboard transport (when no text field has focus): Space play/pause, S or Right step, R reset.
void transport_keys(AppState& s) {
  const ImGuiIO& io = ImGui::GetIO();
  if (io.WantTextInput) return;
  if (ImGui::IsKeyPressed(GLFW_KEY_SPACE, false)) set_scene_playing(s, !scene_playing(s));
  if (ImGui::IsKeyPressed(GLFW_KEY_S) || ImGui::IsKeyPressed(GLFW_KEY_RIGHT)) step_scene(s);
  if (ImGui::IsKeyPressed(GLFW_KEY_R, false)) reset_scene(s);
}

void show_transport(AppState& s) {
  const SceneId scene = s.scenario.scene;
  transport_keys(s);  // every scene: play, step (a new random draw where that is the step), reset
  const bool playing = scene_playing(s);
  if (ImGui::Button(playing ? "Pause" : "Play ", ImVec2(64, 0))) set_scene_playing(s, !playing);
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("Space");
  ImGui::SameLine();
  if (ImGui::Button("Step", ImVec2(64, 0))) step_scene(s);
  s.probe.step_min = ImGui::GetItemRectMin();
  s.probe.step_max = ImGui::GetItemRectMax();
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("S or Right arrow");
  ImGui::SameLine();
  if (ImGui::Button("Reset", ImVec2(64, 0))) reset_scene(s);
  ImGui::SameLine();
  ImGui::SetNextItemWidth(150);
  if (ImGui::SliderFloat("speed", &s.scenario.speed, 0.25f, 64.0f, "x%.2f",
                         ImGuiSliderFlags_Logarithmic)) {
    s.training.set_speed(s.scenario.speed);
  }
  ImGui::SameLine();
  ImGui::SetNextItemWidth(110);
  long long seed = static_cast<long long>(s.scenario.seed);
  if (ImGui::InputScalar("seed", ImGuiDataType_S64, &seed, nullptr, nullptr, "%lld",
                         ImGuiInputTextFlags_EnterReturnsTrue)) {
    s.scenario.seed = static_cast<uint64_t>(std::max(0LL, seed));
    reset_scene(s);
  }
  ImGui::SameLine();
  if (ImGui::Button("Copy state")) {
    s.state_text = encode_state(s.scenario);
    ImGui::SetClipboardText(s.state_text.c_str());
    s.message = "state string copied to the clipboard";
  }
  ImGui::SameLine();
  if (ImGui::Button("Paste state")) {
    const char* clip = ImGui::GetClipboardText();
    try {
      const Scenario scenario = decode_state(clip ? clip : "");
      s.scenario = scenario;
      s.select_scene_tab = true;
      s.arena.load(s.scenario.arena, s.scenario.seed);
      s.training.configure(s.scenario.training, s.scenario.seed);
      s.attention_view.dirty = true;
      s.kernel_view.dirty = true;
      s.rpe_view.dirty = true;
      s.message = "state applied";
    } catch (const std::exception& e) {
      s.message = e.what();
    }
  }
  ImGui::SameLine();
  if (ImGui::Button("Export PNG")) {
    s.pending_screenshot = s.export_dir + "/flt-lab-" + scene_key(scene) + ".png";
    s.screenshot_panel_only = false;
  }
  ImGui::SameLine();
  if (ImGui::Button("Export panel PNG")) {
    s.pending_screenshot = s.export_dir + "/flt-lab-" + scene_key(scene) + "-panel.png";
    s.screenshot_panel_only = true;
  }
  ImGui::SameLine();
  ImGui::BeginDisabled(scene != SceneId::kArena && scene != SceneId::kTraining);
  if (ImGui::Button("Export CSV")) {
    const std::string path = s.export_dir + "/flt-lab-" + scene_key(scene) + ".csv";
    const bool ok = write_text(
        path, scene == SceneId::kArena ? s.arena.trajectories_csv() : s.training.curves_csv());
    s.message = ok ? "wrote " + path : "could not write " + path;
  }
  ImGui::EndDisabled();
  // the state string, always visible and selectable
  s.state_text = encode_state(s.scenario);
  ImGui::TextDisabled("state: %s", s.state_text.c_str());
}

// ---- Optimizer Arena
// -----------------------------------------------------------------------------

void reload_arena(AppState& s) {
  s.arena.load(s.scenario.arena, s.scenario.seed);
  s.arena_view.recorded_level = -1;
}

void show_arena_map(AppState& s, ImVec2 size) {
  auto& view = s.arena_view;
  const auto& level = s.arena.level();
  const auto& grid = s.arena.grid();
  // the texture and contours follow the grid (rebuilt on every load)
  const int64_t grid_key = reinterpret_cast<intptr_t>(grid.values.data()) ^
                           (s.arena.level_index() << 20) ^ static_cast<int64_t>(grid.hi * 1000);
  if (grid_key != view.grid_version || !view.texture.ready()) {
    view.grid_version = grid_key;
    view.texture.update(grid_key,
                        colorize(grid.values, Colormap::kViridis, grid.lo, grid.hi, /*log=*/true),
                        grid.cols, grid.rows);
    // contour levels evenly spaced in log f
    std::vector<float> logs(grid.values.size());
    for (size_t i = 0; i < logs.size(); ++i)
      logs[i] = std::log10(std::max(grid.values[i], grid.lo));
    std::vector<float> levels;
    const float a = std::log10(grid.lo), b = std::log10(grid.hi);
    for (int i = 1; i < 12; ++i) levels.push_back(a + (b - a) * i / 12.0f);
    view.contours = contour_segments(logs, grid.rows, grid.cols, levels);
  }

  ImDrawList* draw = ImGui::GetWindowDrawList();
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const float side = std::min(size.x - 70, size.y);
  const ImVec2 min = origin, max(origin.x + side, origin.y + side);
  ImGui::InvisibleButton("arena_map", ImVec2(side + 70, side));
  const bool hovered = ImGui::IsItemHovered();
  draw->AddImage(view.texture.imgui_id(), min, max);
  if (s.scenario.arena.contours)
    draw_contours(draw, view.contours, grid.rows, grid.cols, min, max, IM_COL32(255, 255, 255, 70));
  colorbar(draw, ImVec2(max.x + 6, min.y), ImVec2(max.x + 20, max.y), grid.lo, grid.hi,
           Colormap::kViridis, true);
  const auto to_screen = [&](double x, double y) {
    return ImVec2(min.x + static_cast<float>((x - level.lo_x) / (level.hi_x - level.lo_x)) * side,
                  min.y + static_cast<float>((level.hi_y - y) / (level.hi_y - level.lo_y)) * side);
  };
  const auto to_world = [&](ImVec2 p) {
    return std::array<double, 2>{level.lo_x + (p.x - min.x) / side * (level.hi_x - level.lo_x),
                                 level.hi_y - (p.y - min.y) / side * (level.hi_y - level.lo_y)};
  };
  draw->PushClipRect(min, max, true);
  // trails fade with age: the newest 60 segments bright, older ones dimmer
  for (const auto& racer : s.arena.racers()) {
    const auto& path = racer.path;
    const size_t n = path.size();
    for (size_t i = 1; i < n; ++i) {
      const float age = static_cast<float>(n - 1 - i);
      const uint8_t alpha = static_cast<uint8_t>(60 + 195 * std::exp(-age / 60.0f));
      draw->AddLine(to_screen(path[i - 1][0], path[i - 1][1]), to_screen(path[i][0], path[i][1]),
                    rgb(racer.color, alpha), 2.0f);
    }
    if (racer.status != RacerStatus::kUnavailable) {
      const ImVec2 p = to_screen(path.back()[0], path.back()[1]);
      draw->AddCircleFilled(p, 5.5f, rgb(racer.color));
      draw->AddCircle(p, 5.5f, IM_COL32(0, 0, 0, 255), 0, 1.5f);
    }
  }
  // global minima and the start
  const auto& start = s.arena.racers().front().path.front();
  for (const auto& m : s.arena.minima()) {  // global minima: small white crosses
    const ImVec2 p = to_screen(m[0], m[1]);
    draw->AddLine(ImVec2(p.x - 5, p.y - 5), ImVec2(p.x + 5, p.y + 5), IM_COL32(255, 255, 255, 220),
                  2.0f);
    draw->AddLine(ImVec2(p.x - 5, p.y + 5), ImVec2(p.x + 5, p.y - 5), IM_COL32(255, 255, 255, 220),
                  2.0f);
  }
  const ImVec2 sp = to_screen(start[0], start[1]);
  draw->AddRect(ImVec2(sp.x - 7, sp.y - 7), ImVec2(sp.x + 7, sp.y + 7),
                IM_COL32(255, 255, 255, 255), 0, 0, 2.0f);
  draw->PopClipRect();
  draw->AddRect(min, max, IM_COL32(170, 170, 180, 255));

  // drag the start square to move the start (the race restarts from there)
  const ImVec2 mouse = ImGui::GetIO().MousePos;
  if (hovered && ImGui::IsMouseClicked(ImGuiMouseButton_Left) && std::abs(mouse.x - sp.x) < 12 &&
      std::abs(mouse.y - sp.y) < 12) {
    view.dragging_start = true;
  }
  if (view.dragging_start) {
    if (ImGui::IsMouseDown(ImGuiMouseButton_Left)) {
      const auto w =
          to_world(ImVec2(std::clamp(mouse.x, min.x, max.x), std::clamp(mouse.y, min.y, max.y)));
      s.scenario.arena.custom_start = true;
      s.scenario.arena.start_x = std::round(w[0] * 1000) / 1000;
      s.scenario.arena.start_y = std::round(w[1] * 1000) / 1000;
      reload_arena(s);
      view.playing = false;
    } else {
      view.dragging_start = false;
    }
  }
  if (hovered && mouse.x <= max.x) {
    const auto w = to_world(mouse);
    ImGui::SetTooltip("x=%.3f y=%.3f  f-f*=%.4g\n(drag the white square to move the start)", w[0],
                      w[1], s.arena.value_at(w[0], w[1]));
  }
}

void show_leaderboard(AppState& s) {
  auto rows = s.arena.leaderboard();
  const ImGuiTableFlags flags = ImGuiTableFlags_Sortable | ImGuiTableFlags_RowBg |
                                ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_SizingFixedFit;
  if (!ImGui::BeginTable("leaderboard", 6, flags)) return;
  ImGui::TableSetupColumn("#", ImGuiTableColumnFlags_DefaultSort, 0,
                          static_cast<ImGuiID>(LeaderboardColumn::kRank));
  ImGui::TableSetupColumn("racer", 0, 0, static_cast<ImGuiID>(LeaderboardColumn::kName));
  ImGui::TableSetupColumn("f-f*", 0, 0, static_cast<ImGuiID>(LeaderboardColumn::kValue));
  ImGui::TableSetupColumn("dist", 0, 0, static_cast<ImGuiID>(LeaderboardColumn::kDistance));
  ImGui::TableSetupColumn("steps", 0, 0, static_cast<ImGuiID>(LeaderboardColumn::kStepsToEpsilon));
  ImGui::TableSetupColumn("status", 0, 0, static_cast<ImGuiID>(LeaderboardColumn::kStatus));
  ImGui::TableHeadersRow();
  if (ImGuiTableSortSpecs* specs = ImGui::TableGetSortSpecs(); specs && specs->SpecsCount > 0) {
    sort_leaderboard(rows, static_cast<LeaderboardColumn>(specs->Specs[0].ColumnUserID),
                     specs->Specs[0].SortDirection == ImGuiSortDirection_Ascending);
  }
  for (const auto& row : rows) {
    const auto& racer = s.arena.racers()[row.racer];
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::Text("%d", row.rank);
    ImGui::TableNextColumn();
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(rgb(racer.color)), "%s", row.name.c_str());
    ImGui::TableNextColumn();
    if (row.status == RacerStatus::kUnavailable) {
      ImGui::TextDisabled("-");
    } else {
      ImGui::Text("%.3g", row.value);
    }
    ImGui::TableNextColumn();
    ImGui::Text("%.3f", row.distance);
    ImGui::TableNextColumn();
    if (row.steps_to_epsilon >= 0) {
      ImGui::Text("%d", row.steps_to_epsilon);
    } else {
      ImGui::TextDisabled("-");
    }
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(racer_status_name(row.status));
    if (!racer.note.empty() && ImGui::IsItemHovered()) ImGui::SetTooltip("%s", racer.note.c_str());
  }
  ImGui::EndTable();
}

void show_arena(AppState& s, double dt) {
  auto& view = s.arena_view;
  auto& settings = s.scenario.arena;
  if (view.playing) s.arena.advance(dt, s.scenario.speed);
  if (s.arena.finished()) {
    view.playing = false;
    if (view.recorded_level != s.arena.level_index()) {
      view.progress.record(s.arena.level_index(), s.arena.stars());
      view.recorded_level = s.arena.level_index();
    }
  }
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float map_size = std::min(avail.y - 8, avail.x * 0.55f);
  ImGui::BeginChild("arena_left", ImVec2(map_size + 80, avail.y - 4), false);
  if (settings.surface) {
    // a downsampled copy of the grid as a 3-D surface
    const auto& grid = s.arena.grid();
    const int stride = std::max(1, grid.rows / 48);
    std::vector<float> small;
    int rows = 0, cols = 0;
    for (int r = 0; r < grid.rows; r += stride, ++rows) {
      cols = 0;
      for (int c = 0; c < grid.cols; c += stride, ++cols)
        small.push_back(grid.values[static_cast<size_t>(r) * grid.cols + c]);
    }
    surface_plot("surface", small, rows, cols, ImVec2(map_size + 70, map_size), &view.yaw,
                 &view.pitch, Colormap::kViridis, true);
  } else {
    show_arena_map(s, ImVec2(map_size + 70, map_size));
  }
  ImGui::EndChild();
  ImGui::SameLine();
  ImGui::BeginChild("arena_right", ImVec2(0, avail.y - 4), false);
  const auto& levels = arena_levels();
  ImGui::SetNextItemWidth(240);
  if (ImGui::BeginCombo("level", levels[s.arena.level_index()].name.c_str())) {
    for (int i = 0; i < static_cast<int>(levels.size()); ++i) {
      const bool unlocked = view.progress.unlocked(i) || i <= settings.level;
      std::string label = levels[i].name + "  " +
                          std::string(static_cast<size_t>(view.progress.best_stars[i]), '*');
      if (!unlocked) label += "  (locked: earn a star on the level before)";
      if (ImGui::Selectable(label.c_str(), i == settings.level,
                            unlocked ? 0 : ImGuiSelectableFlags_Disabled)) {
        settings.level = i;
        settings.custom_start = false;
        reload_arena(s);
      }
    }
    ImGui::EndCombo();
  }
  const auto& level = s.arena.level();
  ImGui::TextWrapped("%s", level.hint.c_str());
  ImGui::Text("step %d / %d   par %d (the house Adam's steps to eps=%.0e)", s.arena.step_count(),
              level.max_steps, s.arena.par(), level.epsilon);
  const int stars = s.arena.stars();
  ImGui::Text("stars: ");
  ImGui::SameLine();
  for (int i = 0; i < 3; ++i) {
    ImGui::TextColored(i < stars ? ImVec4(1.0f, 0.85f, 0.2f, 1) : ImVec4(0.4f, 0.4f, 0.4f, 1),
                       i < stars ? "[*]" : "[ ]");
    ImGui::SameLine();
  }
  ImGui::NewLine();
  section("Your racer (SGD with momentum)");
  bool changed = ImGui::Checkbox("race", &settings.human_enabled);
  ImGui::SetNextItemWidth(200);
  changed |= slider_double("learning rate", &settings.human_lr, 1e-4, 1.0, "%.4g", true);
  ImGui::SetNextItemWidth(200);
  changed |= slider_double("momentum", &settings.human_momentum, 0.0, 0.99, "%.2f", false);
  if (changed) reload_arena(s);
  ImGui::Checkbox("click each step", &view.click_mode);
  if (view.click_mode) {
    ImGui::SameLine();
    if (ImGui::Button("My step")) s.arena.step_human();
  }
  ImGui::Checkbox("contours", &settings.contours);
  ImGui::SameLine();
  ImGui::Checkbox("3-D view", &settings.surface);
  ImGui::SameLine();
  if (ImGui::Button("level start")) {
    settings.custom_start = false;
    reload_arena(s);
  }
  section("Leaderboard (click a header to sort)");
  show_leaderboard(s);
  if (s.arena.finished()) {
    ImGui::TextColored(
        ImVec4(1.0f, 0.85f, 0.2f, 1), "Race over: %d star%s. %s", stars, stars == 1 ? "" : "s",
        view.progress.unlocked(s.arena.level_index() + 1) ? "Next level unlocked." : "");
  }
  section("How to play");
  ImGui::TextWrapped(
      "Drag the white square to choose the start, set your learning rate and momentum, press Play. "
      "Reach f - f* <= eps within par for 3 stars (2 par: 2 stars, the budget: 1 star). The "
      "learned optimizers (flt::optim::Mnemosyne with FLT, Performer and LSTM memory, pretrained) race too.");
  ImGui::EndChild();
}

// ---- Live Training
// -------------------------------------------------------------------------------

void show_training(AppState& s) {
  auto& settings = s.scenario.training;
  const auto snap = s.training.snapshot();
  if (!snap.banner.empty()) {
    ImGui::PushStyleColor(ImGuiCol_ChildBg, kBannerRed);
    ImGui::BeginChild("nan_banner", ImVec2(0, 30), true);
    ImGui::TextUnformatted(snap.banner.c_str());
    ImGui::EndChild();
    ImGui::PopStyleColor();
  }
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  ImGui::BeginChild("train_controls", ImVec2(320, avail.y - 4), true);
  bool changed = false;
  int task = static_cast<int>(settings.task);
  const char* tasks[kTrainingTaskCount];
  for (int i = 0; i < kTrainingTaskCount; ++i) tasks[i] = task_name(static_cast<TrainingTask>(i));
  changed |= ImGui::Combo("task", &task, tasks, kTrainingTaskCount);
  settings.task = static_cast<TrainingTask>(task);
  const auto& variants = attention_variants();
  if (ImGui::BeginCombo(
          "attention",
          variants[std::min<size_t>(settings.variant, variants.size() - 1)].name.c_str())) {
    for (const auto& v : variants) {
      if (ImGui::Selectable((v.name + (v.available ? "" : "  (" + v.note + ")")).c_str(),
                            v.index == settings.variant,
                            v.available ? 0 : ImGuiSelectableFlags_Disabled)) {
        settings.variant = v.index;
        changed = true;
      }
    }
    ImGui::EndCombo();
  }
  changed |= ImGui::SliderInt("layers", &settings.layers, 1, 4);
  int heads_index = settings.heads == 1 ? 0 : settings.heads == 2 ? 1 : 2;
  const char* head_choices[] = {"1", "2", "4"};
  if (ImGui::Combo("heads", &heads_index, head_choices, 3)) {
    settings.heads = 1 << heads_index;
    changed = true;
  }
  changed |= ImGui::SliderInt("payload length", &settings.length, 2, 16);
  int optimizer = static_cast<int>(settings.optimizer);
  const char* optimizers[kTrainingOptimizerCount];
  for (int i = 0; i < kTrainingOptimizerCount; ++i)
    optimizers[i] = optimizer_name(static_cast<TrainingOptimizer>(i));
  if (ImGui::Combo("optimizer", &optimizer, optimizers, kTrainingOptimizerCount)) {
    settings.optimizer = static_cast<TrainingOptimizer>(optimizer);
    changed = true;
  }
  if (settings.optimizer == TrainingOptimizer::kMnemosyne) {
    changed |= slider_double("lr scale", &settings.learned_lr, 0.05, 10.0, "%.3g", true);
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("flt::optim::Mnemosyne with the shipped pretrained meta-weights;\n"
                        "1 = the step size the meta-trained rule chose");
  } else {
    changed |= slider_double("Adam lr", &settings.lr, 1e-4, 1e-1, "%.2e", true);
  }
  if (changed) s.training.configure(settings, s.scenario.seed);
  ImGui::SliderFloat("smoothing", &settings.smoothing, 0.0f, 0.99f, "%.2f");
  ImGui::Checkbox("log loss axis", &settings.log_loss);
  ImGui::Separator();
  ImGui::TextWrapped("%s", snap.model.c_str());
  ImGui::Text("step %lld   %.1f steps/s", static_cast<long long>(snap.step), snap.steps_per_second);
  if (!snap.loss.empty())
    ImGui::Text("loss %.4f   accuracy %.3f", snap.loss.back(), snap.accuracy.back());
  if (ImGui::Button("Break it (inject NaN)")) s.training.inject_nan_at(snap.step + 1);
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("Poisons the next step's loss to show the NaN guard.");
  ImGui::EndChild();
  ImGui::SameLine();

  ImGui::BeginChild("train_plots", ImVec2(0, avail.y - 4), false);
  const ImVec2 right = ImGui::GetContentRegionAvail();
  const float plot_w = right.x * 0.5f - 8, plot_h = 230;
  line_plot(
      "loss",
      {{"loss (raw)", snap.loss, IM_COL32(255, 140, 60, 90)},
       {"loss (smoothed)", smooth_ema(snap.loss, settings.smoothing), IM_COL32(255, 140, 60, 255)}},
      ImVec2(plot_w, plot_h), settings.log_loss, "step", "loss");
  ImGui::SameLine();
  line_plot("accuracy",
            {{"accuracy (raw)", snap.accuracy, IM_COL32(80, 200, 255, 90)},
             {"accuracy (smoothed)", smooth_ema(snap.accuracy, settings.smoothing),
              IM_COL32(80, 200, 255, 255)}},
            ImVec2(plot_w, plot_h), false, "step", "accuracy");
  // attention maps of the probe sequence, one per head of the chosen layer
  auto& view = s.training_view;
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
}

// ---- Attention Lab
// -------------------------------------------------------------------------------

void show_attention(AppState& s, double dt) {
  auto& settings = s.scenario.attention;
  auto& view = s.attention_view;
  if (view.playing) {  // a fresh random draw twice a second at x1
    view.play_clock += dt * s.scenario.speed;
    if (view.play_clock >= 0.5) {
      view.play_clock = 0.0;
      s.scenario.seed += 1;
      view.dirty = true;
    }
  }
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  ImGui::BeginChild("attn_controls", ImVec2(360, avail.y - 4), true);
  const auto& variants = attention_variants();
  ImGui::TextUnformatted("variant");
  for (const auto& v : variants) {
    if (!v.available) {
      ImGui::TextDisabled("  %s: %s", v.name.c_str(), v.note.c_str());
      continue;
    }
    if (ImGui::RadioButton(v.name.c_str(), settings.variant == v.index)) {
      settings.variant = v.index;
      view.dirty = true;
    }
  }
  ImGui::Separator();
  const char* inputs[kAttentionInputCount] = {"random", "local (near-diagonal)", "periodic",
                                              "live model (layer 0)"};
  int input = static_cast<int>(settings.input);
  if (ImGui::Combo("input", &input, inputs, kAttentionInputCount)) {
    settings.input = static_cast<AttentionInput>(input);
    view.dirty = true;
  }
  view.dirty |= ImGui::SliderInt("length L", &settings.length, 4, 256);
  view.dirty |= ImGui::SliderInt("head dim D", &settings.head_dim, 2, 64);
  view.dirty |= ImGui::SliderInt("heads", &settings.heads, 1, 4);
  view.dirty |= slider_double("q,k scale", &settings.input_scale, 0.1, 4.0, "%.2f", true);
  // the chosen variant's own options
  const std::string variant_name =
      variants[std::min<size_t>(settings.variant, variants.size() - 1)].name;
  if (variant_name == "softmax") {
    view.dirty |= slider_double("logit scale", &settings.softmax_scale, 0.0, 2.0, "%.3f", false);
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("SoftmaxAttentionOptions::scale; 0 means 1/sqrt(D)");
  } else if (variant_name == "linear") {
    view.dirty |= slider_double("eps", &settings.linear_eps, 1e-9, 1e-2, "%.1e", true);
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("LinearAttentionOptions::eps: floor of the normaliser");
  } else if (variant_name == "fourier") {
    view.dirty |= slider_double("R", &settings.fourier_r, 0.1, 20.0, "%.3g", true);
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("FourierAttentionOptions::r_init: the kernel is phi(sin(R x) / (R x))");
    const char* phis[kKernelPhiCount];
    for (int i = 0; i < kKernelPhiCount; ++i) phis[i] = kernel_phi_label(i);
    view.dirty |= ImGui::Combo("phi", &settings.fourier_phi, phis, kKernelPhiCount);
  } else if (variant_name == "performer" || variant_name == "flt" || variant_name == "schoenbat") {
    view.dirty |= ImGui::SliderInt(variant_name == "schoenbat" ? "features D" : "features m",
                                   &settings.features, 4, 1024, "%d", ImGuiSliderFlags_Logarithmic);
    if (variant_name == "flt") {
      const char* families[kRpeFamilyCount];
      for (int i = 0; i < kRpeFamilyCount; ++i) families[i] = rpe_family_label(i);
      view.dirty |= ImGui::Combo("spectrum", &settings.flt_family, families, kRpeFamilyCount);
      view.dirty |= ImGui::SliderInt("components T", &settings.flt_components, 1, 8);
      view.dirty |= ImGui::SliderInt("RPE features r", &settings.flt_rpe_features, 1, 512, "%d",
                                     ImGuiSliderFlags_Logarithmic);
    } else if (variant_name == "schoenbat") {
      const char* kernels[kSchoenbatKernelCount];
      for (int i = 0; i < kSchoenbatKernelCount; ++i) kernels[i] = schoenbat_kernel_name(i);
      view.dirty |= ImGui::Combo("kernel", &settings.schoenbat_kernel, kernels, kSchoenbatKernelCount);
    }
  }
  view.dirty |= ImGui::Checkbox("causal", &settings.causal);
  ImGui::Separator();
  const auto& result = s.lab.result();
  if (s.lab.busy()) ImGui::TextColored(ImVec4(1, 0.8f, 0.3f, 1), "computing...");
  if (!result.error.empty()) ImGui::TextWrapped("error: %s", result.error.c_str());
  if (result.valid) {
    ImGui::Text("relative error ||A - A_exact||_F / ||A_exact||_F");
    ImGui::TextDisabled("(exact: %s)", result.reference.c_str());
    ImGui::Text("  %.4g", result.relative_error);
    ImGui::Text("max |difference| %.4g", result.diff_max_abs);
    ImGui::Text("forward: %s %.3f ms, softmax %.3f ms", result.variant.c_str(), result.variant_ms,
                result.softmax_ms);
    ImGui::TextDisabled("(median of 5 calls, B=1, H=%d, L=%d)", result.heads, result.length);
  }
  ImGui::EndChild();
  ImGui::SameLine();

  if (view.dirty) {
    LiveQueriesKeys live;
    if (settings.input == AttentionInput::kLiveModel) {
      s.training.probe_queries_keys(&live.q, &live.k, &live.heads, &live.length, &live.dim);
    }
    s.lab.request(settings, s.scenario.seed, std::move(live));
    view.dirty = false;
  }
  if (s.lab.poll()) view.version += 1;

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
        heatmap_texture(ta, view.version, approx, L, L, 0.0f, hi, Colormap::kViridis, false);
        heatmap_texture(te, view.version, exact, L, L, 0.0f, hi, Colormap::kViridis, false);
        heatmap_texture(td, view.version, diff, L, L, -dmax, dmax, Colormap::kDiverging, false);
        const std::string head = "head " + std::to_string(h) + ": ";
        const std::string t1 = head + result.variant + " (materialize)",
                          t2 = head + "exact " + result.reference,
                          t3 = head + "difference (variant - exact)";
        ImGui::PushID(h);
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        const auto hover = heatmap("approx", ta, approx, L, L, 0.0f, hi, Colormap::kViridis, false,
                                   ImVec2(side + 64, side), t1.c_str());
        if (h == 0) s.probe.attention_map = hover;
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
  } else if (!s.lab.busy()) {
    ImGui::TextDisabled("no result yet");
  }
  ImGui::EndChild();
}

// ---- Kernel Explorer
// -----------------------------------------------------------------------------

// A map of a correlated Gaussian's density (or its estimate) with the shared colour range.
void density_map(const char* id, Texture& texture, int64_t version, const std::vector<float>& values,
                 int grid, float lo, float hi, float side, const char* title) {
  heatmap_texture(texture, version, values, grid, grid, lo, hi, Colormap::kViridis, false);
  heatmap(id, texture, values, grid, grid, lo, hi, Colormap::kViridis, false,
          ImVec2(side + 62, side), title);
}

void show_kernel(AppState& s, double dt) {
  auto& settings = s.scenario.kernel;
  auto& view = s.kernel_view;
  if (play_tick(view.playing, &view.play_clock, dt, s.scenario.speed)) {
    s.scenario.seed += 1;
    view.dirty = true;
  }
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  ImGui::BeginChild("kernel_controls", ImVec2(300, avail.y - 4), true);
  section("Kernel  phi(s(R x)),  s(x) = sin x / x");
  bool changed = false;
  ImGui::SetNextItemWidth(170);
  changed |= slider_double("R", &settings.R, 0.1, 20.0, "%.3g", true);
  const char* phis[kKernelPhiCount];
  for (int i = 0; i < kKernelPhiCount; ++i) phis[i] = kernel_phi_label(i);
  ImGui::SetNextItemWidth(170);
  changed |= ImGui::Combo("phi", &settings.phi, phis, kKernelPhiCount);
  ImGui::SetNextItemWidth(170);
  changed |= slider_double("extent", &settings.extent, 0.5, 20.0, "%.2g", true);
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
  if (ImGui::Button("new draw")) step_scene(s);
  view.dirty |= changed;

  if (view.dirty) {
    view.curves = compute_kernel_curves(settings);  // ~6k kernel values: a few ms
    view.curves_version += 1;
    view.estimates.request({settings, s.scenario.seed});
    view.dirty = false;
  }
  if (view.estimates.poll()) view.estimates_version += 1;
  const KernelEstimates& est = view.estimates.result();

  ImGui::Separator();
  if (view.estimates.busy()) ImGui::TextColored(ImVec4(1, 0.8f, 0.3f, 1), "computing...");
  if (!view.curves.error.empty()) ImGui::TextWrapped("kernel: %s", view.curves.error.c_str());
  if (!est.error.empty()) ImGui::TextWrapped("error: %s", est.error.c_str());
  if (est.valid) {
    ImGui::TextUnformatted("integrated squared error");
    ImGui::TextDisabled("(the paper's MISE, eq. 13, this draw)");
    if (est.density_error.empty()) {
      ImGui::Text("  Fourier  %.3e", est.fourier_mise);
    } else {
      ImGui::TextWrapped("  Fourier: %s", est.density_error.c_str());
    }
    ImGui::Text("  KDE      %.3e", est.kde_mise);
    ImGui::Text("regression MSE  %.3e", est.reg_mse);
    ImGui::TextDisabled("theory: R ~ N^(1/4) for 2-D density\n(N^(1/4) = %.2f here)",
                        std::pow(static_cast<double>(settings.samples), 0.25));
  }
  ImGui::EndChild();
  ImGui::SameLine();

  ImGui::BeginChild("kernel_plots", ImVec2(0, avail.y - 4), false);
  const ImVec2 region = ImGui::GetContentRegionAvail();
  const float text_h = ImGui::GetTextLineHeightWithSpacing();
  const float row_h = (region.y - 2 * text_h - 16) * 0.5f;
  const auto& c = view.curves;
  // row 1: the 1-D kernel, the 2-D kernel, the regression estimate
  const float map_side = std::max(60.0f, std::min(row_h, region.x * 0.28f - 62));
  const float plot_w = (region.x - map_side - 62 - 24) * 0.5f;
  ImGui::BeginGroup();
  ImGui::Text("K(x) = phi(s(R x)) / phi(1), phi = %s, R = %.3g", kernel_phi_label(settings.phi),
              settings.R);
  line_plot("kernel1d", {{"kernel", c.kernel_1d, IM_COL32(255, 170, 60, 255), c.xs}},
            ImVec2(plot_w, row_h), false, "x", nullptr);
  ImGui::EndGroup();
  ImGui::SameLine();
  ImGui::BeginGroup();
  if (c.grid > 0) {
    heatmap_texture(view.kernel_map, view.curves_version, c.kernel_2d, c.grid, c.grid, c.lo, c.hi,
                    Colormap::kViridis, false);
    heatmap("kernel2d", view.kernel_map, c.kernel_2d, c.grid, c.grid, c.lo, c.hi,
            Colormap::kViridis, false, ImVec2(map_side + 62, map_side),
            "2-D kernel K(x, y) / K(0, 0)");
  }
  ImGui::EndGroup();
  ImGui::SameLine();
  ImGui::BeginGroup();
  ImGui::Text("regression: f(x) = sin 2x, N = %d noisy samples", settings.samples);
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

  // row 2: the true density and the two estimates, one colour range
  if (est.valid && est.grid > 0) {
    const float side = std::max(60.0f, std::min(row_h, (region.x - 3 * 70) / 3.0f));
    ImGui::BeginGroup();
    const std::string truth_title =
        "true density, rho = " + std::to_string(settings.rho).substr(0, 5);
    density_map("truth", view.truth_map, view.estimates_version, est.truth, est.grid, est.lo,
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
      const std::string title = std::string("Fourier estimate (") +
                                kernel_phi_label(settings.phi) + ", R = " +
                                tick_label(settings.R) + ")";
      density_map("fourier", view.fourier_map, view.estimates_version, est.fourier, est.grid,
                  est.lo, est.hi, side, title.c_str());
    } else {
      ImGui::TextUnformatted("Fourier estimate");
      ImGui::PushTextWrapPos(ImGui::GetCursorPosX() + side);
      ImGui::TextColored(ImVec4(1.0f, 0.8f, 0.3f, 1.0f), "%s", est.density_error.c_str());
      ImGui::PopTextWrapPos();
      ImGui::Dummy(ImVec2(side + 62, 0));
    }
    ImGui::EndGroup();
    ImGui::SameLine();
    ImGui::BeginGroup();
    const std::string kde_title = "Gaussian KDE (h = " + tick_label(settings.bandwidth) + ")";
    density_map("kde", view.kde_map, view.estimates_version, est.kde, est.grid, est.lo, est.hi,
                side, kde_title.c_str());
    ImGui::EndGroup();
  } else if (!view.estimates.busy()) {
    ImGui::TextDisabled("no estimates yet");
  }
  ImGui::EndChild();
}

// ---- RPE Studio
// ----------------------------------------------------------------------------------

// A colour from cold (old) to bright (new) for a history of curves.
ImU32 history_color(size_t i, size_t count) {
  const float t = count > 1 ? static_cast<float>(i) / static_cast<float>(count - 1) : 1.0f;
  const Rgba c = colormap(Colormap::kViridis, 0.3f + 0.7f * t);
  return to_imu32(c, static_cast<uint8_t>(90 + 165 * t));
}

// The learned spectra of the live model's heads (FLT attention only), from training snapshots.
void show_learned_spectra(AppState& s, float width, float height) {
  const auto snap = s.training.snapshot();
  section("Learned spectra during live training (layer 0 of the Live Training model)");
  if (snap.spectrum_heads == 0 || snap.spectra.empty()) {
    ImGui::TextDisabled(
        "The Live Training model does not use FLT attention. Choose \"flt\" as its attention in the\n"
        "Live Training tab and press Play: each head's spectrum g and RPE function f appear here\n"
        "as they are learned (old steps dark, the latest bright).");
    return;
  }
  auto& view = s.rpe_view;
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

void show_rpe(AppState& s, double dt) {
  auto& settings = s.scenario.rpe;
  auto& view = s.rpe_view;
  if (play_tick(view.playing, &view.play_clock, dt, s.scenario.speed)) {
    settings.draw += 1;
    view.dirty = true;
  }
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  ImGui::BeginChild("rpe_controls", ImVec2(300, avail.y - 4), true);
  section("Spectrum g and RPE f (FLT)");
  bool changed = false;
  const char* families[kRpeFamilyCount];
  for (int i = 0; i < kRpeFamilyCount; ++i) families[i] = rpe_family_label(i);
  ImGui::SetNextItemWidth(170);
  changed |= ImGui::Combo("family", &settings.family, families, kRpeFamilyCount);
  ImGui::SetNextItemWidth(170);
  changed |= ImGui::SliderInt("components T", &settings.components, 1, 8);
  ImGui::BeginDisabled(settings.family != 1);
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
  const char* proposals[kRpeProposalCount] = {rpe_proposal_label(0), rpe_proposal_label(1)};
  ImGui::SetNextItemWidth(170);
  changed |= ImGui::Combo("proposal p", &settings.proposal, proposals, kRpeProposalCount);
  ImGui::SetNextItemWidth(170);
  changed |= slider_double("proposal scale", &settings.proposal_sigma, 0.05, 5.0, "%.3g", true);
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("Match the width of g: the estimate averages g(xi) / p(xi), whose variance\n"
                      "explodes where p's tails are thinner than g's.");
  if (ImGui::Button("redraw features")) step_scene(s);
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
  view.dirty |= changed;
  if (view.dirty) {
    view.curves.request({settings, s.scenario.seed * 1000003ULL + settings.draw});
    view.dirty = false;
  }
  if (view.curves.poll()) view.version += 1;
  const RpeCurves& c = view.curves.result();
  ImGui::Separator();
  if (view.curves.busy()) ImGui::TextColored(ImVec4(1, 0.8f, 0.3f, 1), "computing...");
  if (!c.error.empty()) ImGui::TextWrapped("error: %s", c.error.c_str());
  if (!c.exact.empty()) {
    ImGui::Text("max |f^ - f| with r = %d: %.3e", settings.features, c.max_error);
    float fmax = 0.0f;
    for (float v : c.exact) fmax = std::max(fmax, std::abs(v));
    ImGui::TextDisabled("(max |f| = %.3g; Monte Carlo: ~1/sqrt(r))", fmax);
  }
  ImGui::EndChild();
  ImGui::SameLine();

  ImGui::BeginChild("rpe_plots", ImVec2(0, avail.y - 4), false);
  const ImVec2 region = ImGui::GetContentRegionAvail();
  const float learned_h = 200.0f;
  const float row_h = (region.y - learned_h - 5 * ImGui::GetTextLineHeightWithSpacing() - 20) * 0.5f;
  const float half = region.x * 0.5f - 6;
  if (!c.exact.empty()) {
    // row 1: g(xi); f exact vs the r-feature estimate
    ImGui::BeginGroup();
    ImGui::Text("spectrum g(xi): %s", rpe_family_label(settings.family));
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
      reference.push_back(c.error_by_features.empty()
                              ? 0.0f
                              : c.error_by_features[0] * std::sqrt(rs[0] / r));
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
        heatmap_texture(view.map, view.version, c.map_2d, c.grid, c.grid, c.map_lo, c.map_hi,
                        Colormap::kViridis, false);
        heatmap("rpe_map", view.map, c.map_2d, c.grid, c.grid, c.map_lo, c.map_hi,
                Colormap::kViridis, false, ImVec2(side + 62, side),
                "2-D f(delta) over [-range, range]^2 (FLT paper Fig. 4)");
      }
    } else {
      ImGui::TextDisabled("choose 2-D positions for the 2-D RPE shape (FLT paper Fig. 4)");
    }
    ImGui::EndGroup();
  } else if (!view.curves.busy()) {
    ImGui::TextDisabled("no curves yet");
  }
  show_learned_spectra(s, region.x, learned_h - 40);
  ImGui::EndChild();
}

// ---- the main window
// -----------------------------------------------------------------------------

void show_main_window(AppState& s, double dt) {
  const ImGuiViewport* viewport = ImGui::GetMainViewport();
  ImGui::SetNextWindowPos(viewport->WorkPos);
  ImGui::SetNextWindowSize(viewport->WorkSize);
  ImGui::Begin("FLT Lab", nullptr,
               ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove |
                   ImGuiWindowFlags_NoSavedSettings | ImGuiWindowFlags_NoBringToFrontOnFocus);
  ImGui::TextColored(ImVec4(0.55f, 0.8f, 1.0f, 1.0f), "FLT Lab");
  ImGui::SameLine();
  ImGui::TextDisabled("| %s | seed %llu", s.runtime_line.c_str(),
                      static_cast<unsigned long long>(s.scenario.seed));
  show_transport(s);
  const float status_height = ImGui::GetFrameHeightWithSpacing();
  if (ImGui::BeginTabBar("scenes")) {
    for (int i = 0; i < kSceneCount; ++i) {
      const auto scene = static_cast<SceneId>(i);
      const ImGuiTabItemFlags flags =
          s.select_scene_tab && scene == s.scenario.scene ? ImGuiTabItemFlags_SetSelected : 0;
      if (ImGui::BeginTabItem(kSceneTitles[i], nullptr, flags)) {
        if (!s.select_scene_tab) s.scenario.scene = scene;
        ImGui::BeginChild("scene", ImVec2(0, -status_height), false);
        s.probe.scene_min = ImGui::GetWindowPos();
        s.probe.scene_max = ImVec2(s.probe.scene_min.x + ImGui::GetWindowSize().x,
                                   s.probe.scene_min.y + ImGui::GetWindowSize().y);
        switch (scene) {
          case SceneId::kArena:
            show_arena(s, dt);
            break;
          case SceneId::kTraining:
            show_training(s);
            break;
          case SceneId::kAttention:
            show_attention(s, dt);
            break;
          case SceneId::kKernel:
            show_kernel(s, dt);
            break;
          case SceneId::kRpe:
            show_rpe(s, dt);
            break;
        }
        ImGui::EndChild();
        ImGui::EndTabItem();
      }
    }
    ImGui::EndTabBar();
  }
  s.select_scene_tab = false;
  // status bar
  ImGui::Separator();
  ImGui::TextDisabled("%.1f FPS | Dear ImGui %s | %s", ImGui::GetIO().Framerate, IMGUI_VERSION,
                      s.message.c_str());
  ImGui::End();
}

}  // namespace

// ---- App
// -----------------------------------------------------------------------------------------

bool display_available() {
  const char* x11 = std::getenv("DISPLAY");
  const char* wayland = std::getenv("WAYLAND_DISPLAY");
  return (x11 && *x11) || (wayland && *wayland);
}

std::vector<uint8_t> crop(const std::vector<uint8_t>& rgba, int width, ImVec2 min, ImVec2 max,
                          int* out_width, int* out_height) {
  const int height = static_cast<int>(rgba.size() / 4 / static_cast<size_t>(width));
  const int x0 = std::clamp(static_cast<int>(min.x), 0, width - 1),
            y0 = std::clamp(static_cast<int>(min.y), 0, height - 1);
  const int x1 = std::clamp(static_cast<int>(max.x), x0 + 1, width),
            y1 = std::clamp(static_cast<int>(max.y), y0 + 1, height);
  *out_width = x1 - x0;
  *out_height = y1 - y0;
  std::vector<uint8_t> out(static_cast<size_t>(*out_width) * *out_height * 4);
  for (int y = y0; y < y1; ++y) {
    std::copy_n(rgba.begin() + (static_cast<std::ptrdiff_t>(y) * width + x0) * 4, *out_width * 4,
                out.begin() + static_cast<std::ptrdiff_t>(y - y0) * *out_width * 4);
  }
  return out;
}

bool write_png(const std::string& path, const std::vector<uint8_t>& rgba, int width, int height) {
  return stbi_write_png(path.c_str(), width, height, 4, rgba.data(), width * 4) != 0;
}

App::App(int width, int height, bool hidden) : state_(std::make_unique<AppState>()) {
  // 1. GLFW and an OpenGL 3 context (as in Dear ImGui's example_glfw_opengl3)
  if (!display_available()) {
    throw std::runtime_error(
        "flt-lab: no display (DISPLAY is not set). Run under a virtual X server, e.g.\n"
        "  xvfb-run -a flt-lab --headless --scene all --out DIR");
  }
  glfwSetErrorCallback(glfw_error);
  if (!glfwInit())
    throw std::runtime_error("flt-lab: glfwInit failed (no usable display?); try xvfb-run -a");
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 0);
  glfwWindowHint(GLFW_VISIBLE, hidden ? GLFW_FALSE : GLFW_TRUE);
  window_ = glfwCreateWindow(width, height, "FLT Lab", nullptr, nullptr);
  if (window_ == nullptr) {
    glfwTerminate();
    throw std::runtime_error(
        "flt-lab: could not create a 1280x800 OpenGL 3.0 window; try xvfb-run -a");
  }
  glfwMakeContextCurrent(window_);
  glfwSwapInterval(hidden ? 0 : 1);  // vsync on screen; as fast as possible headless

  // 2. Dear ImGui context, style and backends
  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGuiIO& io = ImGui::GetIO();
  io.IniFilename = nullptr;  // the state string, not imgui.ini, is the saved state
  ImGui::StyleColorsDark();
  ImGui::GetStyle().FrameRounding = 3.0f;
  ImGui_ImplGlfw_InitForOpenGL(window_, true);
  ImGui_ImplOpenGL3_Init("#version 130");

  state_->headless = hidden;
  state_->runtime_line = flt::runtime_summary(flt::init(/*quiet=*/true));
  load(Scenario{});
}

App::~App() {
  // 5. teardown, in reverse order (textures need the GL context)
  state_.reset();
  ImGui_ImplOpenGL3_Shutdown();
  ImGui_ImplGlfw_Shutdown();
  ImGui::DestroyContext();
  glfwDestroyWindow(window_);
  glfwTerminate();
}

void App::load(const Scenario& scenario) {
  auto& s = *state_;
  s.scenario = scenario;
  s.select_scene_tab = true;
  s.arena.load(scenario.arena, scenario.seed);
  s.arena_view.playing = false;
  s.arena_view.recorded_level = -1;
  s.training.configure(scenario.training, scenario.seed);
  s.training.set_speed(scenario.speed);
  s.training_view.uploaded_version = -1;
  s.attention_view.dirty = true;
  s.kernel_view.dirty = true;
  s.kernel_view.playing = false;
  s.rpe_view.dirty = true;
  s.rpe_view.playing = false;
  s.state_text = encode_state(scenario);
}

void App::start_worker() {
  state_->training.start_worker();
  state_->training_worker = true;
}

void App::prepare_headless(int steps) {
  auto& s = *state_;
  for (int i = 0; i < steps && !s.arena.finished(); ++i) s.arena.step();
  if (s.scenario.scene == SceneId::kTraining) s.training.run_steps(steps);
  if (s.scenario.scene == SceneId::kAttention) {
    LiveQueriesKeys live;
    if (s.scenario.attention.input == AttentionInput::kLiveModel) {
      s.training.probe_queries_keys(&live.q, &live.k, &live.heads, &live.length, &live.dim);
    }
    s.lab.request(s.scenario.attention, s.scenario.seed, std::move(live));
    s.lab.wait();
    s.attention_view.dirty = false;
    s.attention_view.version += 1;
  }
  if (s.scenario.scene == SceneId::kKernel) {  // the estimates, finished before the first frame
    s.kernel_view.curves = compute_kernel_curves(s.scenario.kernel);
    s.kernel_view.curves_version += 1;
    s.kernel_view.estimates.request({s.scenario.kernel, s.scenario.seed});
    s.kernel_view.estimates.wait();
    s.kernel_view.dirty = false;
    s.kernel_view.estimates_version += 1;
  }
  if (s.scenario.scene == SceneId::kRpe) {
    // with an FLT live model, train it so the learned-spectra panel has a history to show
    const auto& variants = attention_variants();
    const size_t variant = static_cast<size_t>(std::max(0, s.scenario.training.variant));
    if (variant < variants.size() && variants[variant].name == "flt") s.training.run_steps(steps);
    s.rpe_view.curves.request(
        {s.scenario.rpe, s.scenario.seed * 1000003ULL + s.scenario.rpe.draw});
    s.rpe_view.curves.wait();
    s.rpe_view.dirty = false;
    s.rpe_view.version += 1;
  }
}

double App::frame(const InputOverride* input, bool swap) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  // 3. main loop body: poll events, start the frame, panels, render
  glfwPollEvents();
  ImGui_ImplOpenGL3_NewFrame();
  ImGui_ImplGlfw_NewFrame();
  ImGuiIO& io = ImGui::GetIO();
  if (input != nullptr) {  // scripted input replaces the real mouse (the GLFW backend just set it)
    io.MousePos = input->mouse;
    io.MouseDown[0] = input->left_down;
    for (int key = 0; key < IM_ARRAYSIZE(io.KeysDown); ++key) {
      io.KeysDown[key] = std::find(input->keys_down.begin(), input->keys_down.end(), key) !=
                         input->keys_down.end();
    }
  }
  const bool fixed_step = state_->headless || input != nullptr;
  if (fixed_step) io.DeltaTime = static_cast<float>(kFixedFrameSeconds);
  ImGui::NewFrame();
  show_main_window(*state_, fixed_step ? kFixedFrameSeconds : io.DeltaTime);
  ImGui::Render();
  int width = 0, height = 0;
  glfwGetFramebufferSize(window_, &width, &height);
  glViewport(0, 0, width, height);
  glClearColor(0.08f, 0.08f, 0.10f, 1.0f);
  glClear(GL_COLOR_BUFFER_BIT);
  ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
  if (!state_->pending_screenshot.empty()) {
    const std::string path = state_->pending_screenshot;
    state_->pending_screenshot.clear();
    int w = 0, h = 0;
    auto pixels = read_pixels(&w, &h);
    if (state_->screenshot_panel_only)
      pixels = crop(pixels, w, state_->probe.scene_min, state_->probe.scene_max, &w, &h);
    state_->message = write_png(path, pixels, w, h) ? "wrote " + path : "could not write " + path;
  }
  // 4. present
  if (swap) glfwSwapBuffers(window_);
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

std::vector<uint8_t> App::read_pixels(int* width, int* height) const {
  glfwGetFramebufferSize(window_, width, height);
  std::vector<uint8_t> pixels(static_cast<size_t>(*width) * *height * 4);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadBuffer(GL_BACK);
  glReadPixels(0, 0, *width, *height, GL_RGBA, GL_UNSIGNED_BYTE, pixels.data());
  // GL's rows start at the bottom; images start at the top
  const size_t stride = static_cast<size_t>(*width) * 4;
  std::vector<uint8_t> flipped(pixels.size());
  for (int y = 0; y < *height; ++y) {
    std::copy_n(pixels.begin() + static_cast<std::ptrdiff_t>(y * stride), stride,
                flipped.begin() + static_cast<std::ptrdiff_t>((*height - 1 - y) * stride));
  }
  return flipped;
}

bool App::screenshot(const std::string& path) {
  for (int i = 0; i < 3; ++i)
    frame(nullptr, true);  // ImGui settles its layout over a couple of frames
  frame(nullptr, false);
  int w = 0, h = 0;
  const auto pixels = read_pixels(&w, &h);
  glfwSwapBuffers(window_);
  return write_png(path, pixels, w, h);
}

void App::set_vsync(bool on) {
  glfwSwapInterval(on ? 1 : 0);
}

std::string App::renderer() const {
  const auto* text = reinterpret_cast<const char*>(glGetString(GL_RENDERER));
  return text ? text : "unknown";
}

bool App::should_close() const {
  return glfwWindowShouldClose(window_) != 0;
}

}  // namespace flt::viz
