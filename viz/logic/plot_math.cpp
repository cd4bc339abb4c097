#include "logic/plot_math.h"

#include <algorithm>
#include <cmath>

#include "lessons/lessons.h"

namespace flt::viz {

std::vector<double> nice_ticks(double lo, double hi, int target) {
  std::vector<double> ticks;
  if (!std::isfinite(lo) || !std::isfinite(hi)) return ticks;
  if (hi < lo) std::swap(lo, hi);
  if (hi - lo <= 0.0) return {lo};
  const double raw = (hi - lo) / std::max(1, target);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double fraction = raw / magnitude;
  const double step = (fraction < 1.5   ? 1.0
                       : fraction < 3.5 ? 2.0
                       : fraction < 7.5 ? 5.0
                                        : 10.0) *
                      magnitude;
  for (double t = std::ceil(lo / step) * step; t <= hi + 1e-9 * step; t += step) {
    ticks.push_back(std::abs(t) < 1e-12 * step ? 0.0 : t);
  }
  return ticks;
}

std::vector<double> log_ticks(double lo, double hi) {
  if (!(lo > 0.0) || !(hi > 0.0)) return {};
  if (hi < lo) std::swap(lo, hi);
  const int first = static_cast<int>(std::floor(std::log10(lo)));
  const int last = static_cast<int>(std::ceil(std::log10(hi)));
  // Up to ~6 labelled decades; with fewer than 3 decades also label 2 and 5 times each power.
  const bool fine = last - first < 3;
  const int stride = std::max(1, (last - first + 1) / 6);
  std::vector<double> ticks;
  for (int e = first; e <= last; e += stride) {
    for (double mantissa : {1.0, 2.0, 5.0}) {
      if (mantissa != 1.0 && !fine) continue;
      const double t = mantissa * std::pow(10.0, e);
      if (t >= lo * (1 - 1e-9) && t <= hi * (1 + 1e-9)) ticks.push_back(t);
    }
  }
  if (ticks.empty()) return nice_ticks(lo, hi, 3);
  return ticks;
}

std::string tick_label(double value) {
  return demos::format_number(value, /*significant=*/4, /*small=*/1e-3, /*scientific_digits=*/0);
}

std::vector<float> smooth_ema(const std::vector<float>& values, float smoothing) {
  std::vector<float> out(values.size());
  double average = 0.0, weight = 0.0;
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) {  // do not let one NaN poison the rest of the curve
      out[i] = values[i];
      continue;
    }
    average = smoothing * average + (1.0 - smoothing) * values[i];
    weight = smoothing * weight + (1.0 - smoothing);
    out[i] = static_cast<float>(average / weight);  // debiased like TensorBoard
  }
  return out;
}

namespace {

// Viridis sampled at 9 points (matplotlib's table at 0, 1/8, ..., 1), interpolated linearly.
constexpr float kViridis[9][3] = {
    {0.267f, 0.005f, 0.329f}, {0.279f, 0.175f, 0.483f}, {0.230f, 0.322f, 0.546f},
    {0.173f, 0.449f, 0.558f}, {0.128f, 0.567f, 0.551f}, {0.158f, 0.684f, 0.502f},
    {0.369f, 0.789f, 0.383f}, {0.678f, 0.864f, 0.190f}, {0.993f, 0.906f, 0.144f}};
// Blue - white - red, for signed differences.
constexpr float kDiverging[5][3] = {{0.230f, 0.299f, 0.754f},
                                    {0.552f, 0.690f, 0.996f},
                                    {0.950f, 0.950f, 0.950f},
                                    {0.957f, 0.604f, 0.482f},
                                    {0.706f, 0.016f, 0.150f}};

template <size_t N>
Rgba interpolate(const float (&table)[N][3], float t) {
  const float x = t * static_cast<float>(N - 1);
  const int i = std::min(static_cast<int>(x), static_cast<int>(N) - 2);
  const float f = x - static_cast<float>(i);
  Rgba out{};
  for (int c = 0; c < 3; ++c) {
    out[c] =
        static_cast<uint8_t>(std::lround(255.0f * (table[i][c] * (1 - f) + table[i + 1][c] * f)));
  }
  out[3] = 255;
  return out;
}

}  // namespace

