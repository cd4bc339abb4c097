#pragma once
// flt-lab application shell: the window, the per-frame main window (tab bar, transport bar, the
// visible scene's panel, status line) over explicit state, headless PNG export and frame timing.
// main.cpp parses the command line; the panels are in panels.h; the scenes' logic in logic/lab.h.

#include <imgui.h>

#include <memory>
#include <string>
#include <vector>

#include "app/panels.h"
#include "logic/lab.h"

struct GLFWwindow;

namespace flt::viz {

/// Where interactive widgets ended up last frame (for scripted input tests).
struct UiProbe {
  ImVec2 step_min{0, 0}, step_max{0, 0};    ///< the transport bar's Step button
  ImVec2 scene_min{0, 0}, scene_max{0, 0};  ///< the scene panel below the tab bar (panel export)
};

/// Mouse state injected instead of the real mouse (scripted input tests).
struct InputOverride {
  ImVec2 mouse{0, 0};
  bool left_down = false;
  std::vector<int> keys_down;  ///< GLFW key codes held this frame (all others up)
};

/// Everything the panels read and write.
struct AppState {
  LabState lab;  ///< the scenario and the scenes' logic
  ArenaView arena_view;
  TrainingView training_view;
  AttentionView attention_view;
  KernelView kernel_view;
  RpeView rpe_view;
  LessonsView lessons_view;
  UiProbe probe;
  std::string runtime_line;  ///< flt::runtime_summary
  bool headless = false;
  std::string export_dir = ".";
  std::string pending_screenshot;      ///< written after the next render
  bool screenshot_panel_only = false;  ///< crop it to the scene panel
};

/// The window, GL context and ImGui context; one per process.
class App {
 public:
  /// Creates the window (invisible when `hidden`), GL 3 context and ImGui, with the default
  /// scenario applied. Throws std::runtime_error with a helpful message when there is no display.
  App(int width, int height, bool hidden);
  ~App();

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
  LabState& lab() { return state_->lab; }
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

}  // namespace flt::viz
