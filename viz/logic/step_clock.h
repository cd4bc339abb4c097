#pragma once
// Play time into whole steps, for the scenes that step at a fixed rate (the arena, the swarm race).

#include <algorithm>

namespace flt::viz {

/// Counts play time at `steps_per_second` x speed and runs a step for each whole one: at most
/// `max_steps` a call, and never a backlog (when a call hits the limit or the run ends, the time
/// left over is dropped), so one frame's work stays bounded.
class StepClock {
 public:
  StepClock(double steps_per_second, int max_steps)
      : steps_per_second_(steps_per_second), max_steps_(max_steps) {}

  /// Runs `step()` for each whole step `seconds` at `speed` are worth, while `!finished()`.
  /// Returns the steps run.
  template <typename Step, typename Finished>
  int advance(double seconds, float speed, Step&& step, Finished&& finished) {
    pending_ += std::max(0.0, seconds) * steps_per_second_ * speed;
    int done = 0;
    while (pending_ >= 1.0 && done < max_steps_ && !finished()) {
      step();
      pending_ -= 1.0;
      ++done;
    }
    if (done == max_steps_ || finished()) pending_ = 0.0;
    return done;
  }

  /// Drops the time counted so far (a new run).
  void reset() { pending_ = 0.0; }

 private:
  double steps_per_second_;
  int max_steps_;
  double pending_ = 0.0;
};

}  // namespace flt::viz