Rgba earlier_run_color(int index) {
  // Okabe-Ito's colour-blind-safe set without its orange and sky blue (the current run's), with
  // three more hues.
  static constexpr std::array<Rgba, 8> kPalette = {{{230, 230, 120, 200},
                                                    {200, 130, 255, 200},
                                                    {0, 158, 115, 220},
                                                    {204, 121, 167, 220},
                                                    {240, 228, 66, 220},
                                                    {0, 114, 178, 230},
                                                    {213, 94, 0, 220},
                                                    {180, 180, 180, 200}}};
  const int n = static_cast<int>(kPalette.size());
  return kPalette[static_cast<size_t>(((index % n) + n) % n)];
}

Rgba colormap(Colormap map, float t) {
  if (std::isnan(t)) return {255, 0, 255, 255};
  t = std::clamp(t, 0.0f, 1.0f);
  return map == Colormap::kViridis ? interpolate(kViridis, t) : interpolate(kDiverging, t);
}

std::vector<uint8_t> colorize(const std::vector<float>& values, Colormap map, float lo, float hi,
                              bool log) {
  std::vector<uint8_t> rgba(values.size() * 4);
  const auto transform = [log](float v) { return log ? std::log10(std::max(v, 1e-30f)) : v; };
  const float a = transform(lo), b = transform(hi);
  const float span = b - a != 0.0f ? b - a : 1.0f;
  for (size_t i = 0; i < values.size(); ++i) {
    const Rgba c = colormap(map, (transform(values[i]) - a) / span);
    std::copy(c.begin(), c.end(), rgba.begin() + static_cast<std::ptrdiff_t>(4 * i));
  }
  return rgba;
}

std::vector<Segment> contour_segments(const std::vector<float>& values, int rows, int cols,
                                      const std::vector<float>& levels) {
  std::vector<Segment> out;
  if (rows < 2 || cols < 2 || values.size() != static_cast<size_t>(rows) * cols) return out;
  const auto at = [&](int r, int c) { return values[static_cast<size_t>(r) * cols + c]; };
  for (int li = 0; li < static_cast<int>(levels.size()); ++li) {
    const float level = levels[li];
    for (int r = 0; r + 1 < rows; ++r) {
      for (int c = 0; c + 1 < cols; ++c) {
        // corners in order: (c, r), (c+1, r), (c+1, r+1), (c, r+1); edges between consecutive
        // corners
        const float v[4] = {at(r, c), at(r, c + 1), at(r + 1, c + 1), at(r + 1, c)};
        const float px[4] = {0, 1, 1, 0}, py[4] = {0, 0, 1, 1};
        float cross_x[4], cross_y[4];
        int crossings = 0;
        for (int e = 0; e < 4; ++e) {
          const float a = v[e], b = v[(e + 1) % 4];
          if ((a < level) != (b < level) && std::isfinite(a) && std::isfinite(b)) {
            const float t = (level - a) / (b - a);
            cross_x[crossings] = c + px[e] + t * (px[(e + 1) % 4] - px[e]);
            cross_y[crossings] = r + py[e] + t * (py[(e + 1) % 4] - py[e]);
            ++crossings;
          }
        }
        // 2 crossings: one segment; 4 (saddle): pair them in edge order
        for (int k = 0; k + 1 < crossings; k += 2) {
          out.push_back({cross_x[k], cross_y[k], cross_x[k + 1], cross_y[k + 1], li});
        }
      }
    }
  }
  return out;
}

std::vector<int> legend_rows(const std::vector<float>& widths, float available, float spacing) {
  std::vector<int> rows;
  int row = 0;
  float used = 0.0f;
  for (float w : widths) {
    if (used > 0.0f && used + spacing + w > available) {
      row += 1;
      used = 0.0f;
    }
    used += (used > 0.0f ? spacing : 0.0f) + w;
    rows.push_back(row);
  }
  return rows;
}

