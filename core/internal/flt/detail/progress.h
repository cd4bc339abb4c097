#pragma once
// The progress bar that long loops print on stderr (meta-training, the training-run harness, the
// command-line programs), and the duration format it shows. Internal: not installed.

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>

namespace flt::detail {

/// "4m05s", or "1h02m" from an hour on; "?" for what cannot be a duration (an ETA before any work
/// was done).
inline std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0.0) return "?";
  const auto s = static_cast<long long>(seconds + 0.5);
  char text[32];
  if (s >= 3600) {
    std::snprintf(text, sizeof(text), "%lldh%02lldm", s / 3600, (s / 60) % 60);
  } else {
    std::snprintf(text, sizeof(text), "%lldm%02llds", s / 60, s % 60);
  }
  return text;
}

/// One line on stderr, `NAME [#######.......] 45% 1m02s elapsed, ETA 1m15s  TEXT`, redrawn at most
/// 5 times a second on a terminal. Elsewhere (a log file, a CI job) it writes one line per tenth
/// done instead, so that logs stay short. A disabled bar prints nothing.
class ProgressBar {
 public:
  /// `start`: the fraction already done when the bar starts (a resumed run); the ETA counts only
  /// the work done since.
  explicit ProgressBar(std::string name, bool enabled = true, double start = 0.0)
      : name_(std::move(name)), enabled_(enabled), tty_(isatty(2) != 0), start_(start) {}

  /// done: the fraction of all work done, in [0, 1]; text: what runs now, or the last figures.
  void update(double done, const std::string& text) {
    if (!enabled_) return;
    done = std::clamp(done, 0.0, 1.0);
    const double elapsed = seconds();
    if (tty_) {
      if (done < 1.0 && elapsed - last_ < 0.2) return;
      last_ = elapsed;
      // Early rates mislead (start-up costs), so the ETA waits for 2% of the work.
      const double since = done - start_;
      const double eta = since > 0.02 * (1.0 - start_) ? elapsed / since * (1.0 - done) : NAN;
      const int width = 30, filled = static_cast<int>(done * width);
      std::fprintf(stderr, "\r%s%s[%s%s] %3.0f%% %s elapsed, ETA %s  %-40.40s", name_.c_str(),
                   name_.empty() ? "" : " ", std::string(filled, '#').c_str(),
                   std::string(width - filled, '.').c_str(), 100.0 * done,
                   format_duration(elapsed).c_str(), format_duration(eta).c_str(), text.c_str());
    } else {
      const int tenth = static_cast<int>(done * 10.0);
      if (tenth <= printed_) return;
      printed_ = tenth;
      std::fprintf(stderr, "%s%s%3d%% after %s (%s)\n", name_.c_str(), name_.empty() ? "" : ": ",
                   tenth * 10, format_duration(elapsed).c_str(), text.c_str());
    }
  }

  /// Ends the bar's line on a terminal.
  void finish() {
    if (enabled_ && tty_) std::fprintf(stderr, "\n");
  }

  /// Since the bar was made.
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  }

 private:
  std::string name_;
  bool enabled_, tty_;
  double start_, last_ = -1.0;
  int printed_ = -1;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

}  // namespace flt::detail
