#pragma once
// flt-lab's scenes without the drawing: the scenario, each scene's model and transport state, and
// what the transport bar does (apply a scenario, play, step, advance one frame). The panels in
// viz/app draw this state and edit its settings; the tests drive it without a GL context.

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "lessons/lessons.h"
#include "logic/arena.h"
#include "logic/async_job.h"
#include "logic/attention_lab.h"
#include "logic/kernel_explorer.h"
#include "logic/rpe_studio.h"
#include "logic/scenario.h"
#include "logic/swarm_race.h"
#include "logic/training.h"

namespace flt::viz {

/// Transport of a scene whose step is a fresh random draw (Attention Lab, Kernel Explorer, RPE
/// Studio): playing draws twice a second at x1.
struct DrawTransport {
  bool playing = false;
  double clock = 0.0;  ///< play time since the last draw (seconds x speed)
  bool dirty = true;   ///< settings or draw changed: the scene recomputes on its next update
};

struct ArenaScene {
  ArenaGame game;
  SwarmRace swarm;  ///< the swarm level, when ArenaSettings::swarm
  bool playing = false;
  LevelProgress progress;          ///< stars per level (kept across scenarios)
  std::string progress_path;       ///< where progress is saved (empty: kept in memory only)
  bool progress_reported = false;  ///< a failure to save it was reported (once)
};

struct TrainingScene {
  TrainingSession session;
  bool worker = false;  ///< the worker thread runs (interactive); otherwise steps run inline
};

struct AttentionScene {
  DrawTransport transport;
  AttentionLab job;
  std::string settings_error;  ///< the knobs cannot be computed (the last result stays shown)
  int64_t version = 0;         ///< changes when a new result arrives
};

struct KernelJobRequest {
  KernelSettings settings;
  uint64_t seed = 1;
};

struct KernelScene {
  DrawTransport transport;
  KernelCurves curves;  ///< computed inline on a change (~6k kernel values: a few ms)
  int64_t curves_version = 0;
  AsyncJob<KernelJobRequest, KernelEstimates> estimates{
      [](const KernelJobRequest& r) { return compute_kernel_estimates(r.settings, r.seed); }};
  int64_t estimates_version = 0;
};

struct RpeJobRequest {
  RpeSettings settings;
  uint64_t seed = 1;
};

struct RpeScene {
  DrawTransport transport;
  AsyncJob<RpeJobRequest, RpeCurves> curves{
      [](const RpeJobRequest& r) { return compute_rpe_curves(r.settings, r.seed); }};
  int64_t version = 0;
};

/// How far a lesson's run is, written by the job's thread and read by the UI.
struct LessonProgress {
  std::atomic<float> done{0.0f};
  std::atomic<bool> running{false};
  std::atomic<bool> cancel{false};  ///< set when the scene goes away: the run stops early
  mutable std::mutex mutex;
  std::string stage;  ///< guarded by mutex
  std::string stage_text() const {
    std::lock_guard<std::mutex> lock(mutex);
    return stage;
  }
};

struct LessonRequest {
  int lesson = 0;  ///< index into flt::demos::lessons()
  uint64_t seed = 1;
  std::shared_ptr<LessonProgress> progress;
};

struct LessonOutcome {
  int lesson = -1;  ///< the lesson these results are of (-1: none yet)
  flt::demos::LessonResult result;
  std::string error;  ///< the lesson threw: its message
};

/// Runs a lesson's quick version (what `flt-demo LESSON --quick` computes), reporting progress.
LessonOutcome run_lesson_quick(const LessonRequest& request);

struct LessonsScene {
  LessonsScene() = default;
  LessonsScene(const LessonsScene&) = delete;
  LessonsScene& operator=(const LessonsScene&) = delete;
  /// Stops a running lesson at its next unit of work, so closing the window does not wait for it.
  ~LessonsScene() { progress->cancel = true; }
  AsyncJob<LessonRequest, LessonOutcome> job{run_lesson_quick};
  std::shared_ptr<LessonProgress> progress = std::make_shared<LessonProgress>();
  bool run_requested = false;  ///< Run (or Step / Play) pressed: posted on the next update
  int64_t version = 0;         ///< changes when a run finishes
};

/// Everything flt-lab knows except how it is drawn.
struct LabState {
  Scenario scenario;
  ArenaScene arena;
  TrainingScene training;
  AttentionScene attention;
  KernelScene kernel;
  RpeScene rpe;
  LessonsScene lessons;
  std::string message;  ///< the status line: applied states, exports, errors
  std::string alert;    ///< a failure for the UI to show once (it clears it): progress not saved
  bool scene_changed = true;  ///< scenario.scene was set from outside: the UI shows that tab
};

/// The one way a scenario takes effect (start-up, --state, Paste state, the seed box, Reset):
/// stores it, passes its speed to the training worker, and rebuilds every scene (or only `only`)
/// from it, paused.
void apply_scenario(LabState& lab, const Scenario& scenario,
                    std::optional<SceneId> only = std::nullopt);

/// Paste state: decodes `text` and applies it. On a bad string nothing changes and lab.message
/// names the bad key or value; returns whether it applied.
bool apply_state_string(LabState& lab, const std::string& text);

/// Loads the arena player's progress from `path` (a missing file is a first start) and saves it
/// there each time a level's best stars rise. A corrupt or unreadable file is ignored and named in
/// lab.alert; so is the first failure to save. An empty path keeps progress in memory only (what
/// headless renders and tests use, so they neither see nor change a player's stars).
void use_progress_file(LabState& lab, const std::string& path);

/// When lab.scenario opens an arena level that the player's progress has not unlocked: one
/// sentence saying so (the state string opens it anyway; stars earned there count); else empty.
std::string locked_level_note(const LabState& lab);

/// Rebuilds `scene` from lab.scenario after its settings changed (a knob), keeping play state.
void rebuild_scene(LabState& lab, SceneId scene);

/// Transport speed x0.25 .. x64 for every scene, the training worker included.
void set_speed(LabState& lab, float speed);

bool scene_playing(const LabState& lab, SceneId scene);
void set_scene_playing(LabState& lab, SceneId scene, bool playing);

/// One step: of the race, of training, a fresh random draw (new inputs, samples or features), or a
/// run of the chosen lesson.
void step_scene(LabState& lab, SceneId scene);

/// One frame of play time `dt` (seconds) for the visible scene: advances a playing race, draws
/// anew when a playing draw scene's clock ticks, posts the computations of changed scenes and
/// takes the finished ones. Never waits.
void update_scene(LabState& lab, SceneId scene, double dt);

/// Whether anything changes without input: a playing scene (the visible one; training on any tab),
/// a computation, a lesson or a posted request under way. Only then does the window redraw
/// continuously; otherwise it waits for input.
bool lab_animating(const LabState& lab);

/// The data of what `scene` shows as CSV (Export CSV): the arena's trajectories (the swarm
/// level's race when it is on), Live Training's curves; empty for scenes without one.
std::string scene_csv(const LabState& lab, SceneId scene);

/// Why Export CSV is off on `scene` (a sentence for its tooltip); empty where it exports.
std::string csv_unavailable_reason(SceneId scene);

/// What keeps running while `visible` is shown, one line each ("Live Training: step 412, 18.3
/// steps/s"); empty when nothing does.
std::vector<std::string> background_activity(const LabState& lab, SceneId visible);

/// Brings `scene` to a rendered state synchronously (headless PNGs, tests): `steps` race or
/// training steps (RPE Studio: training steps of an FLT live model, for its learned spectra), and
/// the scene's computations finished.
void settle_scene(LabState& lab, SceneId scene, int steps);

}  // namespace flt::viz