std::vector<float> block_mean(const std::vector<float>& values, int rows, int cols, int factor,
                              int* out_rows, int* out_cols,
                              const std::function<float(float)>& transform) {
  factor = std::max(1, factor);
  const int r_out = (rows + factor - 1) / factor, c_out = (cols + factor - 1) / factor;
  std::vector<float> out(static_cast<size_t>(r_out) * c_out, 0.0f);
  for (int r = 0; r < r_out; ++r) {
    for (int c = 0; c < c_out; ++c) {
      double sum = 0.0;
      int count = 0;
      for (int i = r * factor; i < std::min(rows, (r + 1) * factor); ++i) {
        for (int j = c * factor; j < std::min(cols, (c + 1) * factor); ++j) {
          const float v = values[static_cast<size_t>(i) * cols + j];
          sum += transform ? transform(v) : v;
          ++count;
        }
      }
      out[static_cast<size_t>(r) * c_out + c] = static_cast<float>(sum / std::max(1, count));
    }
  }
  *out_rows = r_out;
  *out_cols = c_out;
  return out;
}

SurfaceCamera::Point SurfaceCamera::project(float x, float y, float z) const {
  const float cy = std::cos(yaw), sy = std::sin(yaw), cp = std::cos(pitch), sp = std::sin(pitch);
  const float xr = cy * x - sy * y, yr = sy * x + cy * y;  // yaw about the vertical axis
  // camera elevated by `pitch`: farther points (larger yr) sit higher on screen
  const float up = z * cp + yr * sp;
  const float depth = yr * cp - z * sp;
  return {center_x + scale * xr, center_y - scale * up, depth};
}

SurfaceCamera fit_surface_camera(float yaw, float pitch, float width, float height, float margin) {
  SurfaceCamera camera;
  camera.yaw = yaw;
  camera.pitch = pitch;
  float lo_x = INFINITY, hi_x = -INFINITY, lo_y = INFINITY, hi_y = -INFINITY;
  for (float x : {-1.0f, 1.0f}) {  // the corners of the bounding box at unit scale
    for (float y : {-1.0f, 1.0f}) {
      for (float z : {-0.5f, 0.5f}) {
        const auto p = camera.project(x, y, z);
        lo_x = std::min(lo_x, p.x);
        hi_x = std::max(hi_x, p.x);
        lo_y = std::min(lo_y, p.y);
        hi_y = std::max(hi_y, p.y);
      }
    }
  }
  const float w = std::max(1.0f, width - 2 * margin), h = std::max(1.0f, height - 2 * margin);
  camera.scale = std::min(w / std::max(1e-6f, hi_x - lo_x), h / std::max(1e-6f, hi_y - lo_y));
  camera.center_x = 0.5f * width - camera.scale * 0.5f * (lo_x + hi_x);
  camera.center_y = 0.5f * height - camera.scale * 0.5f * (lo_y + hi_y);
  return camera;
}

std::vector<size_t> path_vertices(const std::vector<std::array<float, 2>>& points, float min_step) {
  std::vector<size_t> kept;
  for (size_t i = 0; i < points.size(); ++i) {
    if (!kept.empty()) {
      const auto& last = points[kept.back()];
      const float step = std::hypot(points[i][0] - last[0], points[i][1] - last[1]);
      if (step < min_step) {
        if (i + 1 == points.size()) kept.back() = i;  // the current point is where the dot is
        continue;
      }
    }
    kept.push_back(i);
  }
  if (kept.size() == 1 && points.size() > 1) kept.insert(kept.begin(), 0);
  return kept;
}

std::vector<int> hidden_curves(const std::vector<std::vector<float>>& xs,
                               const std::vector<std::vector<float>>& ys, bool log_y,
                               float tolerance) {
  const auto t = [log_y](float y) { return log_y ? std::log10(y) : y; };
  float lo = INFINITY, hi = -INFINITY;
  for (const auto& curve : ys) {
    for (float y : curve) {
      if (!std::isfinite(t(y))) continue;
      lo = std::min(lo, t(y));
      hi = std::max(hi, t(y));
    }
  }
  const float limit = tolerance * (hi > lo ? hi - lo : 1.0f);
  std::vector<int> hidden(ys.size(), -1);
  for (size_t i = 0; i < ys.size(); ++i) {
    for (size_t j = ys.size(); j-- > i + 1 && hidden[i] < 0;) {  // the topmost cover first
      if (ys[j].size() != ys[i].size() || xs[j] != xs[i] || ys[i].empty()) continue;
      bool covered = true;
      for (size_t k = 0; k < ys[i].size() && covered; ++k)
        covered = std::abs(t(ys[i][k]) - t(ys[j][k])) <= limit;
      if (covered) hidden[i] = static_cast<int>(j);
    }
  }
  return hidden;
}

}  // namespace flt::viz
