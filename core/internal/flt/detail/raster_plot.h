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

namespace flt::detail {

using Rgb = std::array<unsigned char, 3>;

/// Tableau-like categorical colours for series (12: the synthetic suite of flt-eval-optim draws
/// 10 optimizers).
inline Rgb series_color(size_t i) {
  static const Rgb colors[] = {{31, 119, 180},  {255, 127, 14}, {44, 160, 44},   {214, 39, 40},
                               {148, 103, 189}, {140, 86, 75},  {227, 119, 194}, {127, 127, 127},
                               {188, 189, 34},  {23, 190, 207}, {0, 0, 128},     {128, 128, 0}};
  return colors[i % (sizeof(colors) / sizeof(colors[0]))];
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

/// One curve of an x-y panel.
struct XySeries {
  std::string label;
  std::vector<double> x, y;  ///< non-finite y: no point
  Rgb color;
  bool thin = false;  ///< guides and baselines: 1 pixel
};

/// Tick positions (in axis units: log10 of the value on a log axis) for [lo, hi]: whole decades
/// on a log axis that spans two or more, else 1-2-5 steps giving 3 to 7 ticks.
inline std::vector<double> axis_ticks(double lo, double hi, bool log) {
  std::vector<double> ticks;
  if (log && hi - lo >= 2.0) {
    const double step = std::ceil((hi - lo) / 6.0);
    for (double t = std::ceil(lo / step) * step; t <= hi + 1e-9; t += step) ticks.push_back(t);
    return ticks;
  }
  if (log) {  // a short log axis: 1-2-5 steps of the values, placed at their logs
    const double a = std::pow(10.0, lo), b = std::pow(10.0, hi);
    for (double t : axis_ticks(a, b, false)) {
      if (t > 0) ticks.push_back(std::log10(t));
    }
    return ticks;
  }
  const double raw = (hi - lo) / 4.0;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * magnitude >= raw * 0.7) {
      step = m * magnitude;
      break;
    }
  }
  for (double t = std::ceil(lo / step) * step; t <= hi + 1e-9 * step; t += step)
    ticks.push_back(std::abs(t) < 1e-12 * step ? 0.0 : t);
  return ticks;
}

