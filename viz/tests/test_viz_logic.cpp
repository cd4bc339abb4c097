// flt-lab scene logic without a GL context: state strings, applying a scenario and the transport,
// arena stepping and scoring, the swarm race, level progression, leaderboard order, plotting maths,
// CSV exports and the lists viz takes from the library. The scenes' computations (training,
// Attention Lab, Kernel Explorer, RPE Studio): test_viz_computations.cpp.

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>
#include <stdexcept>
#include <variant>

#include "flt/attention/flt.h"
#include "flt/attention/schoenbat.h"
#include "flt/attention/variants.h"
#include "logic/arena.h"
#include "logic/attention_lab.h"
#include "logic/history.h"
#include "logic/kernel_explorer.h"
#include "logic/lab.h"
#include "logic/plot_math.h"
#include "logic/rpe_studio.h"
#include "logic/scenario.h"
#include "logic/swarm_race.h"
#include "logic/training.h"
#include "logic/variants.h"
#include "viz_test_util.h"

using namespace flt::viz;

// The history grid of the spectra and the schedule trace: records every `interval` steps; past the
// capacity the interval doubles and only the records on the new grid stay (and the newest when
// asked), so a run of any length is in view with bounded memory.
TEST(HistoryGridTest, DoublesItsIntervalAndKeepsTheRecordsOnTheNewGrid) {
  HistoryGrid grid;
  std::vector<int64_t> steps;
  for (int64_t step = 1; step <= 100; ++step) {
    if (!grid.due(step)) continue;
    steps.push_back(step);
    keep_only(steps, grid.thin(steps, 8, /*keep_newest=*/false));
    ASSERT_LE(steps.size(), 8u) << step;
    for (int64_t s : steps) ASSERT_EQ(s % grid.interval(), 0) << s << " at step " << step;
  }
  EXPECT_EQ(grid.interval(), 16);  // 1..8, then 2..16, 4..32, 8..64, 16..128
  EXPECT_EQ(steps, (std::vector<int64_t>{16, 32, 48, 64, 80, 96}));

  HistoryGrid newest(10);
  std::vector<int64_t> frames = {10, 20, 30, 35};
  EXPECT_EQ(newest.thin(frames, 4, /*keep_newest=*/true), (std::vector<size_t>{0, 1, 2, 3}));
  frames.push_back(40);
  keep_only(frames, newest.thin(frames, 4, /*keep_newest=*/true));
  EXPECT_EQ(newest.interval(), 20);
  EXPECT_EQ(frames, (std::vector<int64_t>{20, 40}));
  frames.push_back(45);
  frames.push_back(50);
  frames.push_back(55);
  keep_only(frames, newest.thin(frames, 4, /*keep_newest=*/true));
  EXPECT_EQ(frames, (std::vector<int64_t>{40, 55}));  // interval 40 now, and the newest
}
TEST_F(VizLogic, StateStringRoundTrip) {
  Scenario s;
  s.scene = SceneId::kTraining;
  s.seed = 18446744073709551557ULL;
  s.speed = 0.25f;
  s.arena.level = 4;
  s.arena.custom_start = true;
  s.arena.start_x = -1.0 / 3.0;
  s.arena.start_y = 2.718281828459045;
  s.arena.human_lr = 1e-3;
  s.training.task = TrainingTask::kAssociativeRecall;
  s.training.lr = 0.1 / 3;
  s.training.smoothing = 0.9f;
  s.attention.input = AttentionInput::kPeriodic;
  s.attention.causal = true;
  s.attention.features = 128;
  s.attention.fourier_r = 0.7;
  s.attention.flt_family = 1;
  s.attention.schoenbat_kernel = 3;
  const std::string text = encode_state(s);
  const Scenario back = decode_state(text);
  EXPECT_EQ(encode_state(back), text);
  EXPECT_EQ(back.seed, s.seed);
  EXPECT_EQ(back.arena.start_x, s.arena.start_x);  // exact, not approximate
  EXPECT_EQ(back.training.lr, s.training.lr);
  EXPECT_EQ(back.scene, SceneId::kTraining);
  EXPECT_TRUE(back == s);
  EXPECT_FALSE(decode_state(encode_state(Scenario{})) == s);
}

