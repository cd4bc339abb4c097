// Optimizer Arena: the landscape map (or 3-D surface) with the racers' trails, the level picker,
// your racer's knobs and the leaderboard.

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "app/panels.h"
#include "app/widgets.h"

namespace flt::viz {
namespace {

/// Contour lines of a landscape at 11 levels evenly spaced in log f (the map's colour scale).
std::vector<Segment> log_contours(const LandscapeGrid& grid) {
  std::vector<float> logs(grid.values.size());
  for (size_t i = 0; i < logs.size(); ++i) logs[i] = std::log10(std::max(grid.values[i], grid.lo));
  std::vector<float> levels;
  const float a = std::log10(grid.lo), b = std::log10(grid.hi);
  for (int i = 1; i < 12; ++i) levels.push_back(a + (b - a) * i / 12.0f);
  return contour_segments(logs, grid.rows, grid.cols, levels);
}

/// The square a map is drawn in (screen coordinates).
struct MapSquare {
  ImVec2 min, max;
  float side;
};

/// Draws `grid` on a log colour scale in the largest square that fits `size` beside its colour
/// bar, as the invisible button `id` (so ImGui::IsItemHovered() is the map's), with contour lines
/// in `contour_color` unless it is 0. The texture and contours follow the grid.
MapSquare draw_landscape_map(LandscapeMapView& view, const LandscapeGrid& grid, const char* id,
                             ImVec2 size, ImU32 contour_color) {
  if (grid.version != view.grid_version || !view.texture.ready()) {
    view.grid_version = grid.version;
    view.texture.update(grid.version,
                        colorize(grid.values, Colormap::kViridis, grid.lo, grid.hi, /*log=*/true),
                        grid.cols, grid.rows);
    view.contours = log_contours(grid);
  }
  ImDrawList* draw = ImGui::GetWindowDrawList();
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const float side = std::min(size.x - 70, size.y);
  const ImVec2 min = origin, max(origin.x + side, origin.y + side);
  ImGui::InvisibleButton(id, ImVec2(side + 70, side));
  draw->AddImage(view.texture.imgui_id(), min, max);
  if (contour_color != 0)
    draw_contours(draw, view.contours, grid.rows, grid.cols, min, max, contour_color);
  colorbar(draw, ImVec2(max.x + 6, min.y), ImVec2(max.x + 20, max.y), grid.lo, grid.hi,
           Colormap::kViridis, true);
  return {min, max, side};
}

/// A global minimum: a small white cross at p.
void draw_minimum(ImDrawList* draw, ImVec2 p) {
  draw->AddLine(ImVec2(p.x - 5, p.y - 5), ImVec2(p.x + 5, p.y + 5), IM_COL32(255, 255, 255, 220),
                2.0f);
  draw->AddLine(ImVec2(p.x - 5, p.y + 5), ImVec2(p.x + 5, p.y - 5), IM_COL32(255, 255, 255, 220),
                2.0f);
}

void show_arena_map(LabState& lab, ArenaView& view, ImVec2 size) {
  const ArenaGame& game = lab.arena.game;
  const auto& level = game.level();
  const auto square =
      draw_landscape_map(view.map, game.grid(), "arena_map", size,
                         lab.scenario.arena.contours ? IM_COL32(255, 255, 255, 70) : 0);
  const bool hovered = ImGui::IsItemHovered();
  const ImVec2 min = square.min, max = square.max;
  const float side = square.side;
  ImDrawList* draw = ImGui::GetWindowDrawList();
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
  for (const auto& racer : game.racers()) {
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
  const auto& start = game.racers().front().path.front();
  for (const auto& m : game.minima()) draw_minimum(draw, to_screen(m[0], m[1]));
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
      lab.scenario.arena.custom_start = true;
      lab.scenario.arena.start_x = std::round(w[0] * 1000) / 1000;
      lab.scenario.arena.start_y = std::round(w[1] * 1000) / 1000;
      rebuild_scene(lab, SceneId::kArena);
      lab.arena.playing = false;
    } else {
      view.dragging_start = false;
    }
  }
  if (hovered && mouse.x <= max.x) {
    const auto w = to_world(mouse);
    ImGui::SetTooltip("x=%.3f y=%.3f  f-f*=%.4g\n(drag the white square to move the start)", w[0],
                      w[1], game.value_at(w[0], w[1]));
  }
}

// The landscape as a 3-D surface on a log scale (block means of log f over 3 x 3 cells, floored
// 3 decades under the top, so a valley narrower than a cell is not a row of spikes), with every
// racer's path and current point on it.
void show_arena_surface(const ArenaGame& game, ArenaView& view, ImVec2 size) {
  const auto& grid = game.grid();
  const auto& level = game.level();
  const float floor = std::max(grid.lo, grid.hi * 1e-3f);
  int rows = 0, cols = 0;
  const auto small = block_mean(grid.values, grid.rows, grid.cols, 3, &rows, &cols,
                                [floor](float v) { return std::log10(std::max(v, floor)); });
  std::vector<SurfacePath> paths;
  for (const auto& racer : game.racers()) {
    if (racer.status == RacerStatus::kUnavailable) continue;
    SurfacePath path{{}, rgb(racer.color)};
    for (size_t i = 0; i < racer.path.size(); ++i) {
      const auto& p = racer.path[i];
      const float u = static_cast<float>((p[0] - level.lo_x) / (level.hi_x - level.lo_x));
      const float v = static_cast<float>((level.hi_y - p[1]) / (level.hi_y - level.lo_y));
      if (u < 0 || u > 1 || v < 0 || v > 1) continue;  // off the map: not on the surface
      const float h = std::log10(std::max(static_cast<float>(racer.values[i]), floor));
      path.points.push_back({u, v, h});
    }
    paths.push_back(std::move(path));
  }
  surface_plot("surface", small, rows, cols, size, &view.yaw, &view.pitch, Colormap::kViridis,
               /*log=*/false, paths);
}

// The swarm level: every population's current points over the contour map of 2-D Rastrigin, the
// FLT swarm's attention as lines between its particles (width and opacity grow with the weight
// above uniform), each racer's best so far as a ring.
void show_swarm_map(ArenaView& view, const SwarmRace& race, ImVec2 size) {
  const auto square = draw_landscape_map(view.swarm_map, race.grid(), "swarm_map", size,
                                         IM_COL32(255, 255, 255, 60));
  const ImVec2 min = square.min, max = square.max;
  const float side = square.side;
  ImDrawList* draw = ImGui::GetWindowDrawList();
  const double lo = race.lower(), hi = race.upper();
  const auto to_screen = [&](const std::array<double, 2>& p) {
    return ImVec2(min.x + static_cast<float>((p[0] - lo) / (hi - lo)) * side,
                  min.y + static_cast<float>((hi - p[1]) / (hi - lo)) * side);
  };
  draw->PushClipRect(min, max, true);
  const auto& racers = race.racers();
  if (view.attention_lines && !racers.empty()) {
    const auto& points = racers[0].points;
    const auto& w = race.attention();
    const int p = race.particles();
    for (int i = 0; i < p && i < static_cast<int>(points.size()); ++i) {
      for (int j = 0; j < p && j < static_cast<int>(points.size()); ++j) {
        const float above = w[static_cast<size_t>(i * p + j)] * static_cast<float>(p) - 1.0f;
        if (i == j || above <= 0.0f) continue;  // only weights above uniform
        const float width = std::min(6.0f, 0.5f + 1.5f * above);
        const auto alpha = static_cast<uint8_t>(std::min(255.0f, 60.0f + 60.0f * above));
        draw->AddLine(to_screen(points[i]), to_screen(points[j]), IM_COL32(255, 255, 255, alpha),
                      width);
      }
    }
  }
  for (size_t r = racers.size(); r-- > 0;) {  // the swarm last, on top
    const auto& racer = racers[r];
    for (const auto& pt : racer.points) {
      const ImVec2 q = to_screen(pt);
      draw->AddCircleFilled(q, r == 0 ? 5.0f : 3.5f, rgb(racer.color));
      draw->AddCircle(q, r == 0 ? 5.0f : 3.5f, IM_COL32(0, 0, 0, 255), 0, 1.0f);
    }
    if (std::isfinite(racer.best_value))
      draw->AddCircle(to_screen(racer.best), 9.0f, rgb(racer.color), 0, 2.5f);
  }
  draw_minimum(draw, to_screen({0.0, 0.0}));
  draw->PopClipRect();
  draw->AddRect(min, max, IM_COL32(170, 170, 180, 255));
}

void show_swarm_leaderboard(const SwarmRace& race) {
  const ImGuiTableFlags flags =
      ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_SizingFixedFit;
  if (!ImGui::BeginTable("swarm_leaderboard", 4, flags)) return;
  ImGui::TableSetupColumn("#");
  ImGui::TableSetupColumn("population");
  ImGui::TableSetupColumn("best f");
  ImGui::TableSetupColumn("evaluations");
  ImGui::TableHeadersRow();
  std::vector<size_t> order(race.racers().size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return race.racers()[a].best_value < race.racers()[b].best_value;
  });
  int rank = 1;
  for (size_t i : order) {
    const auto& r = race.racers()[i];
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::Text("%d", rank++);
    ImGui::TableNextColumn();
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(rgb(r.color)), "%s", r.name.c_str());
    ImGui::TableNextColumn();
    if (std::isfinite(r.best_value)) {
      ImGui::Text("%.4g", r.best_value);
    } else {
      ImGui::TextDisabled("ready");  // no evaluation yet: Play or Step starts the race
    }
    ImGui::TableNextColumn();
    ImGui::Text("%lld", static_cast<long long>(r.evaluations));
  }
  ImGui::EndTable();
}

