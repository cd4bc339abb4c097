#pragma once
// Optimizer Arena game logic (GL-free): levels over flt::optim landscapes, racers driven by real
// torch::optim optimizers, scoring with par and stars, level progression, the leaderboard.
//
// The header is plain data (no LibTorch types) so drawing code and tests stay light.

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "logic/scenario.h"

namespace flt::viz {

struct ArenaLevel {
  std::string name;
  std::string hint;        ///< one line shown to the player
  int landscape = 0;       ///< flt::metatrain::Landscape as int
  double noise_std = 0.0;  ///< gradient noise (noisy levels)
  double start_x = 0.0, start_y = 0.0;
  double lo_x = -5, hi_x = 5, lo_y = -5, hi_y = 5;  ///< the view box
  double epsilon = 1e-3;                            ///< "reached": f(x) - f_min <= epsilon
  int max_steps = 600;                              ///< race budget
  double adam_lr = 0.1;  ///< the house optimizers' settings for this level
  double sgd_lr = 0.01, sgd_momentum = 0.9;
  /// A level that teaches a smooth descent (the narrow valley) caps the stars of a racer that
  /// swings across it: more than `max_swings` reversals along `swing_axis` (0 = x, 1 = y) by more
  /// than `swing_size` each earn at most 1 star. -1: no such rule.
  int max_swings = -1;
  int swing_axis = 1;
  double swing_size = 0.0;
};

/// The levels in order of rising difficulty.
const std::vector<ArenaLevel>& arena_levels();

enum class RacerKind { kAdam, kSgdMomentum, kHuman, kLearned };
enum class RacerStatus { kReady, kRunning, kReached, kDiverged, kOutOfSteps, kUnavailable };
const char* racer_status_name(RacerStatus status);

/// What to try after a racer of `kind` stepping with `lr` and `momentum` diverged: one sentence
/// that says why and suggests a smaller value.
std::string diverged_advice(RacerKind kind, double lr, double momentum);

struct Racer {
  std::string name;
  RacerKind kind = RacerKind::kAdam;
  RacerStatus status = RacerStatus::kReady;  ///< ready until its first step
  std::string note;                          ///< e.g. why it is unavailable, where it diverged
  std::string advice;                        ///< a diverged racer: why, and what to try
  std::array<uint8_t, 3> color{255, 255, 255};
  std::vector<std::array<double, 2>> path;  ///< positions, path[0] = start
  std::vector<double> values;               ///< f along the path
  int steps = 0;
  int steps_to_epsilon = -1;  ///< -1 until reached
  double distance = 0.0;      ///< to the nearest global minimiser
  double best_value = 0.0;
  int swings = 0;           ///< big reversals along the level's swing axis (see ArenaLevel)
  double last_delta = 0.0;  ///< the last nonzero move along that axis
};

/// 1 to 3 stars for reaching epsilon within par, 2 par, or the budget; 0 when not reached.
int stars_for(int steps_to_epsilon, int par);

/// The par line: "par 91 (the house Adam's steps to eps=1e-03)" when the house Adam reached eps
/// in `par` steps, else the sentence saying there is no par and what earns 3 stars.
std::string par_sentence(const ArenaLevel& level, bool par_reached, int par);

/// Which levels the player may pick: level 0, and each level after one with at least one star.
struct LevelProgress {
  std::vector<int> best_stars;  ///< per level
  LevelProgress();
  /// Keeps the best of `stars` and what the level had; true when that raised it.
  bool record(int level, int stars);
  bool unlocked(int level) const;
};

/// Leaderboard columns, for sorting.
enum class LeaderboardColumn { kRank, kName, kValue, kDistance, kStepsToEpsilon, kStatus };

struct LeaderboardRow {
  int racer = 0;  ///< index into racers()
  int rank = 0;   ///< race order: reached first by steps, then by distance; unavailable last
  std::string name;
  double value = 0.0, distance = 0.0;
  int steps_to_epsilon = -1;
  RacerStatus status = RacerStatus::kRunning;
};

/// f on a grid over the level's view box, row 0 at the top (largest y), for heatmap and contours.
struct LandscapeGrid {
  int rows = 0, cols = 0;
  std::vector<float> values;   ///< f - f_min (>= 0), row-major
  float lo = 0.0f, hi = 0.0f;  ///< smallest positive and largest value (for the log colour scale)
  int64_t version = 0;         ///< changes whenever the grid is rebuilt (every load)
};

class ArenaGame {
 public:
  ArenaGame();
  ~ArenaGame();  // not copyable or movable: it owns its state (impl_)

  /// Starts the level in `settings` from its start (or the custom start), racers reset. Computes
  /// par: the steps the house Adam needs from this start (the budget when it never gets there).
  void load(const ArenaSettings& settings, uint64_t seed);

  /// One step of every running racer.
  void step();
  /// One step of the human racer only ("click each step" mode).
  void step_human();
  /// Advances by `seconds` of play time at `speed` (10 steps per second at x1, at most 64 steps
  /// per call); returns how many steps ran.
  int advance(double seconds, float speed);

  int step_count() const;
  /// The steps of the racer furthest along: step_count() while every racer steps, your racer's
  /// steps in "click each step" mode (where only it moves).
  int steps_taken() const;
  bool finished() const;  ///< no racer running
  /// Once your racer stopped (reached eps, diverged, out of steps): one line saying how and its
  /// stars; empty while it races or when it does not race.
  std::string human_done_line() const;
  const ArenaLevel& level() const;
  int level_index() const;
  /// Par: the house Adam's steps to eps from this start, or the budget when it never gets there.
  int par() const;
  /// Whether the house Adam reached eps (else there is no par: reaching eps at all is 3 stars).
  bool par_reached() const;
  /// "par 91 (the house Adam's steps to eps=1e-03)", or the no-par sentence.
  std::string par_text() const;
  /// Stars of one racer: stars_for(steps to eps, par), capped at 1 when it swung across a level
  /// that teaches a smooth descent.
  int racer_stars(const Racer& racer) const;
  /// Stars of the human racer (or of the best racer when the human does not race).
  int stars() const;
  /// A line for the player about their racer: why it diverged and what to try, or why the stars
  /// were capped; empty when there is nothing to say.
  std::string coach_line() const;
  const std::vector<Racer>& racers() const;
  std::vector<LeaderboardRow> leaderboard() const;
  const LandscapeGrid& grid() const;
  /// The landscape's global minimisers (x, y).
  const std::vector<std::array<double, 2>>& minima() const;
  /// Value of f - f_min at a point (for hover readouts).
  double value_at(double x, double y) const;
  /// "racer,step,x,y,f" rows of every trajectory.
  std::string trajectories_csv() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Sorts rows by `column`.
void sort_leaderboard(std::vector<LeaderboardRow>& rows, LeaderboardColumn column, bool ascending);

}  // namespace flt::viz
