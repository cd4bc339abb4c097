#include "logic/arena.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "flt/metatrain/landscapes.h"
#include "flt/optim/mnemosyne.h"
#include "logic/step_clock.h"

namespace flt::viz {
namespace {

using flt::metatrain::Landscape;

constexpr int kGridSize = 192;           // heatmap resolution (cells per side)
constexpr double kStepsPerSecond = 10;   // play speed at x1
constexpr int kMaxStepsPerAdvance = 64;  // keeps one frame's work bounded

Landscape as_landscape(int index) {
  return static_cast<Landscape>(index);
}

ArenaLevel make_level(std::string name, std::string hint, Landscape landscape, double start_x,
                      double start_y, double half_width, double adam_lr, double sgd_lr,
                      int max_steps, double epsilon = 1e-3, double noise = 0.0,
                      double center_x = 0.0, double center_y = 0.0) {
  ArenaLevel level;
  level.name = std::move(name);
  level.hint = std::move(hint);
  level.landscape = static_cast<int>(landscape);
  level.start_x = start_x;
  level.start_y = start_y;
  level.lo_x = center_x - half_width;
  level.hi_x = center_x + half_width;
  level.lo_y = center_y - half_width;
  level.hi_y = center_y + half_width;
  level.adam_lr = adam_lr;
  level.sgd_lr = sgd_lr;
  level.max_steps = max_steps;
  level.epsilon = epsilon;
  level.noise_std = noise;
  return level;
}

}  // namespace

const std::vector<ArenaLevel>& arena_levels() {
  static const std::vector<ArenaLevel> kLevels = {
      make_level("1. Bowl", "A round bowl: any sane step size wins. Try a huge one.",
                 Landscape::kSphere, -4.0, 3.5, 5.12, 0.3, 0.05, 400),
      [] {
        // Curvature 100 across (y), 1 along (x): a step size the steep walls allow crawls along
        // the valley floor; momentum carries it. Racing there by bouncing from wall to wall is
        // not the lesson: more than 4 swings across of over 2 units earn 1 star at most.
        auto level = make_level("2. Narrow valley",
                                "Curvature 100x steeper across than along: momentum helps, "
                                "bouncing from wall to wall does not (1 star at most).",
                                Landscape::kIllConditioned, -4.5, 3.0, 5.12, 0.1, 0.01, 600);
        level.max_swings = 4;
        level.swing_axis = 1;
        level.swing_size = 2.0;
        return level;
      }(),
      make_level("3. Banana", "Rosenbrock's curved valley: easy to find, slow to follow.",
                 Landscape::kRosenbrock, -1.5, 1.5, 2.048, 0.05, 5e-4, 1500),
      make_level("4. Four valleys", "Himmelblau: four equal minima; which one will you reach?",
                 Landscape::kHimmelblau, -0.5, -0.5, 5.0, 0.1, 0.005, 600),
      make_level("5. Egg crate",
                 "Rastrigin: a local minimum near every integer point (at about +-0.995).",
                 Landscape::kRastrigin, 2.2, -1.8, 5.12, 0.1, 0.002, 800, 1e-2),
      make_level("6. Golf course", "Ackley: flat fairway, one deep hole in the middle.",
                 Landscape::kAckley, 6.2, -5.1, 8.0, 0.2, 0.05, 800, 1e-2),
      make_level("7. Foggy bowl", "A bowl seen through noisy gradients (mini-batch noise).",
                 Landscape::kSphere, -4.0, 3.5, 5.12, 0.1, 0.02, 800, 5e-2, 1.0),
      make_level("8. Stormy egg crate",
                 "Noisy Rastrigin: can noise shake you out of a local minimum?",
                 Landscape::kRastrigin, 2.2, -1.8, 5.12, 0.1, 0.002, 1000, 5e-2, 3.0),
  };
  return kLevels;
}

const char* racer_status_name(RacerStatus status) {
  switch (status) {
    case RacerStatus::kReady: return "ready";
    case RacerStatus::kRunning: return "running";
    case RacerStatus::kReached: return "reached";
    case RacerStatus::kDiverged: return "diverged";
    case RacerStatus::kOutOfSteps: return "out of steps";
    case RacerStatus::kUnavailable: return "not yet";
  }
  return "?";
}

int stars_for(int steps_to_epsilon, int par) {
  if (steps_to_epsilon < 0) return 0;
  if (steps_to_epsilon <= par) return 3;
  if (steps_to_epsilon <= 2 * par) return 2;
  return 1;
}

std::string diverged_advice(RacerKind kind, double lr, double momentum) {
  char text[320];
  switch (kind) {
    case RacerKind::kLearned:
      return "The learned rule's steps overshoot here: it was meta-trained on other functions. "
             "Nothing to tune; compare it on another level.";
    case RacerKind::kAdam:
      std::snprintf(text, sizeof(text),
                    "Adam's step (lr %.3g) is too long for this landscape; try lr %.3g.", lr,
                    lr / 10);
      return text;
    case RacerKind::kHuman:
    case RacerKind::kSgdMomentum:
      if (momentum >= 0.95) {
        std::snprintf(text, sizeof(text),
                      "Each step grew instead of shrinking: momentum %.2f keeps adding up "
                      "overshoots. Try momentum 0.9, or learning rate %.3g.",
                      momentum, lr / 10);
      } else {
        std::snprintf(text, sizeof(text),
                      "Each step grew instead of shrinking: learning rate %.3g is too large for "
                      "how steep this landscape is. Try %.3g.",
                      lr, lr / 10);
      }
      return text;
  }
  return {};
}

LevelProgress::LevelProgress() : best_stars(arena_levels().size(), 0) {}

bool LevelProgress::record(int level, int stars) {
  if (level < 0 || level >= static_cast<int>(best_stars.size())) return false;
  if (stars <= best_stars[level]) return false;
  best_stars[level] = stars;
  return true;
}

bool LevelProgress::unlocked(int level) const {
  if (level <= 0) return level == 0;
  if (level >= static_cast<int>(best_stars.size())) return false;
  return best_stars[level - 1] >= 1;
}

std::string par_sentence(const ArenaLevel& level, bool par_reached, int par) {
  char text[200];
  if (par_reached) {
    std::snprintf(text, sizeof(text), "par %d (the house Adam's steps to eps=%.0e)", par,
                  level.epsilon);
  } else {
    std::snprintf(text, sizeof(text),
                  "no par: the house Adam does not reach eps=%.0e in %d steps, so reaching it "
                  "at all earns 3 stars",
                  level.epsilon, level.max_steps);
  }
  return text;
}

// ---- racing ------------------------------------------------------------------------------------

namespace {

// A racer's live optimisation state: the point, its optimizer and its noise stream.
struct Runner {
  torch::Tensor x;  // (2,) double, requires grad
  double lr = 0.0, momentum = 0.0;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  at::Generator generator;
};

Runner make_runner(RacerKind kind, double x0, double y0, double lr, double momentum, uint64_t seed,
                   flt::optim::Memory memory = flt::optim::Memory::kFLT) {
  Runner runner;
  runner.x = torch::tensor({x0, y0}, torch::kDouble).requires_grad_(true);
  runner.lr = lr;
  runner.momentum = momentum;
  if (kind == RacerKind::kLearned) {
    // The shipped meta-trained rule at its own step size (lr multiplies the learned step).
    runner.optimizer = std::make_unique<flt::optim::CoordinateMnemosyne>(
        std::vector<torch::Tensor>{runner.x},
        flt::optim::CoordinateMnemosyneOptions(1.0).memory(memory));
  } else if (kind == RacerKind::kAdam) {
    runner.optimizer = std::make_unique<torch::optim::Adam>(std::vector<torch::Tensor>{runner.x},
                                                            torch::optim::AdamOptions(lr));
  } else {
    runner.optimizer = std::make_unique<torch::optim::SGD>(
        std::vector<torch::Tensor>{runner.x}, torch::optim::SGDOptions(lr).momentum(momentum));
  }
  runner.generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  return runner;
}

// f(x, y) - f_min at one point, without autograd.
double clean_value(const ArenaLevel& level, double x, double y) {
  torch::NoGradGuard no_grad;
  const auto landscape = as_landscape(level.landscape);
  auto point = torch::tensor({x, y}, torch::kDouble);
  return flt::metatrain::evaluate_landscape(landscape, point).item<double>() -
         flt::metatrain::landscape_info(landscape, 2).minimum;
}

// Distance to the nearest of the landscape's global minimisers (from
// flt::metatrain::landscape_info).
double distance_to_minima(const std::vector<std::array<double, 2>>& minima, double x, double y) {
  double best = INFINITY;
  for (const auto& m : minima) best = std::min(best, std::hypot(x - m[0], y - m[1]));
  return best;
}

std::vector<std::array<double, 2>> minima_of(const ArenaLevel& level) {
  std::vector<std::array<double, 2>> out;
  for (const auto& m : flt::metatrain::landscape_info(as_landscape(level.landscape), 2).minima)
    out.push_back({m[0], m[1]});
  return out;
}

// What to try when a racer's steps carried it off the map, where it stayed (not a blow-up).
std::string wandered_advice(double lr, double momentum) {
  char text[240];
  std::snprintf(text, sizeof(text),
                "Its steps carried it over the ridges and off the map: try momentum %.2g or "
                "learning rate %.3g.",
                momentum > 0.0 ? momentum / 2 : 0.0, lr / 3);
  return text;
}

// Whether (x, y) lies outside the level's view box (where the map cannot show it).
bool off_map(const ArenaLevel& level, double x, double y) {
  return x < level.lo_x || x > level.hi_x || y < level.lo_y || y > level.hi_y;
}

// One optimizer step of `racer`, with the NaN guard: a non-finite gradient or value, or a point far
// outside the view box, ends the racer as diverged instead of letting NaN spread.
void step_racer(const ArenaLevel& level, const std::vector<std::array<double, 2>>& minima,
                Racer& racer, Runner& runner) {
  if (racer.status == RacerStatus::kReady) racer.status = RacerStatus::kRunning;
  if (racer.status != RacerStatus::kRunning) return;
  const auto landscape = as_landscape(level.landscape);
  runner.optimizer->zero_grad();
  auto f = level.noise_std > 0 ? flt::metatrain::evaluate_noisy_landscape(
                                     landscape, runner.x, level.noise_std, runner.generator)
                               : flt::metatrain::evaluate_landscape(landscape, runner.x);
  f.backward();
  if (!runner.x.grad().isfinite().all().item<bool>()) {
    racer.status = RacerStatus::kDiverged;
    racer.note = "non-finite gradient at step " + std::to_string(racer.steps + 1);
    racer.advice = diverged_advice(racer.kind, runner.lr, runner.momentum);
    return;
  }
  runner.optimizer->step();
  racer.steps += 1;
  const auto p = runner.x.detach();
  const auto coordinates = p.accessor<double, 1>();
  const double x = coordinates[0], y = coordinates[1];
  const double value = clean_value(level, x, y);
  // Off the map by more than half its width: the racer has left for good. (Three widths, as
  // before, let a racer on the 10-wide egg crate sit 14 away as "out of steps" while the 4-wide
  // banana flagged the same case.)
  const double span = std::max(level.hi_x - level.lo_x, level.hi_y - level.lo_y);
  const bool far = std::abs(x - 0.5 * (level.lo_x + level.hi_x)) > span ||
                   std::abs(y - 0.5 * (level.lo_y + level.hi_y)) > span;
  // A racer that crossed the map in one step blew up; one that drifted off carried on too far.
  const bool drifted = !racer.path.empty() && racer.kind != RacerKind::kLearned &&
                       std::hypot(x - racer.path.back()[0], y - racer.path.back()[1]) < 0.5 * span;
  if (!std::isfinite(value) || !std::isfinite(x) || !std::isfinite(y) || far) {
    racer.status = RacerStatus::kDiverged;
    racer.note = far ? "left the map at step " + std::to_string(racer.steps)
                     : "non-finite value at step " + std::to_string(racer.steps);
    racer.advice = far && drifted ? wandered_advice(runner.lr, runner.momentum)
                                  : diverged_advice(racer.kind, runner.lr, runner.momentum);
    return;
  }
  if (level.max_swings >= 0 && !racer.path.empty()) {  // big reversals across the swing axis
    const int axis = level.swing_axis;
    const double delta = (axis == 0 ? x : y) - racer.path.back()[axis];
    if (delta != 0.0) {
      if (delta * racer.last_delta < 0.0 && std::abs(delta) > level.swing_size) racer.swings += 1;
      racer.last_delta = delta;
    }
  }
  racer.path.push_back({x, y});
  racer.values.push_back(value);
  racer.best_value = std::min(racer.best_value, value);
  racer.distance = distance_to_minima(minima, x, y);
  if (value <= level.epsilon) {
    racer.status = RacerStatus::kReached;
    racer.steps_to_epsilon = racer.steps;
  } else if (racer.steps >= level.max_steps && off_map(level, x, y)) {
    // its budget spent somewhere the player cannot see: it left the map, it did not run short
    char where[160];
    std::snprintf(where, sizeof(where),
                  "left the map: ended at (%.2f, %.2f), outside x in [%.3g, %.3g], y in "
                  "[%.3g, %.3g]",
                  x, y, level.lo_x, level.hi_x, level.lo_y, level.hi_y);
    racer.status = RacerStatus::kDiverged;
    racer.note = where;
    racer.advice = drifted ? wandered_advice(runner.lr, runner.momentum)
                           : diverged_advice(racer.kind, runner.lr, runner.momentum);
  } else if (racer.steps >= level.max_steps) {
    racer.status = RacerStatus::kOutOfSteps;
  }
}

}  // namespace

struct ArenaGame::Impl {
  ArenaSettings settings;
  int level_index = 0;
  ArenaLevel level;
  std::vector<Racer> racers;
  std::vector<Runner> runners;  // parallel to racers (unused for unavailable ones)
  int steps = 0;
  int par = 0;
  bool par_reached = false;
  StepClock clock{kStepsPerSecond, kMaxStepsPerAdvance};
  LandscapeGrid grid;
  std::vector<std::array<double, 2>> minima;