void show_leaderboard(const ArenaGame& game) {
  auto rows = game.leaderboard();
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
    const auto& racer = game.racers()[row.racer];
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
    if (row.status == RacerStatus::kDiverged) {
      ImGui::TextColored(kWarningColor, "%s (?)", racer_status_name(row.status));
    } else {
      ImGui::TextUnformatted(racer_status_name(row.status));
    }
    if (!racer.note.empty() && ImGui::IsItemHovered()) {
      ImGui::SetTooltip("%s%s%s", racer.note.c_str(), racer.advice.empty() ? "" : "\n",
                        racer.advice.c_str());
    }
  }
  ImGui::EndTable();
}

// The par line in a region as tall as the longer of its two forms (par, or the sentence saying
// there is none) at this width: dragging the start between the two moved every control below it
// by a line, and the next click landed on another slider.
void show_par(const ArenaGame& game) {
  const float width = ImGui::GetContentRegionAvail().x;
  float height = 0.0f;
  for (const bool reached : {true, false}) {
    const std::string text = par_sentence(game.level(), reached, game.par());
    height = std::max(height, ImGui::CalcTextSize(text.c_str(), nullptr, false, width).y);
  }
  ImGui::BeginChild("par", ImVec2(width, height), false,
                    ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse);
  ImGui::PushTextWrapPos(0.0f);
  ImGui::TextUnformatted(game.par_text().c_str());
  ImGui::PopTextWrapPos();
  ImGui::EndChild();
}

}  // namespace

