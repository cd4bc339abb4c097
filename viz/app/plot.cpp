#include "app/plot.h"

#include <GL/gl.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

namespace flt::viz {

ImU32 to_imu32(const Rgba& c, uint8_t alpha) {
  return IM_COL32(c[0], c[1], c[2], alpha);
}

Texture::~Texture() {
  if (id_ != 0) glDeleteTextures(1, &id_);
}

void Texture::update(int64_t version, const std::vector<uint8_t>& rgba, int width, int height) {
  if (version == version_ && id_ != 0) return;
  if (id_ == 0) glGenTextures(1, &id_);
  glBindTexture(GL_TEXTURE_2D, id_);
  // nearest: each cell of an attention matrix stays a crisp square
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_S, GL_CLAMP_TO_EDGE);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_T, GL_CLAMP_TO_EDGE);
  glPixelStorei(GL_UNPACK_ALIGNMENT, 1);
  glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA, width, height, 0, GL_RGBA, GL_UNSIGNED_BYTE, rgba.data());
  version_ = version;
}

namespace {

constexpr ImU32 kAxis = IM_COL32(170, 170, 180, 255);
constexpr ImU32 kGrid = IM_COL32(70, 70, 80, 255);
constexpr ImU32 kText = IM_COL32(220, 220, 225, 255);

}  // namespace

