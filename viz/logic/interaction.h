#pragma once
// GL-free pieces of flt-lab's interaction: key presses that must not be lost between frames,
// names shortened to fit with the full text kept for a tooltip, confirmations that fade, the
// default names of exported files. The drawing code in viz/app uses these; the tests check them.

#include <ctime>
#include <functional>
#include <map>
#include <string>
#include <utility>

namespace flt::viz {

/// Key presses counted as they arrive (GLFW's key callback), so a press released within the same
/// frame still counts: Dear ImGui 1.86 only sees whether a key is down when the frame starts.
class KeyPresses {
 public:
  /// A press of `key`; `control` when Ctrl was held (a chord: Ctrl+Q, Ctrl+A).
  void press(int key, bool control = false) {
    counts_[key] += 1;
    if (control) chords_[key] += 1;
  }
  /// The presses of `key` since the last take (then forgotten).
  int take(int key);
  /// The presses of `key` since the last take or clear, kept.
  int count(int key) const {
    const auto it = counts_.find(key);
    return it == counts_.end() ? 0 : it->second;
  }
  /// The presses of `key` made with Ctrl held, since the last clear.
  int control_count(int key) const {
    const auto it = chords_.find(key);
    return it == chords_.end() ? 0 : it->second;
  }
  /// Keys pressed with Ctrl held since the last clear.
  const std::map<int, int>& chords() const { return chords_; }
  void clear() {
    counts_.clear();
    chords_.clear();
  }

 private:
  std::map<int, int> counts_;
  std::map<int, int> chords_;
};

/// Presses to act on this frame: those counted since the last frame, or one when Dear ImGui saw
/// the key go down (scripted input, which does not go through the callback), never both for the
/// same press.
inline int presses_this_frame(int counted, bool imgui_pressed) {
  return counted > 0 ? counted : (imgui_pressed ? 1 : 0);
}

/// `text` when it is at most `max_width` wide, else its longest prefix that fits with "..."
/// appended. `width_of` measures a string (ImGui::CalcTextSize in the app).
std::string fit_text(const std::string& text, float max_width,
                     const std::function<float(const std::string&)>& width_of);

/// A confirmation that stays for `seconds` and fades over its last half second.
struct Toast {
  std::string text;
  double shown_at = -1e9;
  double seconds = 4.0;
  bool failure = false;  ///< what was asked did not happen: drawn in red, not green
  void show(std::string message, double now, bool failed = false) {
    text = std::move(message);
    shown_at = now;
    failure = failed;
  }
  bool visible(double now) const { return now - shown_at < seconds; }
  /// 1 while shown, falling to 0 over the last half second.
  float alpha(double now) const;
};

/// "DIR/flt-lab-SCENE[-what]-YYYYMMDD-HHMMSS.EXT" (local time): the default name of an export, new
/// every second so the next export does not overwrite this one.
/// The absolute path an export writes: file `name` in folder `folder` (relative to the working
/// folder). Empty, with `*error` naming the value, for an empty folder or name, a name holding a
/// folder separator ('/'), a name "." or "..", or one that resolves outside `folder` (a symbolic
/// link to elsewhere): an export creates no folder the user did not name and lands nowhere else.
std::string export_target(const std::string& folder, const std::string& name, std::string* error);

std::string default_export_path(const std::string& dir, const std::string& scene,
                                const std::string& what, const std::string& extension,
                                std::time_t when);

}  // namespace flt::viz