void show_arena(LabState& lab, ArenaView& view) {
  ArenaGame& game = lab.arena.game;
  auto& settings = lab.scenario.arena;
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float map_size = std::min(avail.y - 8, avail.x * 0.55f);
  ImGui::BeginChild("arena_left", ImVec2(map_size + 80, avail.y - 4), false);
  if (settings.swarm) {
    show_swarm_map(view, lab.arena.swarm, ImVec2(map_size + 70, map_size));
  } else if (settings.surface) {
    show_arena_surface(game, view, ImVec2(map_size + 70, map_size));
  } else {
    show_arena_map(lab, view, ImVec2(map_size + 70, map_size));
  }
  ImGui::EndChild();
  ImGui::SameLine();
  ImGui::BeginChild("arena_right", ImVec2(0, avail.y - 4), false);
  const auto& levels = arena_levels();
  ImGui::SetNextItemWidth(280);
  const char* kSwarmLevel = "Swarm: populations on 2-D Rastrigin";
  const std::string preview = fitted(settings.swarm ? kSwarmLevel : levels[game.level_index()].name,
                                     280 - ImGui::GetFrameHeight());
  if (ImGui::BeginCombo("level", preview.c_str())) {
    if (ImGui::Selectable(kSwarmLevel, settings.swarm)) {
      settings.swarm = true;
      rebuild_scene(lab, SceneId::kArena);
    }
    for (int i = 0; i < static_cast<int>(levels.size()); ++i) {
      // the level on screen stays selectable: a state string may have opened it while locked
      const bool earned = lab.arena.progress.unlocked(i);
      const bool unlocked = earned || (!settings.swarm && i == settings.level);
      std::string label = levels[i].name + "  " +
                          std::string(static_cast<size_t>(lab.arena.progress.best_stars[i]), '*');
      if (!unlocked) label += "  (locked: a star on the level before opens it)";
      if (unlocked && !earned) label += "  (locked; opened by a state string)";
      if (ImGui::Selectable(label.c_str(), !settings.swarm && i == settings.level,
                            unlocked ? 0 : ImGuiSelectableFlags_Disabled)) {
        settings.swarm = false;
        settings.level = i;
        settings.custom_start = false;
        rebuild_scene(lab, SceneId::kArena);
      }
    }
    ImGui::EndCombo();
  }
  if (settings.swarm) {
    const SwarmRace& race = lab.arena.swarm;
    ImGui::TextWrapped(
        "Four populations of 16 race on 2-D Rastrigin at equal function evaluations: the FLT "
        "swarm (flt::optim::Swarm, %s), PSO, CMA-ES and Adam with restarts. White lines: the "
        "swarm's attention, wider where a particle weighs another more than uniformly; its RPE "
        "f(x_i - x_j) is learned (see RPE Studio). Rings: each population's best point.",
        race.weights_note().c_str());
    if (race.step_count() == 0) {
      ImGui::TextDisabled("Ready: press Play (Space) or Step (S).");
    } else {
      ImGui::Text("step %d   %s", race.step_count(), race.finished() ? "race over" : "");
    }
    ImGui::Checkbox("attention lines", &view.attention_lines);
    section("Leaderboard (best value so far)");
    show_swarm_leaderboard(race);
    ImGui::EndChild();
    return;
  }
  const auto& level = game.level();
  ImGui::TextWrapped("%s", level.hint.c_str());
  // steps of the racer furthest along: in "click each step" mode only yours move
  ImGui::Text("step %d / %d", game.steps_taken(), level.max_steps);
  show_par(game);
  const int stars = game.stars();
  ImGui::Text("stars: ");
  ImGui::SameLine();
  for (int i = 0; i < 3; ++i) {
    ImGui::TextColored(i < stars ? kGoldColor : ImVec4(0.4f, 0.4f, 0.4f, 1),
                       i < stars ? "[*]" : "[ ]");
    ImGui::SameLine();
  }
  ImGui::NewLine();
  section("Your racer (SGD with momentum)");
  bool changed = ImGui::Checkbox("race", &settings.human_enabled);
  view.race_checkbox_min = ImGui::GetItemRectMin();
  ImGui::SetNextItemWidth(200);
  changed |= slider_double("learning rate", &settings.human_lr, 1e-4, 1.0, "%.4g", true);
  ImGui::SetNextItemWidth(200);
  changed |= slider_double("momentum", &settings.human_momentum, 0.0, 0.99, "%.2f", false);
  if (changed) rebuild_scene(lab, SceneId::kArena);
  ImGui::Checkbox("click each step", &view.click_mode);
  if (view.click_mode) {
    ImGui::SameLine();
    if (ImGui::Button("My step")) game.step_human();
  }
  ImGui::Checkbox("contours", &settings.contours);
  ImGui::SameLine();
  ImGui::Checkbox("3-D view", &settings.surface);
  ImGui::SameLine();
  if (ImGui::Button("level start")) {
    settings.custom_start = false;
    rebuild_scene(lab, SceneId::kArena);
  }
  section("Leaderboard (click a header to sort)");
  show_leaderboard(game);
  if (game.steps_taken() == 0) {
    ImGui::TextDisabled(view.click_mode ? "Ready: press My step, or Play (Space) to race all."
                                        : "Ready: press Play (Space) or Step (S).");
  }
  const std::string done = game.human_done_line();
  if (!done.empty() && !game.finished()) ImGui::TextColored(kGoldColor, "%s", done.c_str());
  const std::string coach = game.coach_line();
  if (!coach.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, kWarningColor);
    ImGui::TextWrapped("%s", coach.c_str());
    ImGui::PopStyleColor();
  }
  if (game.finished()) {
    ImGui::TextColored(
        kGoldColor, "Race over: %d star%s. %s", stars, stars == 1 ? "" : "s",
        lab.arena.progress.unlocked(game.level_index() + 1) ? "Next level unlocked." : "");
  }
  section("How to play");
  ImGui::TextWrapped(
      "Drag the white square to choose the start, set your learning rate and momentum, press Play. "
      "Reach f - f* <= eps within par for 3 stars (2 par: 2 stars, the budget: 1 star). The "
      "learned optimizers (flt::optim::CoordinateMnemosyne with FLT, Performer and LSTM memory, "
      "pretrained) race too.");
  ImGui::EndChild();
}

}  // namespace flt::viz