void line_plot(const char* id, const std::vector<Series>& series, ImVec2 size, bool log_y,
               const char* x_label, const char* y_label, bool log_x) {
  ImGui::PushID(id);
  ImDrawList* draw = ImGui::GetWindowDrawList();
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  ImGui::InvisibleButton("plot", size);
  const float left = 58.0f, bottom = 34.0f, right = 10.0f;
  // the legend sits in rows above the plot area, never over the data
  constexpr float kSwatch = 26.0f, kSpacing = 14.0f;
  std::vector<const Series*> entries;
  std::vector<float> widths;
  for (const auto& s : series) {
    if (s.label.empty()) continue;
    entries.push_back(&s);
    widths.push_back(kSwatch + ImGui::CalcTextSize(s.label.c_str()).x);
  }
  const float legend_left = origin.x + left;
  const float legend_width = size.x - left - right;
  const auto rows = legend_rows(widths, legend_width, kSpacing);
  const float line_h = ImGui::GetTextLineHeight() + 2.0f;
  const float legend_h = rows.empty() ? 0.0f : (rows.back() + 1) * line_h;
  // The y label sits above the axis, left of the plot; one wider than the left margin reaches into
  // the legend's last row, so it takes a row of its own.
  const bool y_label_row = y_label != nullptr && ImGui::CalcTextSize(y_label).x > left - 6.0f;
  const float top = 8.0f + legend_h + (y_label_row ? line_h : 0.0f);
  const ImVec2 min(origin.x + left, origin.y + top),
      max(origin.x + size.x - right, origin.y + size.y - bottom);
  draw->AddRectFilled(min, max, IM_COL32(25, 25, 32, 255));
  {
    float lx = legend_left;
    int row = 0;
    for (size_t k = 0; k < entries.size(); ++k) {
      if (rows[k] != row) {
        row = rows[k];
        lx = legend_left;
      }
      const Series& s = *entries[k];
      const float ly = origin.y + 4.0f + row * line_h;
      const float mid = ly + 0.5f * ImGui::GetTextLineHeight();
      if (s.markers) {
        draw->AddCircleFilled(ImVec2(lx + 10, mid), 3.0f, s.color, 8);
      } else {
        draw->AddLine(ImVec2(lx, mid), ImVec2(lx + 20, mid), s.color, 2.5f);
      }
      draw->AddText(ImVec2(lx + kSwatch, ly), kText, s.label.c_str());
      lx += widths[k] + kSpacing;
    }
  }

  // data ranges (finite values; positive ones on a log axis)
  const auto x_of = [](const Series& s, size_t i) {
    return s.xs.empty() ? static_cast<float>(i + 1) : s.xs[i];
  };
  const auto usable = [&](float x, float y) {
    return std::isfinite(x) && std::isfinite(y) && !(log_y && y <= 0) && !(log_x && x <= 0);
  };
  float lo = INFINITY, hi = -INFINITY, xlo = INFINITY, xhi = -INFINITY;
  for (const auto& s : series) {
    for (size_t i = 0; i < s.ys.size(); ++i) {
      const float x = x_of(s, i), y = s.ys[i];
      if (!usable(x, y)) continue;
      lo = std::min(lo, y);
      hi = std::max(hi, y);
      xlo = std::min(xlo, x);
      xhi = std::max(xhi, x);
    }
  }
  if (!std::isfinite(lo)) {
    draw->AddText(ImVec2(min.x + 10, min.y + 10), kText, "no data yet");
    ImGui::PopID();
    return;
  }
  const auto ty = [log_y](double y) { return log_y ? std::log10(y) : y; };
  const auto tx = [log_x](double x) { return log_x ? std::log10(x) : x; };
  double y0 = ty(lo), y1 = ty(hi);
  if (y1 - y0 < 1e-9) {
    y0 -= 0.5;
    y1 += 0.5;
  }
  const double pad = 0.05 * (y1 - y0);
  y0 -= pad;
  y1 += pad;
  double x0 = tx(xlo), x1 = tx(xhi);
  if (x1 - x0 < 1e-9) x1 = x0 + 1;
  const auto sx = [&](double x) {
    return min.x + static_cast<float>((tx(x) - x0) / (x1 - x0)) * (max.x - min.x);
  };
  const auto sy = [&](double y) {
    return max.y - static_cast<float>((ty(y) - y0) / (y1 - y0)) * (max.y - min.y);
  };

  // ticks and grid
  const auto yticks =
      log_y ? log_ticks(std::pow(10.0, y0), std::pow(10.0, y1)) : nice_ticks(y0, y1, 5);
  for (double t : yticks) {
    const float y = sy(t);
    if (y < min.y - 1 || y > max.y + 1) continue;
    draw->AddLine(ImVec2(min.x, y), ImVec2(max.x, y), kGrid);
    const std::string label = tick_label(t);
    const ImVec2 ts = ImGui::CalcTextSize(label.c_str());
    draw->AddText(ImVec2(min.x - ts.x - 6, y - ts.y * 0.5f), kText, label.c_str());
  }
  const auto xticks = log_x ? log_ticks(xlo, xhi) : nice_ticks(x0, x1, 6);
  for (double t : xticks) {
    const float x = sx(t);
    if (x < min.x - 1 || x > max.x + 1) continue;
    draw->AddLine(ImVec2(x, min.y), ImVec2(x, max.y), kGrid);
    const std::string label = tick_label(t);
    const ImVec2 ts = ImGui::CalcTextSize(label.c_str());
    draw->AddText(ImVec2(x - ts.x * 0.5f, max.y + 4), kText, label.c_str());
  }
  draw->AddRect(min, max, kAxis);
  if (x_label) {
    const ImVec2 ts = ImGui::CalcTextSize(x_label);
    draw->AddText(ImVec2(0.5f * (min.x + max.x) - 0.5f * ts.x, max.y + 18), kText, x_label);
  }
  if (y_label) {  // rotated text is not available: the label sits above the axis, left of the plot
    const ImVec2 ts = ImGui::CalcTextSize(y_label);
    draw->AddText(ImVec2(std::max(origin.x + 2, min.x - ts.x - 4), min.y - ts.y - 2), kText,
                  y_label);
  }

  // series (lines decimated to about one point per pixel)
  draw->PushClipRect(min, max, true);
  for (const auto& s : series) {
    const size_t n = s.ys.size();
    if (s.markers) {
      for (size_t i = 0; i < n; ++i) {
        if (usable(x_of(s, i), s.ys[i]))
          draw->AddCircleFilled(ImVec2(sx(x_of(s, i)), sy(s.ys[i])), 2.0f, s.color, 6);
      }
      continue;
    }
    const size_t stride =
        std::max<size_t>(1, n / static_cast<size_t>(std::max(1.0f, max.x - min.x)));
    std::vector<ImVec2> points;
    for (size_t i = 0; i < n; i += stride) {
      if (!usable(x_of(s, i), s.ys[i])) continue;
      points.emplace_back(sx(x_of(s, i)), sy(s.ys[i]));
    }
    if (points.size() >= 2)
      draw->AddPolyline(points.data(), static_cast<int>(points.size()), s.color, 0, 1.8f);
  }
  draw->PopClipRect();

  ImGui::PopID();
}

void heatmap_texture(Texture& texture, int64_t version, const std::vector<float>& values, int rows,
                     int cols, float lo, float hi, Colormap map, bool log) {
  if (texture.ready() && texture.version() == version) return;
  texture.update(version, colorize(values, map, lo, hi, log), cols, rows);
}