  void build_grid() {
    torch::NoGradGuard no_grad;
    const auto landscape = as_landscape(level.landscape);
    auto xs = torch::linspace(level.lo_x, level.hi_x, kGridSize, torch::kDouble);
    auto ys = torch::linspace(level.hi_y, level.lo_y, kGridSize, torch::kDouble);  // row 0 = top
    auto mesh = torch::meshgrid({ys, xs}, "ij");
    auto points = torch::stack({mesh[1], mesh[0]}, -1);  // (rows, cols, 2) as (x, y)
    const double minimum = flt::metatrain::landscape_info(landscape, 2).minimum;
    auto values = (flt::metatrain::evaluate_landscape(landscape, points) - minimum)
                      .clamp_min(0)
                      .to(torch::kFloat)
                      .contiguous();
    grid.rows = grid.cols = kGridSize;
    grid.values.assign(values.data_ptr<float>(), values.data_ptr<float>() + values.numel());
    auto positive = values.masked_select(values > 0);
    grid.hi = values.max().item<float>();
    // the log colour scale spans at most 5 decades below the top, so the basin keeps its contrast
    grid.lo =
        std::max(positive.numel() > 0 ? positive.min().item<float>() : 1e-6f, grid.hi * 1e-5f);
    grid.version += 1;
  }