/// An x-y panel with a frame, ticks (whole decades on log axes), axis labels, a title and a
/// legend in the corner that hides the fewest points. A one-point series is a square marker.
inline void plot_xy_panel(Canvas& canvas, int x, int y, int w, int h, const std::string& title,
                          const std::string& x_label, const std::string& y_label,
                          const std::vector<XySeries>& series, bool log_x, bool log_y) {
  const Rgb black{0, 0, 0}, grey{200, 200, 200}, light{235, 235, 235};
  canvas.text(x + 8, y + 4, title, black, 2);
  canvas.text(x + 8, y + 22, y_label + (log_y ? " (log scale)" : ""), black);
  const int left = x + 58, top = y + 34, right = x + w - 14, bottom = y + h - 32;
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
  const double pad = 0.06 * (y_hi - y_lo);  // keep curves off the frame
  y_lo -= pad, y_hi += pad;
  const auto px = [&](double v) { return left + (right - left) * (tx(v) - x_lo) / (x_hi - x_lo); };
  const auto py = [&](double v) {
    return bottom - (bottom - top) * (ty(v) - y_lo) / (y_hi - y_lo);
  };
  const auto tick_text = [](double t, bool log) {
    char label[32];
    if (log && std::abs(t - std::round(t)) < 1e-9 && (t > 3 || t < -2)) {
      std::snprintf(label, sizeof(label), "1e%d", static_cast<int>(std::round(t)));
    } else {
      std::snprintf(label, sizeof(label), "%g", log ? std::pow(10.0, t) : t);
    }
    return std::string(label);
  };
  for (double t : axis_ticks(x_lo, x_hi, log_x)) {
    const int gx = left + static_cast<int>((right - left) * (t - x_lo) / (x_hi - x_lo));
    canvas.rect(gx, top, gx + 1, bottom, light);
    const std::string text = tick_text(t, log_x);
    canvas.text(gx - stb_easy_font_width(const_cast<char*>(text.c_str())) / 2, bottom + 4, text,
                black);
  }
  for (double t : axis_ticks(y_lo, y_hi, log_y)) {
    const int gy = bottom - static_cast<int>((bottom - top) * (t - y_lo) / (y_hi - y_lo));
    canvas.rect(left, gy, right, gy + 1, light);
    const std::string text = tick_text(t, log_y);
    canvas.text(left - 4 - stb_easy_font_width(const_cast<char*>(text.c_str())), gy - 3, text,
                black);
  }
  canvas.rect(left, top, right, top + 1, grey);
  canvas.rect(left, bottom, right, bottom + 1, grey);
  canvas.rect(left, top, left + 1, bottom, grey);
  canvas.rect(right, top, right + 1, bottom, grey);
  const std::string xl = x_label + (log_x ? " (log scale)" : "");
  canvas.text((left + right) / 2 - stb_easy_font_width(const_cast<char*>(xl.c_str())) / 2,
              bottom + 16, xl, black);
  for (const auto& s : series) {
    const size_t n = std::min(s.x.size(), s.y.size());
    const int thickness = s.thin ? 1 : 2;
    for (size_t j = 1; j < n; ++j) {
      if (!usable(s.x[j - 1], log_x) || !usable(s.y[j - 1], log_y) || !usable(s.x[j], log_x) ||
          !usable(s.y[j], log_y))
        continue;
      canvas.line(px(s.x[j - 1]), py(s.y[j - 1]), px(s.x[j]), py(s.y[j]), s.color, thickness);
    }
    for (size_t j = 0; j < n && (n == 1 || (!s.thin && n <= 12)); ++j) {  // measured points
      if (!usable(s.x[j], log_x) || !usable(s.y[j], log_y)) continue;
      const int cx = static_cast<int>(px(s.x[j])), cy = static_cast<int>(py(s.y[j]));
      const int r = n == 1 ? 3 : 2;
      canvas.rect(cx - r, cy - r, cx + r + 1, cy + r + 1, s.color);
    }
  }
  // Legend on a white box, in the corner of the plot that covers the fewest points.
  int legend_w = 0;
  for (const auto& s : series)
    legend_w = std::max(legend_w, stb_easy_font_width(const_cast<char*>(s.label.c_str())));
  const int box_w = legend_w + 30, box_h = 6 + 11 * static_cast<int>(series.size());
  int best = -1, best_x = left + 4, best_y = top + 3;
  for (int corner = 0; corner < 4; ++corner) {
    const int bx = corner % 2 == 0 ? left + 4 : right - 4 - box_w;
    const int by = corner < 2 ? top + 3 : bottom - 3 - box_h;
    int covered = 0;
    for (const auto& s : series) {
      for (size_t j = 0; j < std::min(s.x.size(), s.y.size()); ++j) {
        if (!usable(s.x[j], log_x) || !usable(s.y[j], log_y)) continue;
        const double cx = px(s.x[j]), cy = py(s.y[j]);
        covered += cx >= bx && cx <= bx + box_w && cy >= by && cy <= by + box_h;
      }
      // segments crossing the box count too: sample each one
      for (size_t j = 1; j < std::min(s.x.size(), s.y.size()); ++j) {
        if (!usable(s.x[j - 1], log_x) || !usable(s.y[j - 1], log_y) || !usable(s.x[j], log_x) ||
            !usable(s.y[j], log_y))
          continue;
        for (int k = 1; k < 8; ++k) {
          const double f = k / 8.0;
          const double cx = px(s.x[j - 1]) + f * (px(s.x[j]) - px(s.x[j - 1]));
          const double cy = py(s.y[j - 1]) + f * (py(s.y[j]) - py(s.y[j - 1]));
          covered += cx >= bx && cx <= bx + box_w && cy >= by && cy <= by + box_h;
        }
      }
    }
    if (best < 0 || covered < best) best = covered, best_x = bx, best_y = by;
  }
  canvas.rect(best_x, best_y, best_x + box_w, best_y + box_h, {255, 255, 255});
  int ly = best_y + 3;
  for (const auto& s : series) {
    canvas.rect(best_x + 4, ly + 2, best_x + 18, ly + (s.thin ? 4 : 6), s.color);
    canvas.text(best_x + 22, ly, s.label, black);
    ly += 11;
  }
}

/// Legend on top of a figure: entries flow left to right and wrap. Returns the legend's height.
inline int draw_legend(Canvas& canvas, int width, const std::vector<std::string>& names) {
  const int row = 22;
  int x = 8, y = 8;
  for (size_t i = 0; i < names.size(); ++i) {
    const int w = 20 + 2 * stb_easy_font_width(const_cast<char*>(names[i].c_str())) + 24;
    if (x > 8 && x + w > width) x = 8, y += row;
    canvas.rect(x, y, x + 14, y + 14, series_color(i));
    canvas.text(x + 20, y, names[i], {0, 0, 0}, 2);
    x += w;
  }
  return y + row + 6;
}

}  // namespace flt::detail
