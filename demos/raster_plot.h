#pragma once
// A small CPU raster canvas for the demos' PNG figures: lines, filled rectangles and text
// (stb_easy_font quads), written with stb_image_write. Header-only, used by one demo per binary.

#include <stb_easy_font.h>
#include <stb_image_write.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <vector>

namespace flt::demos {

using Rgb = std::array<unsigned char, 3>;

/// Tableau-like categorical colours for series.
inline Rgb series_color(size_t i) {
  static const Rgb colors[] = {{31, 119, 180},  {255, 127, 14}, {44, 160, 44},   {214, 39, 40},
                               {148, 103, 189}, {140, 86, 75},  {227, 119, 194}, {127, 127, 127}};
  return colors[i % 8];
}

class Canvas {
 public:
  Canvas(int width, int height)
      : width_(width), height_(height), pixels_(3 * width * height, 255) {}

  void pixel(int x, int y, const Rgb& c) {
    if (x < 0 || y < 0 || x >= width_ || y >= height_) return;
    std::copy(c.begin(), c.end(), pixels_.begin() + 3 * (y * width_ + x));
  }
  void rect(int x0, int y0, int x1, int y1, const Rgb& c) {
    for (int y = std::max(0, y0); y < std::min(height_, y1); ++y)
      for (int x = std::max(0, x0); x < std::min(width_, x1); ++x) pixel(x, y, c);
  }
  /// Thick-ish line by stepping along the longer axis.
  void line(double x0, double y0, double x1, double y1, const Rgb& c, int thickness = 2) {
    const int steps = static_cast<int>(std::max(std::abs(x1 - x0), std::abs(y1 - y0))) + 1;
    for (int i = 0; i <= steps; ++i) {
      const double t = static_cast<double>(i) / steps;
      const int x = static_cast<int>(std::lround(x0 + t * (x1 - x0)));
      const int y = static_cast<int>(std::lround(y0 + t * (y1 - y0)));
      rect(x - thickness / 2, y - thickness / 2, x - thickness / 2 + thickness,
           y - thickness / 2 + thickness, c);
    }
  }
  /// Text with its top-left corner at (x, y), stb_easy_font's 7-pixel-high glyphs scaled by
  /// `scale`.
  void text(int x, int y, const std::string& s, const Rgb& c, int scale = 1) {
    std::vector<char> buffer(s.size() * 300 + 300);
    const int quads = stb_easy_font_print(0, 0, const_cast<char*>(s.c_str()), nullptr,
                                          buffer.data(), static_cast<int>(buffer.size()));
    const auto* v = reinterpret_cast<const float*>(buffer.data());
    for (int q = 0; q < quads; ++q) {
      const float* quad = v + q * 16;  // 4 vertices of (x, y, z, colour)
      rect(x + static_cast<int>(quad[0]) * scale, y + static_cast<int>(quad[1]) * scale,
           x + static_cast<int>(quad[8]) * scale, y + static_cast<int>(quad[9]) * scale, c);
    }
  }
  bool save(const std::string& path) const {
    return stbi_write_png(path.c_str(), width_, height_, 3, pixels_.data(), 3 * width_) != 0;
  }