void colorbar(ImDrawList* draw, ImVec2 min, ImVec2 max, float lo, float hi, Colormap map,
              bool log) {
  constexpr int kSteps = 48;
  const float h = (max.y - min.y) / kSteps;
  for (int i = 0; i < kSteps; ++i) {
    const float t0 = 1.0f - static_cast<float>(i) / kSteps,
                t1 = 1.0f - static_cast<float>(i + 1) / kSteps;
    const ImU32 c0 = to_imu32(colormap(map, t0)), c1 = to_imu32(colormap(map, t1));
    draw->AddRectFilledMultiColor(ImVec2(min.x, min.y + i * h),
                                  ImVec2(max.x, min.y + (i + 1) * h + 0.5f), c0, c0, c1, c1);
  }
  draw->AddRect(min, max, kAxis);
  const double a = log ? std::log10(std::max(lo, 1e-30f)) : lo;
  const double b = log ? std::log10(std::max(hi, 1e-30f)) : hi;
  const auto ticks = log ? log_ticks(std::max(lo, 1e-30f), hi) : nice_ticks(lo, hi, 4);
  for (double t : ticks) {
    const double u = ((log ? std::log10(t) : t) - a) / (b - a != 0 ? b - a : 1);
    if (u < -1e-6 || u > 1 + 1e-6) continue;
    const float y = max.y - static_cast<float>(u) * (max.y - min.y);
    draw->AddLine(ImVec2(max.x, y), ImVec2(max.x + 4, y), kAxis);
    const std::string label = tick_label(t);
    draw->AddText(ImVec2(max.x + 6, y - ImGui::GetFontSize() * 0.5f), kText, label.c_str());
  }
}

HeatmapHover heatmap(const char* id, const Texture& texture, const std::vector<float>& values,
                     int rows, int cols, float lo, float hi, Colormap map, bool log, ImVec2 size,
                     const char* title) {
  HeatmapHover hover;
  ImGui::PushID(id);
  ImDrawList* draw = ImGui::GetWindowDrawList();
  if (title) ImGui::TextUnformatted(title);
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const float bar_width = 14.0f, bar_space = 62.0f;
  const float side = std::max(8.0f, std::min(size.x - bar_space, size.y));
  const ImVec2 min = origin, max(origin.x + side, origin.y + side);
  ImGui::InvisibleButton("map", ImVec2(side + bar_space, side));
  hover.min = min;
  hover.max = max;
  if (texture.ready()) draw->AddImage(texture.imgui_id(), min, max);
  draw->AddRect(min, max, kAxis);
  colorbar(draw, ImVec2(max.x + 6, min.y), ImVec2(max.x + 6 + bar_width, max.y), lo, hi, map, log);
  if (ImGui::IsItemHovered() && rows > 0 && cols > 0) {
    const ImVec2 m = ImGui::GetIO().MousePos;
    const int col = static_cast<int>((m.x - min.x) / side * cols);
    const int row = static_cast<int>((m.y - min.y) / side * rows);
    if (row >= 0 && row < rows && col >= 0 && col < cols) {
      hover.active = true;
      hover.row = row;
      hover.col = col;
      hover.value = values[static_cast<size_t>(row) * cols + col];
      const float cw = side / cols, ch = side / rows;
      draw->AddRect(ImVec2(min.x + col * cw, min.y + row * ch),
                    ImVec2(min.x + (col + 1) * cw, min.y + (row + 1) * ch),
                    IM_COL32(255, 255, 255, 255));
      ImGui::SetTooltip("(i=%d, j=%d) weight %.5g", row, col, hover.value);
    }
  }
  ImGui::PopID();
  return hover;
}

void draw_contours(ImDrawList* draw, const std::vector<Segment>& segments, int rows, int cols,
                   ImVec2 min, ImVec2 max, ImU32 color) {
  const float sx = (max.x - min.x) / static_cast<float>(cols - 1),
              sy = (max.y - min.y) / static_cast<float>(rows - 1);
  for (const auto& s : segments) {
    draw->AddLine(ImVec2(min.x + s.x0 * sx, min.y + s.y0 * sy),
                  ImVec2(min.x + s.x1 * sx, min.y + s.y1 * sy), color, 1.0f);
  }
}

