#include "logic/lab.h"

#include <cstdio>
#include <stdexcept>
#include <utility>

#include "logic/progress_file.h"

namespace flt::viz {
namespace {

constexpr double kDrawsPerSecond = 2.0;  // a playing draw scene at x1

// The transport of a draw scene; null for the arena and training, which have their own.
// (Lab: LabState or const LabState.)
template <typename Lab>
auto draw_transport(Lab& lab, SceneId scene) -> decltype(&lab.attention.transport) {
  switch (scene) {
    case SceneId::kAttention: return &lab.attention.transport;
    case SceneId::kKernel: return &lab.kernel.transport;
    case SceneId::kRpe: return &lab.rpe.transport;
    case SceneId::kArena:
    case SceneId::kTraining:
    case SceneId::kLessons: break;
  }
  return nullptr;
}

// Advances a playing draw scene's clock; true when it is time for the next draw.
bool play_tick(DrawTransport& t, double dt, float speed) {
  if (!t.playing) return false;
  t.clock += dt * speed;
  if (t.clock < 1.0 / kDrawsPerSecond) return false;
  t.clock = 0.0;
  return true;
}

// Posts the computation of a changed draw scene (the Kernel Explorer's curves are computed here).
void post_request(LabState& lab, SceneId scene) {
  const Scenario& sc = lab.scenario;
  switch (scene) {
    case SceneId::kAttention:
      if (lab.attention.transport.dirty) {
        lab.attention.transport.dirty = false;
        lab.attention.settings_error = attention_settings_error(sc.attention);
        if (!lab.attention.settings_error.empty()) break;  // the last pictures stay
        LiveQueriesKeys live;
        if (sc.attention.input == AttentionInput::kLiveModel) {
          lab.training.session.probe_queries_keys(&live.q, &live.k, &live.heads, &live.length,
                                                  &live.dim);
        }
        lab.attention.job.request(sc.attention, sc.seed, std::move(live));
      }
      break;
    case SceneId::kKernel:
      if (lab.kernel.transport.dirty) {
        lab.kernel.curves = compute_kernel_curves(sc.kernel);
        lab.kernel.curves_version += 1;
        lab.kernel.estimates.request({sc.kernel, sc.seed});
        lab.kernel.transport.dirty = false;
      }
      break;
    case SceneId::kRpe:
      if (lab.rpe.transport.dirty) {
        lab.rpe.curves.request({sc.rpe, sc.seed * 1000003ULL + static_cast<uint64_t>(sc.rpe.draw)});
        lab.rpe.transport.dirty = false;
      }
      break;
    case SceneId::kLessons:
      if (lab.lessons.run_requested) {
        lab.lessons.progress->done = 0.0f;
        lab.lessons.progress->running = true;
        lab.lessons.job.request({sc.lessons.lesson, sc.seed, lab.lessons.progress});
        lab.lessons.run_requested = false;
      }
      break;
    case SceneId::kArena:
    case SceneId::kTraining: break;
  }
}

/// A scene whose results come from a background job: a play tick steps it, its request is posted
/// (the job keeps only the latest) and a new result bumps the version its panel redraws on.
template <typename Job>
void update_job_scene(LabState& lab, SceneId scene, DrawTransport& transport, Job& job,
                      int64_t& version, double dt, float speed) {
  if (play_tick(transport, dt, speed)) step_scene(lab, scene);
  post_request(lab, scene);
  if (job.poll()) version += 1;
}

// Records the stars of the race on screen as soon as they are earned (a racer's stars are final
// when it reaches eps, and in "click each step" mode the house racers may never finish), and
// saves the progress when a level's best rose.
void record_arena_stars(LabState& lab) {
  ArenaScene& arena = lab.arena;
  if (!arena.progress.record(arena.game.level_index(), arena.game.stars())) return;
  if (arena.progress_path.empty()) return;
  std::string error;
  if (!save_progress(arena.progress_path, arena.progress, &error) && !arena.progress_reported) {
    arena.progress_reported = true;  // once: the next stars would only repeat it
    lab.alert = error + " (stars are kept until flt-lab closes)";
  }
}

}  // namespace

void use_progress_file(LabState& lab, const std::string& path) {
  std::string error;
  lab.arena.progress = load_progress(path, &error);
  lab.arena.progress_path = path;
  lab.arena.progress_reported = false;
  if (!error.empty()) lab.alert = error;
}

std::string locked_level_note(const LabState& lab) {
  const ArenaSettings& arena = lab.scenario.arena;
  if (arena.swarm || lab.arena.progress.unlocked(arena.level)) return {};
  const auto& levels = arena_levels();
  if (arena.level <= 0 || arena.level >= static_cast<int>(levels.size())) return {};
  return "Level " + levels[arena.level].name + " is still locked in your progress (a star on " +
         levels[arena.level - 1].name +
         " opens it): the state string opens it anyway, and stars earned here count.";
}

LessonOutcome run_lesson_quick(const LessonRequest& request) {
  LessonOutcome outcome;
  outcome.lesson = request.lesson;
  const auto& list = flt::demos::lessons();
  try {
    const auto& lesson = list.at(static_cast<size_t>(request.lesson));
    flt::demos::LessonSettings settings;
    settings.quick = true;
    settings.seed = request.seed;
    const auto progress = request.progress;
    settings.progress = [progress](double done, const std::string& stage) {
      if (!progress) return;
      progress->done = static_cast<float>(done);
      std::lock_guard<std::mutex> lock(progress->mutex);
      progress->stage = stage;
    };
    settings.cancelled = [progress] { return progress && progress->cancel.load(); };
    outcome.result = lesson.run(settings);
  } catch (const std::exception& e) {
    outcome.error = e.what();
  }
  if (request.progress) request.progress->running = false;
  return outcome;
}

void rebuild_scene(LabState& lab, SceneId scene) {
  const Scenario& sc = lab.scenario;
  if (scene == SceneId::kArena) {
    lab.arena.game.load(sc.arena, sc.seed);
    if (sc.arena.swarm) lab.arena.swarm.load(sc.seed);
  } else if (scene == SceneId::kTraining) {
    lab.training.session.configure(sc.training, sc.seed);
  } else if (scene == SceneId::kLessons) {
    lab.lessons.run_requested = false;  // a lesson runs only when asked (it takes seconds)
  } else {
    draw_transport(lab, scene)->dirty = true;
  }
}

void apply_scenario(LabState& lab, const Scenario& scenario, std::optional<SceneId> only) {
  lab.scenario = scenario;  // (scenario may be lab.scenario itself: Reset)
  lab.scene_changed = true;
  set_speed(lab, lab.scenario.speed);
  for (int i = 0; i < kSceneCount; ++i) {
    const auto scene = static_cast<SceneId>(i);
    if (only && *only != scene) continue;
    set_scene_playing(lab, scene, false);
    if (DrawTransport* t = draw_transport(lab, scene)) t->clock = 0.0;
    rebuild_scene(lab, scene);
  }
}

bool apply_state_string(LabState& lab, const std::string& text) {
  try {
    apply_scenario(lab, decode_state(text));
    const std::string note = locked_level_note(lab);
    lab.message = "Applied the state string" + (note.empty() ? "" : ". " + note);
    return true;
  } catch (const std::invalid_argument& e) {
    lab.message = e.what();
    return false;
  }
}

void set_speed(LabState& lab, float speed) {
  lab.scenario.speed = speed;
  lab.training.session.set_speed(speed);
}

bool scene_playing(const LabState& lab, SceneId scene) {
  if (scene == SceneId::kArena) return lab.arena.playing;
  if (scene == SceneId::kLessons) return lab.lessons.progress->running;
  if (scene == SceneId::kTraining) return lab.training.session.status().playing;
  return draw_transport(lab, scene)->playing;
}

void set_scene_playing(LabState& lab, SceneId scene, bool playing) {
  if (scene == SceneId::kArena) {
    lab.arena.playing = playing;
  } else if (scene == SceneId::kTraining) {
    lab.training.session.set_playing(playing);
  } else if (scene == SceneId::kLessons) {
    if (playing && !lab.lessons.progress->running) lab.lessons.run_requested = true;  // Play = Run
  } else {
    draw_transport(lab, scene)->playing = playing;
  }
}

void step_scene(LabState& lab, SceneId scene) {
  switch (scene) {
    case SceneId::kArena:
      if (lab.scenario.arena.swarm) {
        lab.arena.swarm.step();
      } else {
        lab.arena.game.step();
      }
      break;
    case SceneId::kTraining:
      if (lab.training.worker) {
        lab.training.session.request_step();
      } else {
        lab.training.session.run_steps(1);
      }
      break;
    case SceneId::kAttention:  // new random inputs
      lab.scenario.seed += 1;
      lab.attention.transport.dirty = true;
      break;
    case SceneId::kKernel:  // new samples for the estimators
      lab.scenario.seed += 1;
      lab.kernel.transport.dirty = true;
      break;
    case SceneId::kRpe:  // new RPE random features
      lab.scenario.rpe.draw += 1;
      lab.rpe.transport.dirty = true;
      break;
    case SceneId::kLessons:  // run the chosen lesson (again)
      if (!lab.lessons.progress->running) lab.lessons.run_requested = true;
      break;
  }
}

void update_scene(LabState& lab, SceneId scene, double dt) {
  const float speed = lab.scenario.speed;
  switch (scene) {
    case SceneId::kArena: {
      auto& arena = lab.arena;
      if (lab.scenario.arena.swarm) {
        if (arena.playing) arena.swarm.advance(dt, speed);
        if (arena.swarm.finished()) arena.playing = false;
        break;
      }
      if (arena.playing) arena.game.advance(dt, speed);
      // Stars count when earned, not when the last racer stops: the next level opens now.
      record_arena_stars(lab);
      if (arena.game.finished()) arena.playing = false;
      break;
    }
    case SceneId::kTraining:  // the worker trains; the panel reads snapshots
      break;
    case SceneId::kAttention:
      update_job_scene(lab, scene, lab.attention.transport, lab.attention.job,
                       lab.attention.version, dt, speed);
      break;
    case SceneId::kKernel:
      update_job_scene(lab, scene, lab.kernel.transport, lab.kernel.estimates,
                       lab.kernel.estimates_version, dt, speed);
      break;
    case SceneId::kRpe:
      update_job_scene(lab, scene, lab.rpe.transport, lab.rpe.curves, lab.rpe.version, dt, speed);
      break;
    case SceneId::kLessons:
      post_request(lab, scene);
      if (lab.lessons.job.poll()) lab.lessons.version += 1;
      break;
  }
}

bool lab_animating(const LabState& lab) {
  const SceneId visible = lab.scenario.scene;
  if (lab.training.session.status().playing) return true;  // its curves grow on every tab
  if (lab.lessons.progress->running || lab.lessons.run_requested) return true;
  // a computation counts on its own tab only: another tab's result is taken when it is shown. A
  // finished lesson counts until its result is taken: its run clears `running` just before the
  // job's result is ready, and a frame drawn between the two would otherwise let the window sleep
  // with the last progress on screen.
  const bool busy = (visible == SceneId::kLessons && lab.lessons.job.busy()) ||
                    (visible == SceneId::kAttention && lab.attention.job.busy()) ||
                    (visible == SceneId::kKernel && lab.kernel.estimates.busy()) ||
                    (visible == SceneId::kRpe && lab.rpe.curves.busy());
  if (busy) return true;
  if (const DrawTransport* t = draw_transport(lab, visible)) return t->playing || t->dirty;
  return visible == SceneId::kArena && lab.arena.playing;
}

std::string scene_csv(const LabState& lab, SceneId scene) {
  if (scene == SceneId::kArena) {
    return lab.scenario.arena.swarm ? lab.arena.swarm.race_csv()
                                    : lab.arena.game.trajectories_csv();
  }
  if (scene == SceneId::kTraining) return lab.training.session.curves_csv();
  return {};
}

std::string csv_unavailable_reason(SceneId scene) {
  switch (scene) {
    case SceneId::kArena:
    case SceneId::kTraining: return {};
    case SceneId::kAttention:
    case SceneId::kKernel:
    case SceneId::kRpe:
    case SceneId::kLessons: break;
  }
  return std::string(scene_title(scene)) +
         " has no table to export: CSV export is for the Optimizer Arena's trajectories and "
         "Live Training's curves. Export PNG keeps this picture (flt-demo writes the lessons' "
         "CSV files).";
}

std::vector<std::string> background_activity(const LabState& lab, SceneId visible) {
  std::vector<std::string> lines;
  char text[160];
  const TrainingStatus training = lab.training.session.status();
  if (training.playing && visible != SceneId::kTraining) {
    std::snprintf(text, sizeof(text), "Live Training is training: step %lld, %.1f steps/s",
                  static_cast<long long>(training.step), training.steps_per_second);
    lines.emplace_back(text);
  }
  if (lab.lessons.progress->running && visible != SceneId::kLessons) {
    const auto& list = flt::demos::lessons();
    const int index = lab.lessons.job.busy() ? lab.scenario.lessons.lesson : -1;
    std::snprintf(text, sizeof(text), "Lessons: running %s (%.0f%%)",
                  index >= 0 && index < static_cast<int>(list.size())
                      ? list[static_cast<size_t>(index)].title.c_str()
                      : "a lesson",
                  100.0f * lab.lessons.progress->done.load());
    lines.emplace_back(text);
  }
  return lines;
}

void settle_scene(LabState& lab, SceneId scene, int steps) {
  switch (scene) {
    case SceneId::kArena:
      if (lab.scenario.arena.swarm) {
        for (int i = 0; i < steps && !lab.arena.swarm.finished(); ++i) lab.arena.swarm.step();
        break;
      }
      for (int i = 0; i < steps && !lab.arena.game.finished(); ++i) lab.arena.game.step();
      break;
    case SceneId::kTraining: lab.training.session.run_steps(steps); break;
    case SceneId::kAttention:
      post_request(lab, scene);
      lab.attention.job.wait();
      lab.attention.version += 1;
      break;
    case SceneId::kKernel:
      post_request(lab, scene);
      lab.kernel.estimates.wait();
      lab.kernel.estimates_version += 1;
      break;
    case SceneId::kRpe:
      // an FLT live model trains so the learned-spectra panel has a history to show
      if (lab.training.session.snapshot().spectrum_heads > 0) lab.training.session.run_steps(steps);
      post_request(lab, scene);
      lab.rpe.curves.wait();
      lab.rpe.version += 1;
      break;
    case SceneId::kLessons:
      // the chosen lesson's quick run, unless its results are already there
      if (lab.lessons.job.result().lesson != lab.scenario.lessons.lesson) {
        lab.lessons.run_requested = true;
        post_request(lab, scene);
      }
      lab.lessons.job.wait();
      lab.lessons.version += 1;
      break;
  }
}

}  // namespace flt::viz
