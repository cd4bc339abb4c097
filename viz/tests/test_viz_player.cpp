// What a player relies on, without a GL context: stars counted when earned and kept across
// restarts in a small progress file (a broken one reported, never fatal), a state string that
// says when it opens a locked level, exports that land in the folder the dialog names, racers
// flagged when they leave the map, the training CSV holding every compared run, the Attention
// Lab's R in its own words, the NaN banner's advice, and Ctrl chords counted like other keys.

#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "logic/arena.h"
#include "logic/attention_lab.h"
#include "logic/interaction.h"
#include "logic/lab.h"
#include "logic/plot_math.h"
#include "logic/progress_file.h"
#include "logic/variants.h"
#include "viz_test_util.h"

using namespace flt::viz;
namespace fs = std::filesystem;

namespace {

// A fresh folder under the system's temporary folder, removed with the test.
class TempFolder {
 public:
  explicit TempFolder(const std::string& name)
      : path_(fs::temp_directory_path() / ("flt-viz-" + name + "-" + std::to_string(::getpid()))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempFolder() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Sets an environment variable for one scope (nullopt: unset), then restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      ::setenv(name, value->c_str(), 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

const Racer& human_of(const ArenaGame& game) {
  for (const auto& racer : game.racers()) {
    if (racer.kind == RacerKind::kHuman) return racer;
  }
  throw std::logic_error("no human racer");
}

// The bowl, your racer moved with "My step" only (the house racers stand still) until it stops.
void click_each_step_to_the_end(LabState& lab) {
  apply_scenario(lab, Scenario{});
  for (int i = 0; i < 1000 && human_of(lab.arena.game).status <= RacerStatus::kRunning; ++i) {
    lab.arena.game.step_human();
    update_scene(lab, SceneId::kArena, 0.0);
  }
}

}  // namespace

// In "click each step" mode the house racers never move, so the race never ends: the stars your
// racer earned count at once, and the counters follow your racer.
TEST_F(VizLogic, ClickEachStepStarsCountWhenYourRacerArrives) {
  LabState lab;
  click_each_step_to_the_end(lab);
  const ArenaGame& game = lab.arena.game;
  const Racer& you = human_of(game);
  ASSERT_EQ(you.status, RacerStatus::kReached);
  ASSERT_FALSE(game.finished());
  EXPECT_EQ(game.step_count(), 0);
  EXPECT_EQ(game.steps_taken(), you.steps) << "the step counter follows your racer";
  ASSERT_GE(game.stars(), 2) << "the bowl at the default lr and momentum";
  EXPECT_EQ(lab.arena.progress.best_stars[0], game.stars()) << "the list shows what was earned";
  EXPECT_NE(game.human_done_line().find("reached eps in " + std::to_string(you.steps)),
            std::string::npos)
      << game.human_done_line();
}

// Stars and unlocked levels survive a restart: written atomically to the progress file, read back
// by the next session.
TEST_F(VizLogic, ProgressSurvivesARestart) {
  TempFolder folder("progress");
  const std::string path = (folder.path() / "flt-lab" / "progress").string();
  {
    LabState lab;
    use_progress_file(lab, path);
    EXPECT_TRUE(lab.alert.empty()) << "a first start is not an error: " << lab.alert;
    click_each_step_to_the_end(lab);
    ASSERT_GE(lab.arena.progress.best_stars[0], 2);
  }
  EXPECT_EQ(read_text(path).rfind("flt-lab progress 1\nstars ", 0), 0u) << read_text(path);
  for (const auto& entry : fs::directory_iterator(folder.path() / "flt-lab"))
    EXPECT_EQ(entry.path().filename(), "progress") << "a temporary file was left behind";
  LabState next;
  use_progress_file(next, path);
  EXPECT_TRUE(next.alert.empty()) << next.alert;
  EXPECT_GE(next.arena.progress.best_stars[0], 2);
  EXPECT_TRUE(next.arena.progress.unlocked(1));
  EXPECT_FALSE(next.arena.progress.unlocked(2));
}

// A corrupt progress file is named, ignored (a fresh start), and never stops the tool.
TEST_F(VizLogic, ACorruptProgressFileIsReportedAndIgnored) {
  TempFolder folder("corrupt");
  const fs::path path = folder.path() / "progress";
  std::ofstream(path) << "flt-lab progress 1\nstars 3 7 0\n";
  LabState lab;
  use_progress_file(lab, path.string());
  EXPECT_NE(lab.alert.find(path.string()), std::string::npos) << lab.alert;
  EXPECT_NE(lab.alert.find("stars of level 2 must be 0 to 3, got '7'"), std::string::npos)
      << lab.alert;
  EXPECT_EQ(lab.arena.progress.best_stars[0], 0) << "nothing of a corrupt file is used";
  std::ofstream(path) << "\x89PNG garbage";
  EXPECT_THROW(decode_progress(read_text(path)), std::invalid_argument);
  // the next stars replace the corrupt file with a good one
  lab.alert.clear();
  click_each_step_to_the_end(lab);
  EXPECT_TRUE(lab.alert.empty()) << lab.alert;
  EXPECT_NO_THROW(decode_progress(read_text(path)));
  // a file from a build with other levels: known levels read, the rest ignored
  EXPECT_EQ(decode_progress("flt-lab progress 1\nstars 2\n").best_stars[0], 2);
  EXPECT_EQ(decode_progress("flt-lab progress 1\nstars 1 1 1 1 1 1 1 1 1 1 1\n").best_stars[7], 1);
}

// A progress file that cannot be written is reported once; play goes on with the stars in memory.
TEST_F(VizLogic, AnUnwritableProgressFileIsReportedOnce) {
  TempFolder folder("unwritable");
  const fs::path blocker = folder.path() / "not-a-folder";
  std::ofstream(blocker) << "a file where the folder should be";
  const std::string path = (blocker / "flt-lab" / "progress").string();
  LabState lab;
  use_progress_file(lab, path);
  EXPECT_TRUE(lab.alert.empty()) << lab.alert;
  click_each_step_to_the_end(lab);
  EXPECT_NE(lab.alert.find("could not save progress to " + path), std::string::npos) << lab.alert;
  EXPECT_GE(lab.arena.progress.best_stars[0], 2) << "the stars are kept in memory";
  lab.alert.clear();
  lab.arena.progress.best_stars[0] = 0;  // earn them again: the failure is not repeated
  click_each_step_to_the_end(lab);
  EXPECT_TRUE(lab.alert.empty()) << lab.alert;
}

// The progress file lives under $XDG_STATE_HOME (an absolute path), else ~/.local/state.
TEST_F(VizLogic, ProgressFileFollowsXdgStateHome) {
  ScopedEnv home("HOME", "/home/player");
  {
    ScopedEnv state("XDG_STATE_HOME", "/tmp/state");
    EXPECT_EQ(default_progress_path(), "/tmp/state/flt-lab/progress");
  }
  {
    ScopedEnv state("XDG_STATE_HOME", "relative/state");  // invalid by the XDG rules: ignored
    EXPECT_EQ(default_progress_path(), "/home/player/.local/state/flt-lab/progress");
  }
  ScopedEnv state("XDG_STATE_HOME", std::nullopt);
  EXPECT_EQ(default_progress_path(), "/home/player/.local/state/flt-lab/progress");
  ScopedEnv no_home("HOME", std::nullopt);
  EXPECT_EQ(default_progress_path(), "") << "nowhere to keep it: progress stays in memory";
}

// A state string may open a level the player has not unlocked (that is how races are shared): it
// does, and says so.
TEST_F(VizLogic, AStateStringOpeningALockedLevelSaysSo) {
  LabState lab;
  ASSERT_TRUE(apply_state_string(lab, "flt1;a.level=4"));
  EXPECT_EQ(lab.arena.game.level_index(), 4);
  EXPECT_NE(lab.message.find("still locked"), std::string::npos) << lab.message;
  EXPECT_NE(lab.message.find(arena_levels()[4].name), std::string::npos) << lab.message;
  lab.arena.progress.record(3, 1);
  ASSERT_TRUE(apply_state_string(lab, "flt1;a.level=4"));
  EXPECT_EQ(lab.message, "Applied the state string");
  EXPECT_TRUE(locked_level_note(lab).empty());
}

// An export writes its name inside the chosen folder: a name with folders or "..", or one that
// resolves elsewhere, is refused with the reason.
TEST_F(VizLogic, ExportsLandInTheChosenFolder) {
  TempFolder folder("export");
  const std::string dir = folder.path().string();
  std::string error;
  EXPECT_EQ(export_target(dir, "race.csv", &error), (folder.path() / "race.csv").string());
  EXPECT_TRUE(error.empty()) << error;
  EXPECT_EQ(export_target(dir + "/", "race.csv", &error), (folder.path() / "race.csv").string());
  EXPECT_EQ(export_target(dir, "tmp/x/arena.csv25.csv", &error), "");
  EXPECT_NE(error.find("'tmp/x/arena.csv25.csv' holds a folder separator"), std::string::npos)
      << error;
  EXPECT_EQ(export_target(dir, "..", &error), "");
  EXPECT_NE(error.find("'..' is not a file name"), std::string::npos) << error;
  EXPECT_EQ(export_target(dir, "", &error), "");
  EXPECT_NE(error.find("file name"), std::string::npos) << error;
  EXPECT_EQ(export_target("", "race.csv", &error), "");
  fs::create_directories(folder.path() / "elsewhere");
  fs::create_directories(folder.path() / "out");
  fs::create_symlink(folder.path() / "elsewhere" / "x.csv", folder.path() / "out" / "link.csv");
  EXPECT_EQ(export_target((folder.path() / "out").string(), "link.csv", &error), "");
  EXPECT_NE(error.find("outside the folder"), std::string::npos) << error;
}

// A racer that leaves the map is flagged and explained on the egg crate as on the banana (the egg
// crate let one sit 7.5 away, outside its +-5.12 map, as "out of steps": only three map widths
// away counted as leaving).
TEST_F(VizLogic, ARacerThatLeavesTheEggCrateIsFlagged) {
  ArenaGame game;
  ArenaSettings settings;
  settings.level = 7;  // the stormy egg crate: momentum 0.9 carries your racer off the map
  settings.human_lr = 0.01;
  settings.human_momentum = 0.9;
  game.load(settings, 1);
  while (!game.finished()) game.step();
  const Racer& you = human_of(game);
  EXPECT_EQ(you.status, RacerStatus::kDiverged) << racer_status_name(you.status);
  EXPECT_NE(you.note.find("left the map"), std::string::npos) << you.note;
  // it drifted off (no step blew up): the advice is about momentum, not a steep landscape
  EXPECT_NE(you.advice.find("momentum 0.45"), std::string::npos) << you.advice;
  // no racer that stopped "out of steps" sits off the map
  for (const auto& racer : game.racers()) {
    if (racer.status != RacerStatus::kOutOfSteps) continue;
    const auto& p = racer.path.back();
    const auto& l = game.level();
    EXPECT_TRUE(p[0] >= l.lo_x && p[0] <= l.hi_x && p[1] >= l.lo_y && p[1] <= l.hi_y) << racer.name;
  }
}

// Export CSV holds every run the plots compare, each row named by its run's legend label.
TEST_F(VizLogic, TrainingCsvHoldsEveryComparedRun) {
  TrainingSession session;
  const auto [adam, learned] = adam_then_mnemosyne(session);
  session.run_steps(2);
  const std::string csv = session.curves_csv();
  EXPECT_EQ(csv.rfind("run,step,loss,accuracy\n\"" + run_label(adam) + "\",1,", 0), 0u) << csv;
  EXPECT_NE(csv.find("\"" + run_label(adam) + "\",3,"), std::string::npos) << csv;
  EXPECT_NE(csv.find("\"" + run_label(learned) + "\",2,"), std::string::npos) << csv;
  size_t rows = 0;
  for (char c : csv) rows += c == '\n';
  EXPECT_EQ(rows, 1u + 3u + 2u);
}

// The Attention Lab speaks of R, its own knob: a bad R is named in the panel's words and the last
// pictures stay; the state string refuses R <= 0 (0 means "automatic" to the library, a meaning
// the panel does not offer).
TEST_F(VizLogic, AttentionLabSaysRInItsOwnWords) {
  AttentionLabSettings settings;
  settings.variant = variant_index("fourier");
  ASSERT_GE(settings.variant, 0);
  settings.fourier_r = -1.0;
  const auto result = compute_attention_lab(settings, 1, nullptr);
  EXPECT_FALSE(result.valid);
  EXPECT_EQ(result.error.rfind("R must be a positive number", 0), 0u) << result.error;
  EXPECT_NE(result.error.find("got -1"), std::string::npos) << result.error;
  EXPECT_EQ(result.error.find("r_init"), std::string::npos) << result.error;
  for (const char* bad : {"flt1;l.R=0", "flt1;l.R=-1"}) {
    try {
      decode_state(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("key 'l.R' must be positive"), std::string::npos)
          << e.what();
    }
  }
  LabState lab;
  Scenario scenario;
  scenario.scene = SceneId::kAttention;
  scenario.attention.variant = settings.variant;
  apply_scenario(lab, scenario);
  settle_scene(lab, SceneId::kAttention, 0);
  ASSERT_TRUE(lab.attention.job.result().valid);
  lab.scenario.attention.fourier_r = 0.0;  // typed into the box
  rebuild_scene(lab, SceneId::kAttention);
  update_scene(lab, SceneId::kAttention, 0.0);
  EXPECT_NE(lab.attention.settings_error.find("got 0"), std::string::npos)
      << lab.attention.settings_error;
  EXPECT_TRUE(lab.attention.job.result().valid) << "the last pictures stay";
}

// The NaN that "Break it" injects says so, and does not send the player to the learning rate.
TEST_F(VizLogic, BreakItsNanDoesNotBlameTheLearningRate) {
  TrainingSession session;
  TrainingSettings settings;
  settings.length = 3;
  train(session, settings, 1, 2);
  session.inject_nan_at(3);
  session.run_steps(1);
  const std::string banner = session.snapshot().banner;
  EXPECT_NE(banner.find("injected by \"Break it\""), std::string::npos) << banner;
  EXPECT_EQ(banner.find("learning rate"), std::string::npos) << banner;
}

// Export CSV is off where there is no table; the button says why.
TEST_F(VizLogic, ExportCsvSaysWhyItIsOff) {
  for (int i = 0; i < kSceneCount; ++i) {
    const auto scene = static_cast<SceneId>(i);
    const std::string reason = csv_unavailable_reason(scene);
    const bool exports = scene == SceneId::kArena || scene == SceneId::kTraining;
    EXPECT_EQ(reason.empty(), exports) << scene_key(scene) << ": " << reason;
    if (!exports) EXPECT_EQ(reason.rfind(scene_title(scene), 0), 0u) << reason;
  }
}

// A legend entry whose curve lies under a later one says where it is.
TEST_F(VizLogic, ACurveHiddenUnderAnotherIsFound) {
  const std::vector<float> x = {1, 2, 3, 4};
  const auto hidden = hidden_curves({x, x, x}, {{1, 2, 3, 4}, {5, 5, 5, 5}, {1, 2.02f, 3, 4}},
                                    /*log_y=*/false, 0.01f);
  EXPECT_EQ(hidden, (std::vector<int>{2, -1, -1}));
  const auto apart = hidden_curves({x, x}, {{1, 2, 3, 4}, {1, 2.2f, 3, 4}}, false, 0.01f);
  EXPECT_EQ(apart, (std::vector<int>{-1, -1}));
  const auto other_x = hidden_curves({x, {1, 2, 3, 5}}, {{1, 2, 3, 4}, {1, 2, 3, 4}}, false, 0.01f);
  EXPECT_EQ(other_x, (std::vector<int>{-1, -1}));
}

// A racer circling its minimum for hundreds of steps draws no sub-pixel segments (their thick
// joins stuck out of the 3-D view's markers as black spikes); the current point stays the end.
TEST_F(VizLogic, PathsSkipSubPixelJitter) {
  std::vector<std::array<float, 2>> points;
  for (int i = 0; i <= 10; ++i) points.push_back({10.0f * i, 0.0f});
  for (int i = 0; i < 300; ++i) points.push_back({100.0f + 0.3f * (i % 2), 0.2f * (i % 3)});
  const auto kept = path_vertices(points, 2.0f);
  ASSERT_GE(kept.size(), 2u);
  EXPECT_EQ(kept.front(), 0u);
  EXPECT_EQ(kept.back(), points.size() - 1);
  for (size_t k = 1; k + 1 < kept.size(); ++k) {
    const auto& a = points[kept[k - 1]];
    const auto& b = points[kept[k]];
    EXPECT_GE(std::hypot(a[0] - b[0], a[1] - b[1]), 2.0f) << k;
  }
  EXPECT_LE(kept.size(), 12u);
}

// Ctrl+Q and Ctrl+A are counted as chords when pressed, however quickly Ctrl is let go.
TEST_F(VizLogic, KeyChordsAreCountedWhenPressed) {
  KeyPresses keys;
  keys.press(81 /* Q */, /*control=*/true);
  keys.press(65 /* A */);
  EXPECT_EQ(keys.control_count(81), 1);
  EXPECT_EQ(keys.control_count(65), 0);
  EXPECT_EQ(keys.count(81), 1);
  keys.clear();
  EXPECT_EQ(keys.control_count(81), 0);
  EXPECT_TRUE(keys.chords().empty());
}

// A failure is not drawn as a confirmation.
TEST_F(VizLogic, FailuresAreToldApartFromConfirmations) {
  Toast toast;
  toast.show("Not exported: ...", 1.0, /*failed=*/true);
  EXPECT_TRUE(toast.failure);
  toast.show("Wrote out/a.csv", 2.0);
  EXPECT_FALSE(toast.failure);
}
