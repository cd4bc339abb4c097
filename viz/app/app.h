#pragma once
// flt-lab application shell: the window, the per-frame main window (tab bar, transport bar, the
// visible scene's panel, status line) over explicit state, headless PNG export and frame timing.
// main.cpp parses the command line; the panels are in panels.h; the scenes' logic in logic/lab.h.

#include <imgui.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "app/panels.h"
#include "logic/interaction.h"
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
  std::vector<int> key_taps;   ///< keys pressed and released since the last frame (then cleared)
  bool taps_with_control = false;  ///< Ctrl was held (and released) around key_taps: chords
};

/// The export dialog: which file, in which folder (the user may edit both; the name opens
/// selected, so typing replaces it).
struct ExportDialog {
  enum class Kind { kWindowPng, kPanelPng, kCsv };
  Kind kind = Kind::kWindowPng;
  bool open_requested = false;
  char folder[1024] = {};
  char name[256] = {};
  std::string error;  ///< why Save refused the folder and name (the dialog stays open)
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
  std::string gl_renderer;   ///< GL_RENDERER
  bool headless = false;
  std::string export_dir = "out";  ///< exports default to DIR/flt-lab-SCENE-TIME.EXT
  ExportDialog export_dialog;
  std::string pending_screenshot;      ///< written after the next render
  bool screenshot_panel_only = false;  ///< crop it to the scene panel
  /// Renders to let pass before the pending screenshot is read: the export dialog's Save is clicked
  /// in a frame that still draws the dialog (and dims the scene), so that frame is not the picture.
  int screenshot_skip_frames = 0;
  KeyPresses keys;            ///< presses since the last frame (GLFW's key callback)
  Toast toast;                ///< the visible confirmation of copy and export
  bool details_open = false;  ///< the status bar's technical details
};

/// Shows `message` as the fading confirmation (and in the status line).
void confirm(AppState& s, const std::string& message);
/// Shows `message` as a failure: the same box in red (and in the status line).
void report_failure(AppState& s, const std::string& message);

/// Writes what the export dialog describes: its name in its folder (the folder created; a PNG
/// after the next render), and confirms the absolute path. Refuses a name that would create a
/// folder or land outside the folder (export_target): returns false with the reason in
/// export_dialog.error and in a failure box.
bool run_export(AppState& s);

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

  /// Whether the next frame may differ without input: the lab animates or a confirmation fades.
  bool animating() const;
  /// The interactive loop: draws while something changes and otherwise sleeps until input (or a
  /// training step taken while paused) arrives, so an idle window costs next to no CPU.
  void run();

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
  std::atomic<int64_t> events_{0};  ///< input and wake-ups seen (GLFW callbacks, the worker)
  std::vector<int> held_taps_;      ///< keys held down for one frame after a quick tap
  /// Frames still to draw after the lab stopped animating: the frame that ended a race or a run
  /// drew the button and table as they were when it began ("Pause", a column cut short).
  int trailing_frames_ = 0;

  /// Holds quick taps down for one frame (what the key callback counted): Enter, Escape, and
  /// keys pressed with Ctrl, Ctrl with them.
  void hold_quick_taps();

  static void on_key(GLFWwindow* window, int key, int scancode, int action, int mods);
  static void on_event(GLFWwindow* window);
};

/// The [min, max) rectangle (screen pixels) of an RGBA image `width` wide.
std::vector<uint8_t> crop(const std::vector<uint8_t>& rgba, int width, ImVec2 min, ImVec2 max,
                          int* out_width, int* out_height);

/// Writes RGBA pixels (top row first) as a PNG.
bool write_png(const std::string& path, const std::vector<uint8_t>& rgba, int width, int height);

}  // namespace flt::viz
