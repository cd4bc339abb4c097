#pragma once
// GL-free pieces of the plotting layer: tick placement, smoothing, colormaps, contour lines.
// The drawing code in viz/app uses these; the tests check them without a GL context.

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace flt::viz {

/// "Nice" tick positions (1, 2, 5 x 10^k steps) covering [lo, hi], about `target` of them.
std::vector<double> nice_ticks(double lo, double hi, int target = 5);

/// Ticks for a log10 axis over [lo, hi] (both > 0): the powers of ten inside, plus 2 and 5 times
/// them when the range spans under 3 decades; nice linear ticks when none of those fall inside.
std::vector<double> log_ticks(double lo, double hi);

/// Short label for a tick value ("0.001", "2.5", "1e+04").
std::string tick_label(double value);

/// TensorBoard-style exponential moving average with debiasing; smoothing in [0, 1).
std::vector<float> smooth_ema(const std::vector<float>& values, float smoothing);

using Rgba = std::array<uint8_t, 4>;

enum class Colormap { kViridis, kDiverging };

/// Colour of t in [0, 1] (clamped; NaN gives magenta so bad values stand out).
Rgba colormap(Colormap map, float t);

/// The colour of earlier run `index` on a comparison plot: eight hues apart from each other and
/// from the current run's orange loss and blue accuracy, repeating after eight (runs past the
/// eighth are then told apart by their legend entry alone).
Rgba earlier_run_color(int index);

/// RGBA8 image of `values` (rows x cols, row-major) mapped from [lo, hi]; log10 first when `log`.
std::vector<uint8_t> colorize(const std::vector<float>& values, Colormap map, float lo, float hi,
                              bool log = false);

/// A contour segment in grid coordinates (column, row), fractional.
struct Segment {
  float x0, y0, x1, y1;
  int level;  ///< index into the levels passed to contour_segments
};

/// Marching squares over a rows x cols grid: the segments where `values` crosses each level.
std::vector<Segment> contour_segments(const std::vector<float>& values, int rows, int cols,
                                      const std::vector<float>& levels);

/// A legend laid out in rows above a plot (never over its data): the row of each entry, left to
/// right, wrapping when the next entry would pass `available` (a wider entry gets its own row).
std::vector<int> legend_rows(const std::vector<float>& widths, float available, float spacing);

/// Block means of a rows x cols grid over factor x factor blocks (the last ones may be smaller),
/// of transform(value): an anti-aliased downsample (picking every factor-th value instead leaves
/// spikes where a narrow valley falls on a picked cell).
std::vector<float> block_mean(const std::vector<float>& values, int rows, int cols, int factor,
                              int* out_rows, int* out_cols,
                              const std::function<float(float)>& transform = nullptr);

/// Where a 3-D surface is drawn: the unit height field (x, y in [-1, 1], z in [-0.5, 0.5]) seen
/// from `yaw` and `pitch`, scaled and centred so that its whole bounding box fits a width x height
/// rectangle (minus `margin` on each side) at every rotation.
struct SurfaceCamera {
  float yaw = 0.0f, pitch = 0.0f;
  float scale = 1.0f;                      ///< pixels per unit
  float center_x = 0.0f, center_y = 0.0f;  ///< where the origin lands, relative to the rectangle
  struct Point {
    float x, y;   ///< relative to the rectangle's top-left corner
    float depth;  ///< larger is farther (drawn first)
  };
  Point project(float x, float y, float z) const;
};
SurfaceCamera fit_surface_camera(float yaw, float pitch, float width, float height, float margin);

/// The indices of `points` (screen pixels) a drawn path goes through: each at least `min_step`
/// from the one kept before it, the first and the last always kept. An optimizer circling its
/// minimum for hundreds of steps otherwise leaves segments a fraction of a pixel long whose thick
/// joins stick out as spikes.
std::vector<size_t> path_vertices(const std::vector<std::array<float, 2>>& points, float min_step);

/// For each curve i (drawn in order, later ones on top), the index of a later curve that hides it:
/// one sampled at the same x whose y is everywhere within `tolerance` of the plot's height (the y
/// range of all curves; log10 of y when `log_y`) of curve i's; -1 when none does. A legend entry
/// whose curve cannot be seen should say where it is.
std::vector<int> hidden_curves(const std::vector<std::vector<float>>& xs,
                               const std::vector<std::vector<float>>& ys, bool log_y,
                               float tolerance);

}  // namespace flt::viz