 private:
  int width_, height_;
  std::vector<unsigned char> pixels_;
};

/// One panel: series of y values (log10 axis when `log_y`) against their index, with a frame,
/// min/max labels on the y axis and a title.
inline void plot_panel(Canvas& canvas, int x, int y, int w, int h, const std::string& title,
                       const std::vector<std::vector<double>>& series, bool log_y) {
  const Rgb black{0, 0, 0}, grey{200, 200, 200};
  canvas.text(x + 4, y + 2, title, black, 2);
  const int left = x + 60, top = y + 24, right = x + w - 8, bottom = y + h - 16;
  double lo = INFINITY, hi = -INFINITY;
  size_t length = 1;
  const auto value = [&](double v) { return log_y ? std::log10(std::max(v, 1e-12)) : v; };
  for (const auto& s : series) {
    length = std::max(length, s.size());
    for (double v : s) {
      if (!std::isfinite(v)) continue;
      lo = std::min(lo, value(v));
      hi = std::max(hi, value(v));
    }
  }
  if (!(hi > lo)) hi = lo + 1.0;
  canvas.rect(left, top, right, top + 1, grey);
  canvas.rect(left, bottom, right, bottom + 1, grey);
  canvas.rect(left, top, left + 1, bottom, grey);
  canvas.rect(right, top, right + 1, bottom, grey);
  char label[32];
  std::snprintf(label, sizeof(label), log_y ? "1e%.1f" : "%.3g", hi);
  canvas.text(x + 2, top, label, black);
  std::snprintf(label, sizeof(label), log_y ? "1e%.1f" : "%.3g", lo);
  canvas.text(x + 2, bottom - 8, label, black);
  for (size_t i = 0; i < series.size(); ++i) {
    const auto& s = series[i];
    for (size_t j = 1; j < s.size(); ++j) {
      if (!std::isfinite(s[j - 1]) || !std::isfinite(s[j])) continue;
      const auto px = [&](size_t k) {
        return left + (right - left) * static_cast<double>(k) / (length - 1);
      };
      const auto py = [&](double v) {
        return bottom - (bottom - top) * (value(v) - lo) / (hi - lo);
      };
      canvas.line(px(j - 1), py(s[j - 1]), px(j), py(s[j]), series_color(i));
    }
  }
}

/// One curve of an x-y panel.
struct XySeries {
  std::string label;
  std::vector<double> x, y;  ///< non-finite y: no point
  Rgb color;
  bool thin = false;  ///< guides and baselines: 1 pixel
};

/// An x-y panel with a frame, tick labels at the ends and the middle of both axes (log10 axes
/// where asked), axis labels, a title and a legend in the top-left corner. A one-point series is
/// drawn as a square marker.
inline void plot_xy_panel(Canvas& canvas, int x, int y, int w, int h, const std::string& title,
                          const std::string& x_label, const std::string& y_label,
                          const std::vector<XySeries>& series, bool log_x, bool log_y) {
  const Rgb black{0, 0, 0}, grey{200, 200, 200}, light{235, 235, 235};
  canvas.text(x + 6, y + 4, title, black, 2);
  const int left = x + 64, top = y + 26, right = x + w - 12, bottom = y + h - 34;
  const auto tx = [&](double v) { return log_x ? std::log10(v) : v; };
  const auto ty = [&](double v) { return log_y ? std::log10(v) : v; };
  const auto usable = [](double v, bool log) { return std::isfinite(v) && (!log || v > 0); };
  double x_lo = INFINITY, x_hi = -INFINITY, y_lo = INFINITY, y_hi = -INFINITY;
  for (const auto& s : series) {
    for (size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i) {
      if (!usable(s.x[i], log_x) || !usable(s.y[i], log_y)) continue;
      x_lo = std::min(x_lo, tx(s.x[i]));
      x_hi = std::max(x_hi, tx(s.x[i]));
      y_lo = std::min(y_lo, ty(s.y[i]));
      y_hi = std::max(y_hi, ty(s.y[i]));
    }
  }
  if (!(x_hi > x_lo)) x_lo -= 0.5, x_hi += 0.5;
  if (!(y_hi > y_lo)) y_lo -= 0.5, y_hi += 0.5;
  const double pad = 0.05 * (y_hi - y_lo);  // keep curves off the frame
  y_lo -= pad, y_hi += pad;
  const auto px = [&](double v) { return left + (right - left) * (tx(v) - x_lo) / (x_hi - x_lo); };
  const auto py = [&](double v) {
    return bottom - (bottom - top) * (ty(v) - y_lo) / (y_hi - y_lo);
  };
  char label[32];
  const auto format = [&](double v, bool log) {
    std::snprintf(label, sizeof(label), "%.3g", log ? std::pow(10.0, v) : v);
    return std::string(label);
  };
  for (int i = 0; i <= 4; ++i) {  // grid and tick labels at 0, 1/4, ..., 1 of each axis
    const double f = i / 4.0;
    const int gx = left + static_cast<int>((right - left) * f);
    const int gy = bottom - static_cast<int>((bottom - top) * f);
    canvas.rect(gx, top, gx + 1, bottom, light);
    canvas.rect(left, gy, right, gy + 1, light);
    const std::string xt = format(x_lo + f * (x_hi - x_lo), log_x);
    canvas.text(gx - stb_easy_font_width(const_cast<char*>(xt.c_str())) / 2, bottom + 4, xt, black);
    const std::string yt = format(y_lo + f * (y_hi - y_lo), log_y);
    canvas.text(left - 4 - stb_easy_font_width(const_cast<char*>(yt.c_str())), gy - 3, yt, black);
  }
  canvas.rect(left, top, right, top + 1, grey);
  canvas.rect(left, bottom, right, bottom + 1, grey);
  canvas.rect(left, top, left + 1, bottom, grey);
  canvas.rect(right, top, right + 1, bottom, grey);
  const std::string xl = x_label + (log_x ? " (log)" : "");
  canvas.text((left + right) / 2 - stb_easy_font_width(const_cast<char*>(xl.c_str())) / 2,
              bottom + 16, xl, black);
  canvas.text(x + 4, top - 12 + 0, y_label + (log_y ? " (log)" : ""), black);
  for (const auto& s : series) {
    const size_t n = std::min(s.x.size(), s.y.size());
    const int thickness = s.thin ? 1 : 2;
    if (n == 1 && usable(s.x[0], log_x) && usable(s.y[0], log_y)) {
      const int cx = static_cast<int>(px(s.x[0])), cy = static_cast<int>(py(s.y[0]));
      canvas.rect(cx - 3, cy - 3, cx + 4, cy + 4, s.color);
    }
    for (size_t j = 1; j < n; ++j) {
      if (!usable(s.x[j - 1], log_x) || !usable(s.y[j - 1], log_y) || !usable(s.x[j], log_x) ||
          !usable(s.y[j], log_y))
        continue;
      canvas.line(px(s.x[j - 1]), py(s.y[j - 1]), px(s.x[j]), py(s.y[j]), s.color, thickness);
    }
    for (size_t j = 0; j < n && !s.thin && n <= 12; ++j) {  // dots at the measured points
      if (!usable(s.x[j], log_x) || !usable(s.y[j], log_y)) continue;
      const int cx = static_cast<int>(px(s.x[j])), cy = static_cast<int>(py(s.y[j]));
      canvas.rect(cx - 2, cy - 2, cx + 3, cy + 3, s.color);
    }
  }
  int legend_w = 0;  // legend on a white box over the curves
  for (const auto& s : series)
    legend_w = std::max(legend_w, stb_easy_font_width(const_cast<char*>(s.label.c_str())));
  canvas.rect(left + 4, top + 3, left + 30 + legend_w,
              top + 8 + 11 * static_cast<int>(series.size()), {255, 255, 255});
  int ly = top + 6;
  for (const auto& s : series) {
    canvas.rect(left + 8, ly + 2, left + 22, ly + (s.thin ? 4 : 6), s.color);
    canvas.text(left + 26, ly, s.label, black);
    ly += 11;
  }
}

}  // namespace flt::demos
