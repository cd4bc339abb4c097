#include "app/plot.h"

#include <GL/gl.h>

#include <algorithm>
#include <cmath>
#include <numeric>

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
  const float left = 58.0f, bottom = 34.0f, top = 8.0f, right = 10.0f;
  const ImVec2 min(origin.x + left, origin.y + top),
      max(origin.x + size.x - right, origin.y + size.y - bottom);
  draw->AddRectFilled(min, max, IM_COL32(25, 25, 32, 255));

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
  if (y_label) draw->AddText(ImVec2(origin.x + 2, origin.y - 2), kText, y_label);

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

  // legend, top right
  float ly = min.y + 6;
  for (const auto& s : series) {
    if (s.label.empty()) continue;
    const ImVec2 ts = ImGui::CalcTextSize(s.label.c_str());
    const float lx = max.x - ts.x - 34;
    draw->AddRectFilled(ImVec2(lx - 4, ly - 2), ImVec2(max.x - 4, ly + ts.y + 2),
                        IM_COL32(20, 20, 26, 200));
    if (s.markers) {
      draw->AddCircleFilled(ImVec2(lx + 10, ly + ts.y * 0.5f), 3.0f, s.color, 8);
    } else {
      draw->AddLine(ImVec2(lx, ly + ts.y * 0.5f), ImVec2(lx + 20, ly + ts.y * 0.5f), s.color, 2.5f);
    }
    draw->AddText(ImVec2(lx + 26, ly), kText, s.label.c_str());
    ly += ts.y + 4;
  }
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
                  ImVec2 size, float* yaw, float* pitch, Colormap map, bool log) {
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
  const auto tf = [log](float v) { return log ? std::log10(std::max(v, 1e-6f)) : v; };
  float lo = INFINITY, hi = -INFINITY;
  for (float v : heights) {
    lo = std::min(lo, tf(v));
    hi = std::max(hi, tf(v));
  }
  const float span = hi - lo > 0 ? hi - lo : 1.0f;
  const float cy = std::cos(*yaw), syaw = std::sin(*yaw), cp = std::cos(*pitch),
              sp = std::sin(*pitch);
  const float scale = 0.42f * std::min(size.x, size.y);
  const ImVec2 center(origin.x + 0.5f * size.x, origin.y + 0.55f * size.y);
  struct P {
    ImVec2 screen;
    float depth;
  };
  const auto project = [&](int r, int c) {
    const float x = 2.0f * c / (cols - 1) - 1.0f, y = 2.0f * r / (rows - 1) - 1.0f;
    const float z = (tf(heights[static_cast<size_t>(r) * cols + c]) - lo) / span - 0.5f;
    const float xr = cy * x - syaw * y, yr = syaw * x + cy * y;  // yaw about the vertical axis
    // camera elevated by `pitch`: farther points (larger yr) sit higher on screen and draw first
    const float up = z * cp + yr * sp;
    const float depth = yr * cp - z * sp;
    return P{ImVec2(center.x + scale * xr, center.y - scale * up), depth};
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
  draw->PopClipRect();
  draw->AddText(ImVec2(origin.x + 6, origin.y + 4), kText, "drag to rotate");
  ImGui::PopID();
}

}  // namespace flt::viz
