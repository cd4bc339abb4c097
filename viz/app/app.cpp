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
    default:
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
    default:
      return false;
  }
}

void set_scene_playing(AppState& s, bool playing) {
  if (s.scenario.scene == SceneId::kArena) s.arena_view.playing = playing;
  if (s.scenario.scene == SceneId::kTraining) s.training.set_playing(playing);
  if (s.scenario.scene == SceneId::kAttention) s.attention_view.playing = playing;
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
  const bool has_transport =
      scene == SceneId::kArena || scene == SceneId::kTraining || scene == SceneId::kAttention;
  if (has_transport) transport_keys(s);
  const bool playing = scene_playing(s);
  ImGui::BeginDisabled(!has_transport);
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
  ImGui::EndDisabled();
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
      "learned optimizers (flt::optim::Mnemosyne with FLT and LSTM memory, pretrained) race too.");
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
  changed |= slider_double("Adam lr", &settings.lr, 1e-4, 1e-1, "%.2e", true);
  if (changed) s.training.configure(settings, s.scenario.seed);
  ImGui::TextDisabled("optimizer: Adam (learned optimizer:\nnot yet in the library, issue 5)");
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
  }
  view.dirty |= ImGui::Checkbox("causal", &settings.causal);
  ImGui::Separator();
  const auto& result = s.lab.result();
  if (s.lab.busy()) ImGui::TextColored(ImVec4(1, 0.8f, 0.3f, 1), "computing...");
  if (!result.error.empty()) ImGui::TextWrapped("error: %s", result.error.c_str());
  if (result.valid) {
    ImGui::Text("relative error ||A - A_softmax||_F / ||A_softmax||_F");
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
                          t2 = head + "exact softmax", t3 = head + "difference (variant - softmax)";
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

// ---- scenes waiting for their modules
// ------------------------------------------------------------

void show_placeholder(const char* scene, const char* module, const char* issue, const char* what) {
  ImGui::Dummy(ImVec2(0, 40));
  ImGui::Indent(40);
  ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1.0f, 0.8f, 0.3f, 1.0f));
  ImGui::Text("%s needs %s, which is not in the library yet (%s).", scene, module, issue);
  ImGui::PopStyleColor();
  ImGui::Spacing();
  ImGui::TextWrapped("When it lands, this scene shows: %s", what);
  ImGui::Unindent(40);
}

void show_kernel(AppState&) {
#if __has_include(<flt/attention/fourier.h>)
  show_placeholder("Kernel Explorer", "<flt/attention/fourier.h> (found)", "issue 4",
                   "the module is present; its explorer panel is the next step of issue 6.");
#else
  show_placeholder(
      "Kernel Explorer", "<flt/attention/fourier.h> (FourierAttention)", "issue 4",
      "the 1-D kernel phi(s(R x)) and the 2-D kernel for chosen R and phi; the generalized Fourier "
      "density estimator on samples from a correlated 2-D Gaussian next to a Gaussian KDE (MISE), "
      "and "
      "the nonparametric regression estimator; sliders for R, phi and the sample count.");
#endif
}

void show_rpe(AppState&) {
#if __has_include(<flt/attention/flt.h>)
  show_placeholder("RPE Studio", "<flt/attention/flt.h> (found)", "issue 3",
                   "the module is present; its studio panel is the next step of issue 6.");
#else
  show_placeholder("RPE Studio", "<flt/attention/flt.h> (FLT attention with RPE spectra)",
                   "issue 3",
                   "the spectrum g(xi) and the implied f(delta) per family, exact vs approximated "
                   "with r features "
                   "(error as r changes); 2-D local-RPE shapes as heatmaps and a rotatable 3-D "
                   "surface; the learned "
                   "spectra of each head evolving during live training.");
#endif
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
            show_kernel(s);
            break;
          case SceneId::kRpe:
            show_rpe(s);
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
