#pragma once
// A small CPU raster canvas for the demos' PNG figures: lines, filled rectangles and text
// (stb_easy_font quads), written with stb_image_write. Header-only, used by one demo per binary.

#include <stb_easy_font.h>
#include <stb_image_write.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
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
  // Axis labels in the data's units (a log axis too: 0.35 reads better than 1e-0.5).
  char label[32];
  std::snprintf(label, sizeof(label), "%.3g", log_y ? std::pow(10.0, hi) : hi);
  canvas.text(x + 2, top, label, black);
  std::snprintf(label, sizeof(label), "%.3g", log_y ? std::pow(10.0, lo) : lo);
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

}  // namespace flt::demos