  void add_racer(std::string name, RacerKind kind, std::array<uint8_t, 3> color, double lr,
                 double momentum, uint64_t seed, double x0, double y0,
                 flt::optim::Memory memory = flt::optim::Memory::kFLT) {
    Racer racer;
    racer.name = std::move(name);
    racer.kind = kind;
    racer.color = color;
    racer.path.push_back({x0, y0});
    racer.values.push_back(clean_value(level, x0, y0));
    racer.best_value = racer.values.back();
    racer.distance = distance_to_minima(minima, x0, y0);
    const auto shipped = flt::optim::pretrained_memories();
    if (kind == RacerKind::kLearned &&
        std::find(shipped.begin(), shipped.end(), memory) == shipped.end()) {
      racer.status = RacerStatus::kUnavailable;
      racer.note = "no pretrained weights for the " + flt::optim::memory_name(memory) +
                   " memory ship with this build";
      runners.emplace_back();
    } else {
      runners.push_back(make_runner(kind, x0, y0, lr, momentum, seed, memory));
    }
    racers.push_back(std::move(racer));
  }
};

ArenaGame::ArenaGame() : impl_(std::make_unique<Impl>()) {
  load(ArenaSettings{}, 1);
}
ArenaGame::~ArenaGame() = default;

void ArenaGame::load(const ArenaSettings& settings, uint64_t seed) {
  auto& s = *impl_;
  const auto& levels = arena_levels();
  s.settings = settings;
  s.level_index = std::clamp(settings.level, 0, static_cast<int>(levels.size()) - 1);
  s.level = levels[s.level_index];
  s.minima = minima_of(s.level);
  s.racers.clear();
  s.runners.clear();
  s.steps = 0;
  s.clock.reset();
  const double x0 = settings.custom_start ? settings.start_x : s.level.start_x;
  const double y0 = settings.custom_start ? settings.start_y : s.level.start_y;

  // Par: the house Adam's steps to epsilon from this start.
  {
    Racer probe;
    probe.best_value = clean_value(s.level, x0, y0);
    Runner runner = make_runner(RacerKind::kAdam, x0, y0, s.level.adam_lr, 0.0, seed);
    while (probe.status == RacerStatus::kReady || probe.status == RacerStatus::kRunning)
      step_racer(s.level, s.minima, probe, runner);
    s.par_reached = probe.steps_to_epsilon > 0;
    s.par = s.par_reached ? probe.steps_to_epsilon : s.level.max_steps;
  }

  s.add_racer("Adam", RacerKind::kAdam, {255, 120, 60}, s.level.adam_lr, 0.0, seed, x0, y0);
  s.add_racer("SGD-momentum", RacerKind::kSgdMomentum, {80, 200, 255}, s.level.sgd_lr,
              s.level.sgd_momentum, seed + 1, x0, y0);
  if (settings.human_enabled) {
    s.add_racer("You (SGD)", RacerKind::kHuman, {255, 255, 255}, settings.human_lr,
                settings.human_momentum, seed + 2, x0, y0);
  }
  s.add_racer("Learned FLT", RacerKind::kLearned, {200, 120, 255}, 1.0, 0.0, seed + 3, x0, y0,
              flt::optim::Memory::kFLT);
  s.add_racer("Learned Performer", RacerKind::kLearned, {240, 90, 170}, 1.0, 0.0, seed + 5, x0, y0,
              flt::optim::Memory::kPerformer);
  s.add_racer("Learned LSTM", RacerKind::kLearned, {120, 220, 120}, 1.0, 0.0, seed + 4, x0, y0,
              flt::optim::Memory::kLSTM);
  s.build_grid();
}

void ArenaGame::step() {
  auto& s = *impl_;
  if (finished()) return;
  for (size_t i = 0; i < s.racers.size(); ++i)
    step_racer(s.level, s.minima, s.racers[i], s.runners[i]);
  s.steps += 1;
}

void ArenaGame::step_human() {
  auto& s = *impl_;
  for (size_t i = 0; i < s.racers.size(); ++i) {
    if (s.racers[i].kind == RacerKind::kHuman)
      step_racer(s.level, s.minima, s.racers[i], s.runners[i]);
  }
}

int ArenaGame::advance(double seconds, float speed) {
  return impl_->clock.advance(
      seconds, speed, [this] { step(); }, [this] { return finished(); });
}

int ArenaGame::step_count() const {
  return impl_->steps;
}

int ArenaGame::steps_taken() const {
  int most = impl_->steps;
  for (const auto& racer : impl_->racers) most = std::max(most, racer.steps);
  return most;
}

std::string ArenaGame::human_done_line() const {
  for (const auto& racer : impl_->racers) {
    if (racer.kind != RacerKind::kHuman) continue;
    const int stars = racer_stars(racer);
    const std::string earned =
        std::to_string(stars) + (stars == 1 ? " star" : " stars") + " (recorded).";
    switch (racer.status) {
      case RacerStatus::kReached:
        return "Your racer reached eps in " + std::to_string(racer.steps_to_epsilon) +
               " steps: " + earned;
      case RacerStatus::kDiverged: return "Your racer diverged: 0 stars.";
      case RacerStatus::kOutOfSteps: return "Your racer ran out of steps: 0 stars.";
      default: return {};
    }
  }
  return {};
}

bool ArenaGame::finished() const {
  for (const auto& racer : impl_->racers) {
    if (racer.status == RacerStatus::kReady || racer.status == RacerStatus::kRunning) return false;
  }
  return true;
}

const ArenaLevel& ArenaGame::level() const {
  return impl_->level;
}
int ArenaGame::level_index() const {
  return impl_->level_index;
}
int ArenaGame::par() const {
  return impl_->par;
}

bool ArenaGame::par_reached() const {
  return impl_->par_reached;
}

std::string ArenaGame::par_text() const {
  return par_sentence(impl_->level, impl_->par_reached, impl_->par);
}

int ArenaGame::racer_stars(const Racer& racer) const {
  const int stars = stars_for(racer.steps_to_epsilon, impl_->par);
  const auto& level = impl_->level;
  if (level.max_swings >= 0 && racer.swings > level.max_swings) return std::min(stars, 1);
  return stars;
}

int ArenaGame::stars() const {
  int best = 0;
  bool human = false;
  for (const auto& racer : impl_->racers) {
    if (racer.kind == RacerKind::kHuman) {
      human = true;
      best = racer_stars(racer);
    }
  }
  if (!human) {
    for (const auto& racer : impl_->racers) best = std::max(best, racer_stars(racer));
  }
  return best;
}

std::string ArenaGame::coach_line() const {
  const auto& level = impl_->level;
  for (const auto& racer : impl_->racers) {
    if (racer.kind != RacerKind::kHuman) continue;
    if (racer.status == RacerStatus::kDiverged)
      return "Your racer diverged (" + racer.note + "). " + racer.advice;
    if (level.max_swings >= 0 && racer.swings > level.max_swings) {
      return "Your racer bounced across the valley " + std::to_string(racer.swings) +
             " times: 1 star at most here. Lower the learning rate until it stops bouncing and let "
             "momentum carry it along the valley.";
    }
  }
  return {};
}

const std::vector<Racer>& ArenaGame::racers() const {
  return impl_->racers;
}
const LandscapeGrid& ArenaGame::grid() const {
  return impl_->grid;
}
const std::vector<std::array<double, 2>>& ArenaGame::minima() const {
  return impl_->minima;
}
double ArenaGame::value_at(double x, double y) const {
  return clean_value(impl_->level, x, y);
}

std::vector<LeaderboardRow> ArenaGame::leaderboard() const {
  std::vector<LeaderboardRow> rows;
  const auto& racers = impl_->racers;
  for (size_t i = 0; i < racers.size(); ++i) {
    const auto& r = racers[i];
    rows.push_back({static_cast<int>(i), 0, r.name, r.values.back(), r.distance, r.steps_to_epsilon,
                    r.status});
  }
  // Race order: reached first (fewest steps), then by distance to the minimum; unavailable last.
  auto order = rows;
  std::stable_sort(
      order.begin(), order.end(), [](const LeaderboardRow& a, const LeaderboardRow& b) {
        const bool ua = a.status == RacerStatus::kUnavailable,
                   ub = b.status == RacerStatus::kUnavailable;
        if (ua != ub) return ub;
        const bool ra = a.steps_to_epsilon >= 0, rb = b.steps_to_epsilon >= 0;
        if (ra != rb) return ra;
        if (ra) return a.steps_to_epsilon < b.steps_to_epsilon;
        const bool da = a.status == RacerStatus::kDiverged, db = b.status == RacerStatus::kDiverged;
        if (da != db) return db;
        return a.distance < b.distance;
      });
  for (size_t k = 0; k < order.size(); ++k) rows[order[k].racer].rank = static_cast<int>(k) + 1;
  sort_leaderboard(rows, LeaderboardColumn::kRank, true);
  return rows;
}

std::string ArenaGame::trajectories_csv() const {
  std::ostringstream out;
  out.precision(10);
  out << "racer,step,x,y,f\n";
  for (const auto& racer : impl_->racers) {
    for (size_t i = 0; i < racer.path.size(); ++i) {
      out << '"' << racer.name << "\"," << i << ',' << racer.path[i][0] << ',' << racer.path[i][1]
          << ',' << racer.values[i] << '\n';
    }
  }
  return out.str();
}

void sort_leaderboard(std::vector<LeaderboardRow>& rows, LeaderboardColumn column, bool ascending) {
  const auto key_less = [column](const LeaderboardRow& a, const LeaderboardRow& b) {
    switch (column) {
      case LeaderboardColumn::kRank: return a.rank < b.rank;
      case LeaderboardColumn::kName: return a.name < b.name;
      case LeaderboardColumn::kValue: return a.value < b.value;
      case LeaderboardColumn::kDistance: return a.distance < b.distance;
      case LeaderboardColumn::kStepsToEpsilon: {
        // not reached (-1) sorts after every reached count
        const long long ka = a.steps_to_epsilon < 0 ? (1LL << 40) : a.steps_to_epsilon;
        const long long kb = b.steps_to_epsilon < 0 ? (1LL << 40) : b.steps_to_epsilon;
        return ka < kb;
      }
      case LeaderboardColumn::kStatus:
        return static_cast<int>(a.status) < static_cast<int>(b.status);
    }
    return false;
  };
  std::stable_sort(rows.begin(), rows.end(), [&](const LeaderboardRow& a, const LeaderboardRow& b) {
    return ascending ? key_less(a, b) : key_less(b, a);
  });
}

}  // namespace flt::viz