TEST_F(VizLogic, StateStringToleratesOrderAndWhitespaceAndRejectsBadInput) {
  const Scenario s = decode_state("flt1; seed=42 ;scene=rpe;a.level=2\n");
  EXPECT_EQ(s.seed, 42u);
  EXPECT_EQ(s.scene, SceneId::kRpe);
  EXPECT_EQ(s.arena.level, 2);
  const auto expect_message = [](const std::string& text, const std::string& part) {
    try {
      decode_state(text);
      ADD_FAILURE() << "accepted " << text;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  expect_message("hello", "flt1");
  expect_message("flt1;bogus=1", "'bogus'");
  expect_message("flt1;seed=-3", "'seed'");
  expect_message("flt1;a.lr=nan", "'a.lr'");
  expect_message("flt1;speed=100", "'speed'");
  expect_message("flt1;scene=space", "'space'");
  expect_message("flt1;t.layers=0", "'t.layers'");
}

TEST_F(VizLogic, SceneNames) {
  for (int i = 0; i < kSceneCount; ++i) {
    SceneId id;
    ASSERT_TRUE(parse_scene(scene_key(static_cast<SceneId>(i)), &id));
    EXPECT_EQ(static_cast<int>(id), i);
  }
  SceneId id;
  EXPECT_FALSE(parse_scene("all", &id));
}

TEST_F(VizLogic, ArenaSteppingMovesRacersDownhill) {
  ArenaGame game;
  ArenaSettings settings;  // level 0: the bowl
  game.load(settings, 7);
  const double start = game.racers()[0].values.back();
  EXPECT_EQ(game.step_count(), 0);
  for (int i = 0; i < 20; ++i) game.step();
  EXPECT_EQ(game.step_count(), 20);
  for (const auto& racer : game.racers()) {
    if (racer.status == RacerStatus::kUnavailable) {
      EXPECT_EQ(racer.path.size(), 1u);  // the learned slot does not move
      continue;
    }
    EXPECT_EQ(racer.path.size(), static_cast<size_t>(racer.steps) + 1);
    EXPECT_LT(racer.values.back(), start) << racer.name;
  }
  // advance(): 10 steps per second at x1, x4 -> 2 steps in 0.05 s
  const int before = game.step_count();
  EXPECT_EQ(game.advance(0.05, 4.0f), 2);
  EXPECT_EQ(game.step_count(), before + 2);
}

TEST_F(VizLogic, ArenaIsDeterministicInTheSeed) {
  ArenaGame a, b;
  ArenaSettings settings;
  settings.level = 6;  // noisy level: the seed drives the noise
  a.load(settings, 3);
  b.load(settings, 3);
  for (int i = 0; i < 15; ++i) {
    a.step();
    b.step();
  }
  EXPECT_EQ(a.racers()[0].path.back(), b.racers()[0].path.back());
  b.load(settings, 4);
  for (int i = 0; i < 15; ++i) b.step();
  EXPECT_NE(a.racers()[0].path.back(), b.racers()[0].path.back());
}

// The swarm level: equal evaluations per step (to within one CMA-ES generation) for every
// population, rows of the swarm's attention sum to 1, the race ends at its budget, and the same
// seed gives the same race.
TEST_F(VizLogic, SwarmRaceEqualBudgetsAndAttention) {
  SwarmRace a, b;
  a.load(5, 160);
  b.load(5, 160);
  for (int i = 0; i < 4; ++i) {
    a.step();
    b.step();
  }
  ASSERT_EQ(a.racers().size(), 4u);
  for (const auto& r : a.racers()) {  // CMA-ES may overshoot by less than one generation
    EXPECT_GE(r.evaluations, 64) << r.name;
    EXPECT_LT(r.evaluations, 64 + 16) << r.name;
  }
  const int p = a.particles();
  ASSERT_EQ(a.attention().size(), static_cast<size_t>(p * p));
  for (int i = 0; i < p; ++i) {
    double row = 0.0;
    for (int j = 0; j < p; ++j) row += a.attention()[static_cast<size_t>(i * p + j)];
    EXPECT_NEAR(row, 1.0, 1e-4) << "row " << i;
  }
  EXPECT_EQ(a.racers()[0].points, b.racers()[0].points);
  EXPECT_EQ(a.racers()[2].best_value, b.racers()[2].best_value);
  EXPECT_EQ(a.advance(10.0, 1.0f), 6);  // 10 steps in total: the budget of 160
  EXPECT_TRUE(a.finished());
  const auto& curve = swarm_rpe_curve();
  ASSERT_FALSE(curve.f.empty());
  EXPECT_EQ(curve.f[0].size(), curve.distance.size());
}

TEST_F(VizLogic, ArenaScoringParAndStars) {
  EXPECT_EQ(stars_for(-1, 100), 0);
  EXPECT_EQ(stars_for(100, 100), 3);
  EXPECT_EQ(stars_for(101, 100), 2);
  EXPECT_EQ(stars_for(200, 100), 2);
  EXPECT_EQ(stars_for(201, 100), 1);

  ArenaGame game;
  ArenaSettings settings;
  settings.human_lr = 0.3;  // on the bowl f = |x|^2 this contracts by 0.4 per step (plus momentum)
  settings.human_momentum = 0.0;
  game.load(settings, 1);
  ASSERT_GT(game.par(), 0);
  while (!game.finished()) game.step();
  const Racer* adam = nullptr;
  const Racer* human = nullptr;
  for (const auto& racer : game.racers()) {
    if (racer.kind == RacerKind::kAdam) adam = &racer;
    if (racer.kind == RacerKind::kHuman) human = &racer;
  }
  ASSERT_TRUE(adam && human);
  // par is by definition the house Adam's steps to epsilon from the same start
  EXPECT_EQ(adam->steps_to_epsilon, game.par());
  ASSERT_EQ(human->status, RacerStatus::kReached);
  EXPECT_LE(human->values.back(), game.level().epsilon);
  EXPECT_EQ(game.stars(), stars_for(human->steps_to_epsilon, game.par()));
  EXPECT_EQ(game.stars(), 3);  // x_{t+1} = 0.4 x_t reaches 1e-3 in ~8 steps, far under Adam's par
}

TEST_F(VizLogic, ArenaNanGuardStopsADivergingRacer) {
  ArenaGame game;
  ArenaSettings settings;
  settings.level = 2;  // Rosenbrock: a huge step size blows up
  settings.human_lr = 1.0;
  settings.human_momentum = 0.9;
  game.load(settings, 1);
  for (int i = 0; i < 50 && !game.finished(); ++i) game.step();
  for (const auto& racer : game.racers()) {
    for (const auto& p : racer.path) EXPECT_TRUE(std::isfinite(p[0]) && std::isfinite(p[1]));
    if (racer.kind == RacerKind::kHuman) {
      EXPECT_EQ(racer.status, RacerStatus::kDiverged);
      EXPECT_FALSE(racer.note.empty());
    }
  }
  const auto rows = game.leaderboard();
  int learned = 0;
  for (const auto& row : rows)
    learned += row.status != RacerStatus::kUnavailable && row.name.rfind("Learned", 0) == 0;
  EXPECT_EQ(learned, 3) << "the shipped learned optimizers (FLT, Performer and LSTM memory) race";
}

TEST_F(VizLogic, LevelProgressionUnlocksInOrder) {
  LevelProgress progress;
  EXPECT_TRUE(progress.unlocked(0));
  EXPECT_FALSE(progress.unlocked(1));
  progress.record(0, 0);
  EXPECT_FALSE(progress.unlocked(1));
  progress.record(0, 2);
  EXPECT_TRUE(progress.unlocked(1));
  EXPECT_FALSE(progress.unlocked(2));
  progress.record(0, 1);  // best stars are kept
  EXPECT_EQ(progress.best_stars[0], 2);
  EXPECT_FALSE(progress.unlocked(static_cast<int>(arena_levels().size())));
}

TEST_F(VizLogic, LeaderboardSorts) {
  std::vector<LeaderboardRow> rows = {{0, 2, "b", 1.0, 0.5, -1, RacerStatus::kRunning},
                                      {1, 1, "a", 0.1, 0.1, 12, RacerStatus::kReached},
                                      {2, 3, "c", 5.0, 2.0, 30, RacerStatus::kReached}};
  sort_leaderboard(rows, LeaderboardColumn::kStepsToEpsilon, true);
  EXPECT_EQ(rows[0].name, "a");
  EXPECT_EQ(rows[2].name, "b");  // not reached sorts last
  sort_leaderboard(rows, LeaderboardColumn::kValue, false);
  EXPECT_EQ(rows[0].name, "c");
  sort_leaderboard(rows, LeaderboardColumn::kRank, true);
  EXPECT_EQ(rows[0].name, "a");
}

TEST_F(VizLogic, ArenaGridIsFiniteAndNonNegative) {
  ArenaGame game;
  for (int level = 0; level < static_cast<int>(arena_levels().size()); ++level) {
    ArenaSettings settings;
    settings.level = level;
    game.load(settings, 1);
    const auto& grid = game.grid();
    ASSERT_EQ(grid.values.size(), static_cast<size_t>(grid.rows) * grid.cols);
    for (float v : grid.values) ASSERT_TRUE(std::isfinite(v) && v >= 0.0f);
    EXPECT_GT(grid.hi, grid.lo);
    EXPECT_GT(grid.lo, 0.0f);
  }
}

TEST_F(VizLogic, PlotMaths) {
  const auto ticks = nice_ticks(0.0, 1.0, 5);
  ASSERT_EQ(ticks.size(), 6u);
  EXPECT_DOUBLE_EQ(ticks[1], 0.2);
  const auto logs = log_ticks(1e-3, 10.0);
  ASSERT_EQ(logs.size(), 5u);  // 4 decades: powers of ten only
  EXPECT_DOUBLE_EQ(logs.front(), 1e-3);
  const auto narrow = log_ticks(2.5, 30.0);  // one decade: 5, 10, 20
  ASSERT_EQ(narrow.size(), 3u);
  EXPECT_DOUBLE_EQ(narrow[0], 5.0);
  EXPECT_DOUBLE_EQ(narrow[2], 20.0);
  EXPECT_EQ(tick_label(0.001), "0.001");  // the header's examples: 4 digits, then 1e+04 style
  EXPECT_EQ(tick_label(2.5), "2.5");
  EXPECT_EQ(tick_label(1e4), "1e+04");
  EXPECT_EQ(tick_label(1e5), "1e+05");
  EXPECT_EQ(tick_label(2e-4), "2e-04");
  EXPECT_EQ(tick_label(0.0), "0");
  const auto smooth = smooth_ema({1, 1, 1, 5}, 0.5f);
  EXPECT_FLOAT_EQ(smooth[0], 1.0f);  // debiased: the first value is kept
  EXPECT_GT(smooth[3], 1.0f);
  EXPECT_LT(smooth[3], 5.0f);
  // viridis: dark purple to yellow; diverging: blue, white, red
  EXPECT_GT(colormap(Colormap::kViridis, 0.0f)[2], colormap(Colormap::kViridis, 0.0f)[1]);
  EXPECT_GT(colormap(Colormap::kViridis, 1.0f)[0], 200);
  EXPECT_GT(colormap(Colormap::kDiverging, 0.5f)[0], 230);
  EXPECT_GT(colormap(Colormap::kDiverging, 0.0f)[2], colormap(Colormap::kDiverging, 0.0f)[0]);
  // a circle contour on a radial field: every segment endpoint lies near radius 5
  const int n = 21;
  std::vector<float> field(n * n);
  for (int r = 0; r < n; ++r)
    for (int c = 0; c < n; ++c) field[r * n + c] = std::hypot(r - 10.0f, c - 10.0f);
  const auto segments = contour_segments(field, n, n, {5.0f});
  ASSERT_GT(segments.size(), 20u);
  for (const auto& s : segments) EXPECT_NEAR(std::hypot(s.x0 - 10.0f, s.y0 - 10.0f), 5.0f, 0.15f);
}

TEST_F(VizLogic, VariantsComeFromTheLibrary) {
  const auto& names = variant_names();
  ASSERT_EQ(names.size(), std::variant_size_v<flt::attention::AttentionOptions>);
  EXPECT_EQ(names[0], "softmax");
  std::set<std::string> unique(names.begin(), names.end());
  EXPECT_EQ(unique.size(), names.size());
  for (size_t i = 0; i < names.size(); ++i) EXPECT_EQ(variant_index(names[i]), static_cast<int>(i));
  EXPECT_EQ(variant_index("planned"), -1);
  EXPECT_EQ(variant_name(-1), "?");
}

// The spectrum families and SchoenbAt kernels viz offers are the library's lists (viz once kept
// its own copies, so a new family never appeared), and the state string accepts exactly them.
TEST_F(VizLogic, MenusListTheLibrarysEnumerations) {
  namespace fa = flt::attention;
  const auto& families = fa::spectrum_families();
  ASSERT_EQ(rpe_family_labels().size(), families.size());
  for (size_t i = 0; i < families.size(); ++i) {
    EXPECT_EQ(static_cast<size_t>(families[i].family), i);
    EXPECT_EQ(families[i].name, fa::spectrum_family_name(families[i].family));
    EXPECT_EQ(fa::spectrum_family_from_name(families[i].name), families[i].family);
    EXPECT_EQ(rpe_family_labels()[i], families[i].display_name);
  }
  EXPECT_TRUE(rpe_family_uses_smoothness(static_cast<int>(fa::SpectrumFamily::kLocal)));
  EXPECT_FALSE(rpe_family_uses_smoothness(static_cast<int>(fa::SpectrumFamily::kGaussianKernel)));
  EXPECT_EQ(schoenbat_kernel_names(), fa::schoenberg_kernels());

  const auto last = [](size_t count) { return std::to_string(count - 1); };
  EXPECT_NO_THROW(decode_state("flt1;r.family=" + last(families.size())));
  EXPECT_NO_THROW(decode_state("flt1;l.family=" + last(families.size())));
  EXPECT_THROW(decode_state("flt1;r.family=" + std::to_string(families.size())),
               std::invalid_argument);
  EXPECT_NO_THROW(decode_state("flt1;l.kernel=" + last(fa::schoenberg_kernels().size())));
  EXPECT_THROW(decode_state("flt1;l.kernel=" + std::to_string(fa::schoenberg_kernels().size())),
               std::invalid_argument);
  EXPECT_NO_THROW(decode_state("flt1;t.variant=" + last(variant_names().size())));
  EXPECT_THROW(decode_state("flt1;t.variant=" + std::to_string(variant_names().size())),
               std::invalid_argument);
}

// Paste state, --state and start-up share apply_scenario: the pasted speed reaches the training
// worker (Paste once skipped set_speed), every scene is rebuilt from the state and paused, and the
// state's RPE draw is kept (Reset once zeroed it).
TEST_F(VizLogic, PastedStateReachesEveryScene) {
  LabState lab;
  apply_scenario(lab, Scenario{});
  lab.training.session.start_worker();
  lab.arena.playing = true;
  lab.kernel.transport.playing = true;
  lab.training.session.set_playing(true);
  for (int i = 0; i < 3; ++i) lab.arena.game.step();

  ASSERT_TRUE(apply_state_string(lab, "flt1;scene=rpe;seed=9;speed=8;a.level=2;r.draw=5"))
      << lab.message;
  EXPECT_EQ(lab.training.session.snapshot().speed, 8.0f) << "the worker trains at the old pace";
  EXPECT_EQ(lab.scenario.speed, 8.0f);
  EXPECT_EQ(lab.scenario.scene, SceneId::kRpe);
  EXPECT_TRUE(lab.scene_changed);
  EXPECT_EQ(lab.arena.game.level_index(), 2);
  EXPECT_EQ(lab.arena.game.step_count(), 0);
  EXPECT_EQ(lab.scenario.rpe.draw, 5);
  EXPECT_TRUE(lab.attention.transport.dirty);
  EXPECT_TRUE(lab.kernel.transport.dirty);
  EXPECT_TRUE(lab.rpe.transport.dirty);
  for (int i = 0; i < kSceneCount; ++i)
    EXPECT_FALSE(scene_playing(lab, static_cast<SceneId>(i))) << scene_key(static_cast<SceneId>(i));

  // a bad string changes nothing and says why
  const Scenario before = lab.scenario;
  EXPECT_FALSE(apply_state_string(lab, "flt1;speed=8;bogus=1"));
  EXPECT_NE(lab.message.find("'bogus'"), std::string::npos) << lab.message;
  EXPECT_TRUE(lab.scenario == before);
}

// Reset rebuilds only the visible scene from the scenario, paused; the others keep their state.
TEST_F(VizLogic, ResetRebuildsOnlyTheCurrentScene) {
  LabState lab;
  Scenario scenario;
  scenario.training.length = 3;
  apply_scenario(lab, scenario);
  lab.training.session.run_steps(2);
  for (int i = 0; i < 4; ++i) step_scene(lab, SceneId::kArena);
  lab.arena.playing = true;
  apply_scenario(lab, lab.scenario, SceneId::kArena);
  EXPECT_EQ(lab.arena.game.step_count(), 0);
  EXPECT_FALSE(lab.arena.playing);
  EXPECT_EQ(lab.training.session.snapshot().step, 2);
}

// Lessons: the lesson is written by key in the state string; Step runs its quick version off the
// UI thread (update_scene never waits), and the results arrive with the lesson's table and plots.
TEST_F(VizLogic, LessonsRunTheQuickVersionOffTheUiThread) {
  Scenario scenario;
  scenario.scene = SceneId::kLessons;
  scenario.lessons.lesson = 6;  // swarm: its quick run takes a few seconds
  const std::string text = encode_state(scenario);
  EXPECT_NE(text.find("lesson=swarm"), std::string::npos) << text;
  EXPECT_EQ(decode_state("flt1;lesson=density").lessons.lesson, 4);
  EXPECT_EQ(decode_state("flt1;lesson=4").lessons.lesson, 4);
  EXPECT_THROW(decode_state("flt1;lesson=9"), std::invalid_argument);
  LabState lab;
  apply_scenario(lab, decode_state(text));
  EXPECT_EQ(lab.lessons.job.result().lesson, -1) << "nothing runs until asked";
  step_scene(lab, SceneId::kLessons);
  update_scene(lab, SceneId::kLessons, 0.0);  // posts the run
  EXPECT_TRUE(lab.lessons.job.busy() || lab.lessons.job.result().lesson == 6);
  lab.lessons.job.wait();
  update_scene(lab, SceneId::kLessons, 0.0);
  EXPECT_EQ(lab.lessons.job.result().lesson, 6);
  EXPECT_TRUE(lab.lessons.job.result().result.available);
  EXPECT_FALSE(lab.lessons.job.result().result.table.empty());
  EXPECT_FALSE(scene_playing(lab, SceneId::kLessons));
  // settle_scene (headless PNGs) runs the chosen lesson when its results are not there yet.
  lab.scenario.lessons.lesson = 0;  // rpe-error, a few seconds
  settle_scene(lab, SceneId::kLessons, 0);
  const auto& outcome = lab.lessons.job.result();
  ASSERT_EQ(outcome.lesson, 0);
  EXPECT_TRUE(outcome.error.empty()) << outcome.error;
  EXPECT_FALSE(outcome.result.table.empty());
  EXPECT_FALSE(outcome.result.panels.empty());
  EXPECT_FLOAT_EQ(lab.lessons.progress->done, 1.0f);
}

// A playing draw scene draws anew twice a second at x1 and posts the computation; the transport's
// step is the same draw.
TEST_F(VizLogic, PlayingDrawScenesRedrawAndRecompute) {
  LabState lab;
  Scenario scenario;
  scenario.scene = SceneId::kAttention;
  scenario.attention.length = 8;
  scenario.attention.head_dim = 4;
  apply_scenario(lab, scenario);
  settle_scene(lab, SceneId::kAttention, 0);
  ASSERT_TRUE(lab.attention.job.result().valid) << lab.attention.job.result().error;
  const auto first = lab.attention.job.result().approx;
  const int64_t version = lab.attention.version;
  set_scene_playing(lab, SceneId::kAttention, true);
  update_scene(lab, SceneId::kAttention, 0.2);
  EXPECT_EQ(lab.scenario.seed, 1u);  // not yet
  update_scene(lab, SceneId::kAttention, 0.3);
  EXPECT_EQ(lab.scenario.seed, 2u);  // 0.5 s at x1: a new draw, posted
  lab.attention.job.wait();
  EXPECT_NE(lab.attention.job.result().approx, first);
  step_scene(lab, SceneId::kRpe);
  EXPECT_EQ(lab.scenario.rpe.draw, 1);
  EXPECT_TRUE(lab.rpe.transport.dirty);
  settle_scene(lab, SceneId::kRpe, 0);
  EXPECT_FALSE(lab.rpe.transport.dirty);
  EXPECT_TRUE(lab.rpe.curves.result().error.empty()) << lab.rpe.curves.result().error;
  EXPECT_GT(lab.attention.version + lab.rpe.version, version);
}

namespace {

// The first level playing at x4, the player's racer at lr 0.3 without momentum (it reaches eps).
void play_first_level(LabState& lab) {
  Scenario scenario;
  scenario.arena.human_lr = 0.3;
  scenario.arena.human_momentum = 0.0;
  scenario.speed = 4.0f;
  apply_scenario(lab, scenario);
  set_scene_playing(lab, SceneId::kArena, true);
}

}  // namespace

// The arena plays at 10 steps per second x speed and records the stars of a finished race once.
TEST_F(VizLogic, ArenaPlaysAndRecordsStars) {
  LabState lab;
  play_first_level(lab);
  update_scene(lab, SceneId::kArena, 0.05);
  EXPECT_EQ(lab.arena.game.step_count(), 2);
  while (!lab.arena.game.finished()) update_scene(lab, SceneId::kArena, 1.0);
  update_scene(lab, SceneId::kArena, 0.0);
  EXPECT_FALSE(lab.arena.playing);
  EXPECT_EQ(lab.arena.progress.best_stars[0], 3);
  EXPECT_TRUE(lab.arena.progress.unlocked(1));
}

// The next level opens when the player's racer earns its stars, while others still race, and the
// list counts all of them at once.
TEST_F(VizLogic, ALevelOpensWhenItsStarIsEarnedNotWhenTheRaceEnds) {
  LabState lab;
  play_first_level(lab);
  while (lab.arena.game.stars() == 0 && !lab.arena.game.finished()) {
    update_scene(lab, SceneId::kArena, 0.05);
  }
  ASSERT_GE(lab.arena.game.stars(), 1);
  ASSERT_FALSE(lab.arena.game.finished()) << "every racer stopped with the first star";
  EXPECT_TRUE(lab.arena.progress.unlocked(1));
  EXPECT_EQ(lab.arena.progress.best_stars[0], lab.arena.game.stars());
}

// Export CSV on the swarm level holds the swarm race, not the classic racers behind it.
TEST_F(VizLogic, SwarmLevelCsvHoldsTheRaceItShows) {
  LabState lab;
  Scenario scenario;
  scenario.arena.swarm = true;
  apply_scenario(lab, scenario);
  for (int i = 0; i < 3; ++i) lab.arena.swarm.step();
  const std::string csv = scene_csv(lab, SceneId::kArena);
  EXPECT_EQ(csv.rfind("racer,kind,step,evaluations,member,x,y,f\n", 0), 0u) << csv.substr(0, 80);
  size_t best_rows = 0, particle_rows = 0;
  for (size_t at = csv.find(",best,"); at != std::string::npos; at = csv.find(",best,", at + 1))
    ++best_rows;
  for (size_t at = csv.find(",particle,3,"); at != std::string::npos;
       at = csv.find(",particle,3,", at + 1))
    ++particle_rows;
  const size_t racers = lab.arena.swarm.racers().size();
  EXPECT_EQ(best_rows, 3 * racers);  // every racer's best after each of the 3 steps
  size_t population = 0;
  for (const auto& r : lab.arena.swarm.racers()) population += r.points.size();
  EXPECT_EQ(particle_rows, population);
  for (const auto& r : lab.arena.swarm.racers()) {
    EXPECT_NE(csv.find('"' + r.name + "\",best,3,"), std::string::npos) << r.name;
  }
  // The classic level's trajectories (their header) are not what this level exports.
  EXPECT_EQ(csv.find("racer,step,x,y,f"), std::string::npos);
}

// Earlier runs on the training plots: eight colours told apart from each other and from the
// current run's orange loss and blue accuracy.
TEST_F(VizLogic, EarlierRunsEachHaveTheirOwnColour) {
  const auto distance = [](const Rgba& a, std::array<int, 3> b) {
    int d = 0;
    for (int i = 0; i < 3; ++i) d = std::max(d, std::abs(static_cast<int>(a[i]) - b[i]));
    return d;
  };
  for (int i = 0; i < 8; ++i) {
    const Rgba c = earlier_run_color(i);
    EXPECT_GE(distance(c, {255, 140, 60}), 40) << i;  // the current loss
    EXPECT_GE(distance(c, {80, 200, 255}), 40) << i;  // the current accuracy
    for (int j = 0; j < i; ++j) {
      const Rgba o = earlier_run_color(j);
      EXPECT_GE(distance(c, {o[0], o[1], o[2]}), 40) << i << " vs " << j;
    }
  }
  EXPECT_EQ(earlier_run_color(8), earlier_run_color(0));
}

TEST_F(VizLogic, CsvExports) {
  ArenaGame game;
  game.load(ArenaSettings{}, 1);
  for (int i = 0; i < 5; ++i) game.step();
  const std::string arena = game.trajectories_csv();
  size_t rows = 0;
  for (char c : arena) rows += c == '\n';
  size_t points = 0;
  for (const auto& racer : game.racers()) points += racer.path.size();
  EXPECT_EQ(rows, points + 1);  // header + one row per point
  EXPECT_EQ(arena.rfind("racer,step,x,y,f\n", 0), 0u);

  TrainingSession session;
  TrainingSettings settings;
  settings.length = 3;
  train(session, settings, 1, 3);
  const std::string curves = session.curves_csv();
  const std::string run = '"' + run_label(settings) + "\",";
  EXPECT_EQ(curves.rfind("run,step,loss,accuracy\n" + run + "1,", 0), 0u) << curves;
  EXPECT_NE(curves.find("\n" + run + "3,"), std::string::npos);
}
