#pragma once
// flt-lab application: the window, the per-frame panels over explicit state, headless PNG export
// and frame-time profiling. main.cpp only parses the command line.

#include <imgui.h>

#include <memory>
#include <string>
#include <vector>

#include "app/plot.h"
#include "logic/arena.h"
#include "logic/async_job.h"
#include "logic/attention_lab.h"
#include "logic/kernel_explorer.h"
#include "logic/rpe_studio.h"
#include "logic/scenario.h"
#include "logic/training.h"

struct GLFWwindow;

namespace flt::viz {

/// Where interactive widgets ended up last frame (for scripted input tests).
struct UiProbe {
  ImVec2 step_min{0, 0}, step_max{0, 0};    ///< the transport bar's Step button
  HeatmapHover attention_map;               ///< the Attention Lab's first map (head 0, the variant)
  ImVec2 scene_min{0, 0}, scene_max{0, 0};  ///< the scene panel below the tab bar (panel export)
};

/// Mouse state injected instead of the real mouse (scripted input tests).
struct InputOverride {
  ImVec2 mouse{0, 0};
  bool left_down = false;
  std::vector<int> keys_down;  ///< GLFW key codes held this frame (all others up)
};

struct ArenaView {
  bool playing = false;
  bool click_mode = false;  ///< human racer moves only on "My step"
  float yaw = 0.7f, pitch = 0.9f;
  LevelProgress progress;
  std::vector<Segment> contours;  ///< of the current grid
  int64_t grid_version = 0;
  Texture texture;
  bool dragging_start = false;
  int recorded_level = -1;  ///< stars recorded once per finished race
};

struct TrainingView {
  int layer = 0;
  int64_t uploaded_version = -1;
  std::vector<std::unique_ptr<Texture>> head_textures;
};

struct AttentionView {
  bool playing = false;
  double play_clock = 0.0;
  int64_t version = 0;
  std::vector<std::unique_ptr<Texture>> maps;  ///< per head: variant, softmax, difference
  bool dirty = true;
};

struct KernelJobRequest {
  KernelSettings settings;
  uint64_t seed = 1;
};

struct KernelView {
  bool playing = false;  ///< a fresh sample draw twice a second at x1
  double play_clock = 0.0;
  bool dirty = true;  ///< knobs changed: recompute the curves and request the estimates
  KernelCurves curves;
  int64_t curves_version = 0;
  Texture kernel_map;
  AsyncJob<KernelJobRequest, KernelEstimates> estimates{[](const KernelJobRequest& r) {
    return compute_kernel_estimates(r.settings, r.seed);
  }};
  int64_t estimates_version = 0;
  Texture truth_map, fourier_map, kde_map;
};

struct RpeJobRequest {
  RpeSettings settings;
  uint64_t seed = 1;
};

struct RpeView {
  bool playing = false;  ///< a fresh feature draw twice a second at x1
  double play_clock = 0.0;
  bool dirty = true;
  AsyncJob<RpeJobRequest, RpeCurves> curves{
      [](const RpeJobRequest& r) { return compute_rpe_curves(r.settings, r.seed); }};
  int64_t version = 0;
  Texture map;
  float yaw = 0.6f, pitch = 0.8f;
  int head = 0;  ///< learned spectra: which head of the live model
};

/// Everything the panels read and write.
struct AppState {
  Scenario scenario;
  std::string state_text;    ///< the editable state string box
  std::string message;       ///< last status message (exports, errors)
  std::string runtime_line;  ///< flt::runtime_summary
  bool headless = false;
  bool select_scene_tab = true;  ///< select scenario.scene's tab on the next frame
  ArenaGame arena;
  ArenaView arena_view;
  TrainingSession training;
  TrainingView training_view;
  bool training_worker = false;  ///< worker thread running (interactive mode)
  AttentionLab lab;
  AttentionView attention_view;
  KernelView kernel_view;
  RpeView rpe_view;
  UiProbe probe;
  std::string export_dir = ".";
  std::string pending_screenshot;      ///< written after the next render
  bool screenshot_panel_only = false;  ///< crop it to the scene panel
};

/// The window, GL context and ImGui context; one per process.
class App {
 public:
  /// Creates the window (invisible when `hidden`), GL 3 context and ImGui. Throws
  /// std::runtime_error with a helpful message when there is no display.
  App(int width, int height, bool hidden);
  ~App();

  /// Applies a scenario (resets the scenes it affects).
  void load(const Scenario& scenario);
  /// Runs work synchronously so a headless frame shows a progressed scene: arena and training
  /// steps, and a finished Attention Lab computation.
  void prepare_headless(int steps);
  /// Starts the training worker (interactive mode).
  void start_worker();

  /// One frame: poll, new frame, panels, render; swap unless `swap` is false. Returns frame ms.
  double frame(const InputOverride* input = nullptr, bool swap = true);
  /// Reads the back buffer of the last rendered frame (RGBA, top row first).
  std::vector<uint8_t> read_pixels(int* width, int* height) const;
  /// Renders a few frames and writes the window to `path` (PNG); false on failure.
  bool screenshot(const std::string& path);

  /// Vertical sync on or off (profiling measures frames with it off).
  void set_vsync(bool on);
  /// GL_RENDERER of the context, e.g. "llvmpipe (LLVM 15.0.6, 256 bits)".
  std::string renderer() const;
  bool should_close() const;
  AppState& state() { return *state_; }
  GLFWwindow* window() const { return window_; }

 private:
  GLFWwindow* window_ = nullptr;
  std::unique_ptr<AppState> state_;
};

/// The [min, max) rectangle (screen pixels) of an RGBA image `width` wide.
std::vector<uint8_t> crop(const std::vector<uint8_t>& rgba, int width, ImVec2 min, ImVec2 max,
                          int* out_width, int* out_height);

/// Writes RGBA pixels (top row first) as a PNG.
bool write_png(const std::string& path, const std::vector<uint8_t>& rgba, int width, int height);

/// True when an X11 or Wayland display is available to GLFW.
bool display_available();

}  // namespace flt::viz
