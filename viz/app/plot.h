#pragma once
// flt-lab's own small plotting layer on ImGui draw lists (ImPlot is not packaged by Debian):
// line plots with axes, ticks, legend and log scale; heatmaps as GL textures with a colorbar and
// hover readout; contour overlays; a simple 3-D surface. Maths lives in logic/plot_math.h.

#include <imgui.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "logic/plot_math.h"

namespace flt::viz {

/// An RGBA8 OpenGL texture, re-uploaded only when the caller's version changes.
class Texture {
 public:
  Texture() = default;
  ~Texture();
  Texture(const Texture&) = delete;
  Texture& operator=(const Texture&) = delete;
  /// Uploads when `version` differs from the last upload.
  void update(int64_t version, const std::vector<uint8_t>& rgba, int width, int height);
  bool ready() const { return id_ != 0; }
  int64_t version() const { return version_; }
  ImTextureID imgui_id() const { return reinterpret_cast<ImTextureID>(static_cast<intptr_t>(id_)); }

 private:
  unsigned int id_ = 0;
  int64_t version_ = -1;
};

struct Series {
  std::string label;
  std::vector<float> ys;  ///< y at x = 1, 2, ... (or at xs)
  ImU32 color;
  std::vector<float> xs = {};  ///< x of each y; empty: 1, 2, ...
  bool markers = false;        ///< dots instead of a line (scatter)
};

/// Line plot with axes, nice ticks, optional log10 axes and a legend.
void line_plot(const char* id, const std::vector<Series>& series, ImVec2 size, bool log_y,
               const char* x_label, const char* y_label, bool log_x = false);

struct HeatmapHover {
  bool active = false;  ///< the mouse is over a cell
  int row = 0, col = 0;
  float value = 0.0f;
  ImVec2 min{0, 0}, max{0, 0};  ///< where the map was drawn
};

/// Heatmap of `values` (rows x cols) from `texture` (already updated by the caller via
/// heatmap_texture), with its colorbar to the right, and a tooltip "(i, j) = value" under the
/// mouse.
HeatmapHover heatmap(const char* id, const Texture& texture, const std::vector<float>& values,
                     int rows, int cols, float lo, float hi, Colormap map, bool log, ImVec2 size,
                     const char* title);

/// Uploads `values` into `texture` with the colormap when `version` changed.
void heatmap_texture(Texture& texture, int64_t version, const std::vector<float>& values, int rows,
                     int cols, float lo, float hi, Colormap map, bool log);

/// A vertical colorbar with tick labels in [lo, hi].
void colorbar(ImDrawList* draw, ImVec2 min, ImVec2 max, float lo, float hi, Colormap map, bool log);

/// Contour segments (grid coordinates) drawn over the rect [min, max] of a rows x cols grid.
void draw_contours(ImDrawList* draw, const std::vector<Segment>& segments, int rows, int cols,
                   ImVec2 min, ImVec2 max, ImU32 color);

/// A path drawn over a surface: points as (u, v, height) with u the column and v the row as
/// fractions of the grid in [0, 1], the height in the surface's units.
struct SurfacePath {
  std::vector<std::array<float, 3>> points;
  ImU32 color;
};

/// A rotatable 3-D surface of a rows x cols height field (painter's algorithm, filled quads),
/// scaled to fit `size` whole at every angle, with `paths` drawn over it (a dot at each end).
/// With `log`, heights are shown as log10(max(h, floor)).
void surface_plot(const char* id, const std::vector<float>& heights, int rows, int cols,
                  ImVec2 size, float* yaw, float* pitch, Colormap map, bool log,
                  const std::vector<SurfacePath>& paths = {}, float floor = 1e-6f);

ImU32 to_imu32(const Rgba& c, uint8_t alpha = 255);

}  // namespace flt::viz
