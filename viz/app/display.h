#pragma once
// A display for GLFW when the process has none: flt-lab --headless (and --profile) start their own
// virtual X server, so they run from a plain shell, a CI job or ssh without xvfb-run.

#include <sys/types.h>

#include <string>

namespace flt::viz {

/// True when an X11 or Wayland display is set (DISPLAY or WAYLAND_DISPLAY).
bool display_available();

/// An Xvfb server owned by this process. While it lives, DISPLAY names it; the destructor stops it
/// and unsets DISPLAY. The server also dies with this process (PR_SET_PDEATHSIG), so a crash or a
/// signal leaves no Xvfb behind.
class VirtualDisplay {
 public:
  /// Starts `Xvfb -displayfd` (it picks a free display number) with one width x height x 24
  /// screen and waits until it accepts clients. Throws std::runtime_error saying what to install
  /// when Xvfb is missing, or why it did not start.
  VirtualDisplay(int width, int height);
  ~VirtualDisplay();
  VirtualDisplay(const VirtualDisplay&) = delete;
  VirtualDisplay& operator=(const VirtualDisplay&) = delete;

  /// The display name set in DISPLAY, e.g. ":1".
  const std::string& name() const { return name_; }

 private:
  pid_t pid_ = -1;
  std::string name_;
};

}  // namespace flt::viz