void surface_plot(const char* id, const std::vector<float>& heights, int rows, int cols,
                  ImVec2 size, float* yaw, float* pitch, Colormap map, bool log,
                  const std::vector<SurfacePath>& paths, float floor) {
  ImGui::PushID(id);
  ImDrawList* draw = ImGui::GetWindowDrawList();
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  ImGui::InvisibleButton("surface", size);
  if (ImGui::IsItemActive() && ImGui::IsMouseDragging(ImGuiMouseButton_Left)) {  // drag to rotate
    *yaw += ImGui::GetIO().MouseDelta.x * 0.01f;
    *pitch = std::clamp(*pitch + ImGui::GetIO().MouseDelta.y * 0.01f, 0.1f, 1.5f);
  }
  draw->AddRectFilled(origin, ImVec2(origin.x + size.x, origin.y + size.y),
                      IM_COL32(20, 20, 26, 255));
  if (rows < 2 || cols < 2) {
    ImGui::PopID();
    return;
  }
  const auto tf = [log, floor](float v) { return log ? std::log10(std::max(v, floor)) : v; };
  float lo = INFINITY, hi = -INFINITY;
  for (float v : heights) {
    lo = std::min(lo, tf(v));
    hi = std::max(hi, tf(v));
  }
  const float span = hi - lo > 0 ? hi - lo : 1.0f;
  // the whole box [-1, 1]^2 x [-0.5, 0.5] fits the rectangle at this angle (never cut off)
  const SurfaceCamera camera = fit_surface_camera(*yaw, *pitch, size.x, size.y, 18.0f);
  struct P {
    ImVec2 screen;
    float depth;
  };
  const auto project_xyz = [&](float x, float y, float h) {
    const auto p = camera.project(x, y, (tf(h) - lo) / span - 0.5f);
    return P{ImVec2(origin.x + p.x, origin.y + p.y), p.depth};
  };
  const auto project = [&](int r, int c) {
    return project_xyz(2.0f * c / (cols - 1) - 1.0f, 2.0f * r / (rows - 1) - 1.0f,
                       heights[static_cast<size_t>(r) * cols + c]);
  };
  struct Quad {
    ImVec2 p[4];
    float depth;
    float t;
  };
  std::vector<Quad> quads;
  quads.reserve(static_cast<size_t>(rows - 1) * (cols - 1));
  for (int r = 0; r + 1 < rows; ++r) {
    for (int c = 0; c + 1 < cols; ++c) {
      const P a = project(r, c), b = project(r, c + 1), d = project(r + 1, c + 1),
              e = project(r + 1, c);
      const float mean = 0.25f * (tf(heights[static_cast<size_t>(r) * cols + c]) +
                                  tf(heights[static_cast<size_t>(r) * cols + c + 1]) +
                                  tf(heights[static_cast<size_t>(r + 1) * cols + c + 1]) +
                                  tf(heights[static_cast<size_t>(r + 1) * cols + c]));
      quads.push_back({{a.screen, b.screen, d.screen, e.screen},
                       a.depth + b.depth + d.depth + e.depth,
                       (mean - lo) / span});
    }
  }
  std::sort(quads.begin(), quads.end(),
            [](const Quad& x, const Quad& y) { return x.depth > y.depth; });
  draw->PushClipRect(origin, ImVec2(origin.x + size.x, origin.y + size.y), true);
  for (const auto& q : quads) {
    draw->AddConvexPolyFilled(q.p, 4, to_imu32(colormap(map, q.t)));
    draw->AddPolyline(q.p, 4, IM_COL32(0, 0, 0, 60), ImDrawFlags_Closed, 1.0f);
  }
  // paths on top (a dark outline keeps them visible on any colour), a dot at the current point.
  // Separate segments between points at least 2 px apart: the joins of a thick polyline through a
  // racer jittering in place stuck out as black spikes around its dot.
  for (const auto& path : paths) {
    if (path.points.empty()) continue;
    std::vector<std::array<float, 2>> screen;
    screen.reserve(path.points.size());
    for (const auto& p : path.points) {
      const ImVec2 q = project_xyz(2.0f * p[0] - 1.0f, 2.0f * p[1] - 1.0f, p[2]).screen;
      screen.push_back({q.x, q.y});
    }
    const auto kept = path_vertices(screen, 2.0f);
    const auto at = [&](size_t k) { return ImVec2(screen[kept[k]][0], screen[kept[k]][1]); };
    for (const auto& [color, width] : {std::pair{IM_COL32(0, 0, 0, 200), 4.0f},
                                       std::pair{static_cast<ImU32>(path.color), 2.0f}}) {
      for (size_t k = 1; k < kept.size(); ++k) draw->AddLine(at(k - 1), at(k), color, width);
    }
    const ImVec2 dot(screen.back()[0], screen.back()[1]);
    draw->AddCircleFilled(dot, 5.5f, path.color);
    draw->AddCircle(dot, 5.5f, IM_COL32(0, 0, 0, 255), 0, 1.5f);
  }
  draw->PopClipRect();
  draw->AddText(ImVec2(origin.x + 6, origin.y + 4), kText, "drag to rotate");
  ImGui::PopID();
}

}  // namespace flt::viz
