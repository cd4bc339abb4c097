#pragma once
// Steps per second of a run from the times its steps finished: over the last steps, however slow
// they are (a step that takes longer than a second still gives a rate, not 0), and restarted after
// a pause so the idle time is not counted.

#include <chrono>
#include <cstddef>
#include <deque>

namespace flt::viz {

class StepRate {
 public:
  using Clock = std::chrono::steady_clock;

  /// A step finished at `when`.
  void record(Clock::time_point when) {
    if (!times_.empty() && when - times_.back() > kPauseGap) times_.clear();  // resumed
    times_.push_back(when);
    while (times_.size() > kSteps + 1) times_.pop_front();
  }
  /// Steps per second over the last (up to kSteps) steps; 0 before the second step.
  double per_second() const {
    if (times_.size() < 2) return 0.0;
    const double seconds = std::chrono::duration<double>(times_.back() - times_.front()).count();
    return seconds > 0.0 ? static_cast<double>(times_.size() - 1) / seconds : 0.0;
  }
  void reset() { times_.clear(); }

  static constexpr size_t kSteps = 20;
  static constexpr std::chrono::seconds kPauseGap{10};

 private:
  std::deque<Clock::time_point> times_;
};

}  // namespace flt::viz
