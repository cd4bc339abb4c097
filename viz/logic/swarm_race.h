#pragma once
// The Optimizer Arena's swarm level, GL-free: the FLT swarm (flt::optim::Swarm with
// the shipped weights) races PSO, CMA-ES and Adam with restarts on 2-D Rastrigin at equal function
// evaluations per step; the swarm's attention among its particles is kept for drawing. Also the
// learned RPE f of the shipped swarm, for RPE Studio.
//
// Plain data in the header (no LibTorch types), like arena.h.

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "logic/arena.h"

namespace flt::viz {

/// A racer's standing after one step of the race.
struct SwarmStanding {
  int step = 0;
  int64_t evaluations = 0;
  std::array<double, 2> best{0.0, 0.0};
  double best_value = 0.0;
};

struct SwarmRacer {
  std::string name;
  std::array<uint8_t, 3> color{255, 255, 255};
  std::vector<std::array<double, 2>> points;  ///< the population's current points
  std::vector<double> values;                 ///< f at `points` (empty before the first step)
  std::array<double, 2> best{0.0, 0.0};
  double best_value = 0.0;
  int64_t evaluations = 0;
  std::vector<SwarmStanding> history;  ///< one entry a step
};

class SwarmRace {
 public:
  SwarmRace();
  ~SwarmRace();  // not copyable or movable: it owns its state (impl_)
  /// Starts a race on Rastrigin 2-D over [-5.12, 5.12]^2: 16 particles each (CMA-ES: its default
  /// lambda), `budget` evaluations per racer.
  void load(uint64_t seed, int64_t budget = 1600);
  /// One step: every racer evaluates until it has spent 16 more evaluations.
  void step();
  /// Advances by `seconds` of play time at `speed` (5 steps per second at x1, at most 16 a call).
  int advance(double seconds, float speed);
  bool finished() const;
  int step_count() const;
  const std::vector<SwarmRacer>& racers() const;  ///< racers()[0] is the FLT swarm
  /// The swarm's attention weights (row i: how particle i weighs the others; mean over heads),
  /// P x P row-major.
  const std::vector<float>& attention() const;
  int particles() const;
  const LandscapeGrid& grid() const;
  double lower() const { return -5.12; }
  double upper() const { return 5.12; }
  /// Where the swarm's weights came from ("shipped meta-weights" or "untrained").
  const std::string& weights_note() const;
  /// What the level shows, as CSV: each racer's best point after every step (kind "best"), then
  /// its current population (kind "particle"): racer,kind,step,evaluations,member,x,y,f.
  std::string race_csv() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The learned RPE of the shipped FLT swarm: f per head at distances (in units of the swarm's RMS
/// radius, see SwarmModelImpl::rpe_positions).
struct SwarmRpeCurve {
  std::vector<float> distance;
  std::vector<std::vector<float>> f;  ///< per head
  std::string note;                   ///< where the weights came from
};
const SwarmRpeCurve& swarm_rpe_curve();

}  // namespace flt::viz
