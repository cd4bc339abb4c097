// Lessons: the papers' results in miniature. A teacher picks a lesson, presses Run, and its quick
// version (the numbers of `flt-demo LESSON --quick`) runs off the UI thread; the table "paper |
// here | verdict" and the plots appear when it finishes.

#include <cmath>
#include <string>
#include <vector>

#include "app/panels.h"
#include "app/widgets.h"

namespace flt::viz {
namespace {

// Colours of the plotted series; guides and baselines grey.
ImU32 lesson_color(size_t i) {
  static const ImU32 colors[] = {IM_COL32(90, 170, 255, 255),  IM_COL32(255, 160, 60, 255),
                                 IM_COL32(110, 210, 110, 255), IM_COL32(240, 90, 90, 255),
                                 IM_COL32(190, 140, 240, 255), IM_COL32(200, 160, 120, 255)};
  return colors[i % 6];
}

// A lesson panel as one of our line plots (points that a log axis cannot show are left out).
void lesson_plot(const char* id, const flt::demos::PlotPanel& panel, ImVec2 size) {
  std::vector<Series> series;
  size_t colour = 0;
  for (const auto& s : panel.series) {
    Series out{s.label, {}, s.reference ? IM_COL32(170, 170, 180, 200) : lesson_color(colour++)};
    for (size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i) {
      const bool ok = std::isfinite(s.x[i]) && std::isfinite(s.y[i]) &&
                      (!panel.log_x || s.x[i] > 0) && (!panel.log_y || s.y[i] > 0);
      if (!ok) continue;
      out.xs.push_back(static_cast<float>(s.x[i]));
      out.ys.push_back(static_cast<float>(s.y[i]));
    }
    out.markers = out.xs.size() == 1;
    if (!out.xs.empty()) series.push_back(std::move(out));
  }
  // a curve drawn under another with the same values (within 0.5% of the plot's height, about a
  // line's width) cannot be seen: its legend entry says where it is
  std::vector<std::vector<float>> xs, ys;
  for (const auto& s : series) {
    xs.push_back(s.xs);
    ys.push_back(s.ys);
  }
  const auto hidden = hidden_curves(xs, ys, panel.log_y, 0.005f);
  for (size_t i = 0; i < series.size(); ++i) {
    if (hidden[i] >= 0 && !series[i].label.empty())
      series[i].label += " (under " + series[static_cast<size_t>(hidden[i])].label + ")";
  }
  fitted_text(panel.title, size.x);
  line_plot(id, series, size, panel.log_y, panel.x_label.c_str(), panel.y_label.c_str(),
            panel.log_x);
}

void result_table(const flt::demos::LessonResult& r) {
  const ImGuiTableFlags flags = ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg |
                                ImGuiTableFlags_SizingStretchProp | ImGuiTableFlags_Resizable;
  if (!ImGui::BeginTable("lesson_table", 4, flags)) return;
  ImGui::TableSetupColumn("quantity", ImGuiTableColumnFlags_WidthStretch, 3.0f);
  ImGui::TableSetupColumn("paper", ImGuiTableColumnFlags_WidthStretch, 2.0f);
  ImGui::TableSetupColumn("here", ImGuiTableColumnFlags_WidthStretch, 2.0f);
  ImGui::TableSetupColumn("verdict", ImGuiTableColumnFlags_WidthStretch, 1.5f);
  ImGui::TableHeadersRow();
  for (const auto& row : r.table) {
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TextWrapped("%s", row.quantity.c_str());
    ImGui::TableNextColumn();
    ImGui::TextWrapped("%s", row.paper.c_str());
    ImGui::TableNextColumn();
    ImGui::TextWrapped("%s", row.here.c_str());
    ImGui::TableNextColumn();
    const bool disagrees = row.verdict.rfind("disagrees", 0) == 0;
    const bool agrees = row.verdict.rfind("agrees", 0) == 0;
    ImGui::PushStyleColor(ImGuiCol_Text, disagrees ? kWarningColor
                                         : agrees  ? ImVec4(0.5f, 0.9f, 0.5f, 1.0f)
                                                   : ImGui::GetStyleColorVec4(ImGuiCol_Text));
    ImGui::TextWrapped("%s", row.verdict.c_str());
    ImGui::PopStyleColor();
  }
  ImGui::EndTable();
}

}  // namespace

void show_lessons(LabState& lab, LessonsView& view) {
  const auto& list = flt::demos::lessons();
  auto& settings = lab.scenario.lessons;
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  ImGui::BeginChild("lesson_list", ImVec2(300, avail.y - 4), true);
  section("Lessons: the papers in miniature");
  const bool running = lab.lessons.progress->running;
  for (size_t i = 0; i < list.size(); ++i) {
    ImGui::BeginDisabled(running);
    const std::string label = std::to_string(i + 1) + ". " + list[i].title;
    const std::string shown = fitted(label, 280);  // the full title in a tooltip when shortened
    if (ImGui::Selectable((shown + "##lesson" + std::to_string(i)).c_str(),
                          settings.lesson == static_cast<int>(i), ImGuiSelectableFlags_None,
                          ImVec2(280, 0)))
      settings.lesson = static_cast<int>(i);
    ImGui::EndDisabled();
    if (shown != label && ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
      ImGui::SetTooltip("%s", label.c_str());
  }
  ImGui::Separator();
  const auto& lesson = list.at(static_cast<size_t>(settings.lesson));
  ImGui::TextWrapped("%s", lesson.paper.c_str());
  ImGui::BeginDisabled(running);
  if (ImGui::Button("Run quick version")) step_scene(lab, SceneId::kLessons);
  ImGui::EndDisabled();
  if (running) {
    ImGui::ProgressBar(lab.lessons.progress->done, ImVec2(280, 0));
    ImGui::TextWrapped("%s", lab.lessons.progress->stage_text().c_str());
  }
  ImGui::TextDisabled("The full version: flt-demo %s", lesson.key.c_str());
  ImGui::TextDisabled("(minutes; writes a PNG and a CSV)");
  ImGui::EndChild();
  ImGui::SameLine();

  ImGui::BeginChild("lesson_result", ImVec2(0, avail.y - 4), false);
  const LessonOutcome& outcome = lab.lessons.job.result();
  view.shown = outcome.lesson;
  if (outcome.lesson != settings.lesson) {
    ImGui::TextDisabled(running ? "running..." : "Press \"Run quick version\" (or Step).");
  } else if (!outcome.error.empty()) {
    ImGui::TextColored(kWarningColor, "the lesson failed: %s", outcome.error.c_str());
  } else {
    const auto& r = outcome.result;
    ImGui::PushStyleColor(ImGuiCol_Text, kHeadingColor);
    fitted_text(lesson.title + "  (quick, " + tick_label(r.seconds) + " s)",
                ImGui::GetContentRegionAvail().x);
    ImGui::PopStyleColor();
    ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
    for (const auto& line : r.setup) ImGui::TextWrapped("%s", line.c_str());
    ImGui::PopStyleColor();
    result_table(r);
    const ImVec2 region = ImGui::GetContentRegionAvail();
    const size_t panels = r.panels.size();
    if (panels > 0) {
      const float width = region.x / static_cast<float>(panels) - 8;
      const float height = std::max(160.0f, region.y - ImGui::GetTextLineHeightWithSpacing() - 8);
      for (size_t p = 0; p < panels; ++p) {
        if (p > 0) ImGui::SameLine();
        ImGui::BeginGroup();
        lesson_plot(("lesson_plot" + std::to_string(p)).c_str(), r.panels[p],
                    ImVec2(width, height));
        ImGui::EndGroup();
      }
    }
  }
  ImGui::EndChild();
}

}  // namespace flt::viz
