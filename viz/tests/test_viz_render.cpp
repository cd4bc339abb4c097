// flt-lab rendering under an X server (ctest runs this under xvfb-run): every scene renders
// headless to a PNG that is not blank and whose plot / heatmap regions hold the colours of their
// colormaps; a scripted mouse click on the transport bar's Step button advances the arena.

#include <gtest/gtest.h>
#include <stb_image.h>

#define GLFW_INCLUDE_NONE
#include <GLFW/glfw3.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <set>
#include <string>

#include "app/app.h"
#include "flt/attention/flt.h"
#include "flt/runtime.h"
#include "logic/variants.h"

using namespace flt::viz;

namespace {

struct Image {
  int width = 0, height = 0;
  std::vector<uint8_t> rgba;
  std::array<uint8_t, 3> at(int x, int y) const {
    const size_t i = (static_cast<size_t>(y) * width + x) * 4;
    return {rgba[i], rgba[i + 1], rgba[i + 2]};
  }
};

Image load_png(const std::string& path) {
  Image image;
  int channels = 0;
  unsigned char* data = stbi_load(path.c_str(), &image.width, &image.height, &channels, 4);
  if (data != nullptr) {
    image.rgba.assign(data, data + static_cast<size_t>(image.width) * image.height * 4);
    stbi_image_free(data);
  }
  return image;
}

// Pixels in [x0, x1) x [y0, y1) within L1 distance `tolerance` of `color`.
// Where the counts below come from: each threshold is half the count measured for that element
// (Debian 12, Xvfb 1280x1024x24 with Mesa's llvmpipe, a 1280x800 window; every count
// printed by a temporary line in this function), rounded down to two digits. So an element that
// is missing or drawn at half its size fails, while a change of font hinting or line anti-aliasing
// (a few per cent of an element's pixels) passes. Re-measure and halve again when a scene's layout
// changes on purpose.
int count_near(const Image& image, int x0, int y0, int x1, int y1, Rgba color, int tolerance = 45) {
  int count = 0;
  for (int y = y0; y < y1; ++y) {
    for (int x = x0; x < x1; ++x) {
      const auto p = image.at(x, y);
      if (std::abs(p[0] - color[0]) + std::abs(p[1] - color[1]) + std::abs(p[2] - color[2]) <=
          tolerance)
        ++count;
    }
  }
  return count;
}

int distinct_colors(const Image& image) {
  std::set<uint32_t> colors;
  for (size_t i = 0; i < image.rgba.size(); i += 4) {
    colors.insert(image.rgba[i] << 16 | image.rgba[i + 1] << 8 | image.rgba[i + 2]);
  }
  return static_cast<int>(colors.size());
}

class VizRender : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    flt::init(/*quiet=*/true);
    app_ = std::make_unique<App>(1280, 800, /*hidden=*/true);
    out_ =
        std::filesystem::temp_directory_path() / ("flt-viz-render-" + std::to_string(::getpid()));
    std::filesystem::create_directories(out_);
  }
  static void TearDownTestSuite() {
    app_.reset();
    std::filesystem::remove_all(out_);
  }

  /// The arena shown, the pointer parked in the status bar, one frame drawn: input for key tests.
  InputOverride arena_with_pointer_parked() {
    Scenario scenario;
    scenario.scene = SceneId::kArena;
    apply_scenario(app_->lab(), scenario);
    InputOverride input{ImVec2(5, 790), false, {}};
    app_->frame(&input);
    return input;
  }

  /// The export dialog set to write `path` (its folder and name) as `kind`.
  static void set_export(ExportDialog::Kind kind, const std::filesystem::path& path) {
    auto& dialog = app_->state().export_dialog;
    dialog.kind = kind;
    std::snprintf(dialog.folder, sizeof(dialog.folder), "%s", path.parent_path().c_str());
    std::snprintf(dialog.name, sizeof(dialog.name), "%s", path.filename().c_str());
  }

  /// The export dialog for `kind` open on `path`, its name field focused (three frames of `input`).
  void open_export_dialog(ExportDialog::Kind kind, const std::string& path, InputOverride& input) {
    set_export(kind, path);
    app_->state().export_dialog.open_requested = true;
    for (int i = 0; i < 3; ++i) app_->frame(&input);
  }

  /// The picture of `scenario`'s scene after `steps` race or training steps, saved as NAME.png.
  Image render(const Scenario& scenario, int steps, const std::string& name) {
    apply_scenario(app_->lab(), scenario);
    settle_scene(app_->lab(), scenario.scene, steps);
    const std::string path = (out_ / (name + ".png")).string();
    EXPECT_TRUE(app_->screenshot(path));
    Image image = load_png(path);
    EXPECT_EQ(image.width, 1280);
    EXPECT_EQ(image.height, 800);
    EXPECT_GT(distinct_colors(image), 30) << "blank-looking render of " << name;
    return image;
  }
  Image render(SceneId scene, int steps) {
    Scenario scenario;
    scenario.scene = scene;
    return render(scenario, steps, scene_key(scene));
  }

  static std::unique_ptr<App> app_;
  static std::filesystem::path out_;
};

std::unique_ptr<App> VizRender::app_;
std::filesystem::path VizRender::out_;

const Rgba kViridisLow = colormap(Colormap::kViridis, 0.05f);
const Rgba kViridisHigh = colormap(Colormap::kViridis, 0.95f);

}  // namespace

TEST_F(VizRender, ArenaShowsTheLandscapeInViridisWithTrails) {
  const Image image = render(SceneId::kArena, 30);
  // the map fills the left part of the window below the tab bar
  // log colour scale: the rim is yellow-green, the basin blue-purple (the darkest end is the
  // minimum itself, smaller than one grid cell)
  EXPECT_GT(count_near(image, 10, 100, 680, 760, colormap(Colormap::kViridis, 0.9f)), 120000);
  EXPECT_GT(count_near(image, 10, 100, 680, 760, colormap(Colormap::kViridis, 0.35f)), 970);
  EXPECT_GT(count_near(image, 10, 100, 680, 760, {255, 120, 60, 255}, 60),
            170);  // Adam's orange trail
}

TEST_F(VizRender, TrainingShowsCurvesAndAttentionMaps) {
  const Image image = render(SceneId::kTraining, 20);
  // loss curve (orange) in the top plot row, attention heatmaps (viridis) below
  EXPECT_GT(count_near(image, 320, 90, 1280, 320, {255, 140, 60, 255}, 40), 250);
  EXPECT_GT(count_near(image, 320, 340, 1280, 780, kViridisLow), 110000);
}

TEST_F(VizRender, TrainingWithTheLearnedScheduleShowsItsStepsAndMemory) {
  Scenario scenario;
  scenario.scene = SceneId::kTraining;
  scenario.training.optimizer = TrainingOptimizer::kLearnedSchedule;
  const Image image = render(scenario, 30, "training_schedule");
  // second row: the attention tensors' step sizes (orange) and the memory's f (yellow) and
  // gamma^Delta f (cyan)
  EXPECT_GT(count_near(image, 320, 320, 800, 580, {255, 150, 80, 255}, 40), 110);
  EXPECT_GT(count_near(image, 800, 320, 1280, 580, {255, 210, 90, 255}, 30), 200);
  EXPECT_GT(count_near(image, 800, 320, 1280, 580, {120, 220, 255, 255}, 30), 210);
}

TEST_F(VizRender, AttentionLabShowsHeatmapsAndTheDivergingDifference) {
  Scenario scenario;
  scenario.scene = SceneId::kAttention;
  scenario.attention.input_scale = 1.0;  // a sharp softmax: mostly small weights, a few large
  const Image image = render(scenario, 0, "attention_sharp");
  EXPECT_GT(count_near(image, 370, 100, 1280, 600, kViridisLow), 90000);
  // the diverging map's white middle: near-zero differences
  EXPECT_GT(count_near(image, 900, 100, 1280, 600, colormap(Colormap::kDiverging, 0.5f), 20),
            42000);
}

TEST_F(VizRender, KernelExplorerShowsKernelsEstimatesAndRegression) {
  const Image image = render(SceneId::kKernel, 0);
  // row 1: the orange 1-D kernel curve and Fourier regression estimate, the grey samples
  EXPECT_GT(count_near(image, 310, 90, 650, 420, {255, 170, 60, 255}, 40), 350);
  EXPECT_GT(count_near(image, 920, 90, 1280, 420, {255, 170, 60, 255}, 40), 230);
  EXPECT_GT(count_near(image, 920, 90, 1280, 420, {120, 220, 120, 255}, 40), 300);  // f = sin 2x
  // the 2-D kernel map: mostly the low end of viridis around a bright centre
  EXPECT_GT(count_near(image, 650, 90, 920, 420, kViridisLow), 20000);
  EXPECT_GT(count_near(image, 650, 90, 920, 420, kViridisHigh), 120);
  // row 2: three density maps (truth, Fourier, KDE) with low tails and a mid-range peak region
  EXPECT_GT(count_near(image, 310, 430, 1280, 760, kViridisLow), 71000);
  for (int x0 : {310, 630, 950}) {  // each map holds mid-range colours (the Gaussian's bulk)
    EXPECT_GT(count_near(image, x0, 430, x0 + 320, 760, colormap(Colormap::kViridis, 0.5f)), 1400)
        << "map at x = " << x0;
  }
}

TEST_F(VizRender, RpeStudioShowsSpectrumFunctionErrorAndTheTwoDimensionalShape) {
  Scenario scenario;
  scenario.scene = SceneId::kRpe;
  scenario.rpe.family = static_cast<int>(flt::attention::SpectrumFamily::kLocal);
  const Image image = render(scenario, 0, "rpe");
  EXPECT_GT(count_near(image, 310, 90, 790, 300, {120, 200, 255, 255}, 40), 310);   // g(xi)
  EXPECT_GT(count_near(image, 790, 90, 1280, 300, {120, 220, 120, 255}, 40), 230);  // exact f
  EXPECT_GT(count_near(image, 790, 90, 1280, 300, {255, 170, 60, 255}, 40), 240);   // estimate
  EXPECT_GT(count_near(image, 310, 300, 790, 510, {255, 110, 110, 255}, 40), 230);  // error vs r
  // the 2-D local RPE map: viridis from the zero border to the bright centre
  EXPECT_GT(count_near(image, 790, 300, 1280, 510, kViridisLow), 12000);
  EXPECT_GT(count_near(image, 790, 300, 1280, 510, kViridisHigh), 160);
}

TEST_F(VizRender, RpeStudioSurfaceAndLearnedSpectra) {
  Scenario scenario;
  scenario.scene = SceneId::kRpe;
  scenario.rpe.surface = true;
  scenario.training.variant = variant_index("flt");
  ASSERT_GE(scenario.training.variant, 0);
  apply_scenario(app_->lab(), scenario);
  settle_scene(app_->lab(), SceneId::kRpe, 20);  // trains the live FLT model 20 steps
  const std::string path = (out_ / "rpe_surface.png").string();
  ASSERT_TRUE(app_->screenshot(path));
  const Image image = load_png(path);
  EXPECT_GT(count_near(image, 790, 300, 1280, 510, kViridisLow), 560);  // the surface's floor
  // the learned spectra row: curves in viridis history colours, the latest bright yellow
  EXPECT_GT(count_near(image, 310, 520, 1280, 760, colormap(Colormap::kViridis, 1.0f), 40), 590);
  EXPECT_GE(app_->lab().training.session.snapshot().spectra.size(), 2u);
}

TEST_F(VizRender, ScriptedClickOnStepAdvancesTheArena) {
  Scenario scenario;
  scenario.scene = SceneId::kArena;
  apply_scenario(app_->lab(), scenario);
  app_->frame();
  app_->frame();
  const auto& probe = app_->state().probe;
  const ImVec2 center(0.5f * (probe.step_min.x + probe.step_max.x),
                      0.5f * (probe.step_min.y + probe.step_max.y));
  ASSERT_GT(probe.step_max.x, probe.step_min.x);
  EXPECT_EQ(app_->lab().arena.game.step_count(), 0);
  InputOverride input{center, false};
  app_->frame(&input);  // hover
  input.left_down = true;
  app_->frame(&input);  // press
  input.left_down = false;
  app_->frame(&input);  // release: the click
  EXPECT_EQ(app_->lab().arena.game.step_count(), 1);
  input.mouse = ImVec2(5, 790);  // elsewhere: no more steps
  app_->frame(&input);
  EXPECT_EQ(app_->lab().arena.game.step_count(), 1);
}

TEST_F(VizRender, HoverOnAnAttentionMapReadsTheCell) {
  Scenario scenario;
  scenario.scene = SceneId::kAttention;
  scenario.attention.length = 16;
  apply_scenario(app_->lab(), scenario);
  settle_scene(app_->lab(), SceneId::kAttention, 0);
  app_->frame();
  app_->frame();
  const auto map = app_->state().attention_view.hover;
  ASSERT_GT(map.max.x, map.min.x);
  // the centre of cell (i=5, j=11) of a 16 x 16 map
  const float cell = (map.max.x - map.min.x) / 16.0f;
  InputOverride input{ImVec2(map.min.x + 11.5f * cell, map.min.y + 5.5f * cell), false};
  app_->frame(&input);
  app_->frame(&input);
  const auto hover = app_->state().attention_view.hover;
  ASSERT_TRUE(hover.active);
  EXPECT_EQ(hover.row, 5);
  EXPECT_EQ(hover.col, 11);
  const auto& result = app_->lab().attention.job.result();
  EXPECT_EQ(hover.value, result.approx[5 * 16 + 11]);  // head 0, the variant's matrix
}

TEST_F(VizRender, PanelExportCropsToTheScene) {
  Scenario scenario;
  scenario.scene = SceneId::kArena;
  apply_scenario(app_->lab(), scenario);
  app_->frame();
  const std::string path = (out_ / "panel.png").string();
  app_->state().pending_screenshot = path;
  app_->state().screenshot_panel_only = true;
  app_->frame();
  const Image image = load_png(path);
  const auto& probe = app_->state().probe;
  EXPECT_EQ(image.width, static_cast<int>(probe.scene_max.x) - static_cast<int>(probe.scene_min.x));
  EXPECT_LT(image.height, 800);
  EXPECT_GT(image.height, 500);
  EXPECT_GT(distinct_colors(image), 30);
}

// Save in the export dialog writes the scene, not the dialog: Enter in its path field saves in a
// frame that still draws the dialog over a dimmed scene.
TEST_F(VizRender, ExportedPngHoldsTheSceneWithoutTheDialog) {
  InputOverride input = arena_with_pointer_parked();
  app_->frame(&input);
  const std::string before = (out_ / "before-dialog.png").string();
  ASSERT_TRUE(app_->screenshot(before));
  const std::string path = (out_ / "exported.png").string();
  open_export_dialog(ExportDialog::Kind::kWindowPng, path, input);
  input.keys_down = {GLFW_KEY_ENTER};
  app_->frame(&input);  // Enter: Save
  input.keys_down.clear();
  for (int i = 0; i < 3 && !std::filesystem::exists(path); ++i) app_->frame(&input);
  ASSERT_TRUE(std::filesystem::exists(path)) << "Enter in the dialog did not export";
  const Image a = load_png(before), b = load_png(path);
  ASSERT_EQ(a.rgba.size(), b.rgba.size());
  size_t differing = 0;
  for (size_t i = 0; i < a.rgba.size(); i += 4) {
    differing +=
        a.rgba[i] != b.rgba[i] || a.rgba[i + 1] != b.rgba[i + 1] || a.rgba[i + 2] != b.rgba[i + 2];
  }
  // Captured with the dialog, 73728 pixels (7% of the window) differed; without it, 0 in two
  // runs. 1% leaves room for a status line that changes between the two pictures.
  EXPECT_LT(differing, a.rgba.size() / 4 / 100) << differing << " pixels differ";
}

// The NaN banner covers the bottom of the plots column: the controls stay where the pointer
// expects them, the plots' legends stay visible.
TEST_F(VizRender, TheNanBannerMovesNoControl) {
  Scenario scenario;
  scenario.scene = SceneId::kTraining;
  apply_scenario(app_->lab(), scenario);
  settle_scene(app_->lab(), SceneId::kTraining, 2);
  for (int i = 0; i < 3; ++i) app_->frame();
  const ImVec2 before = app_->state().training_view.break_it_min;
  auto& session = app_->lab().training.session;
  session.inject_nan_at(session.snapshot().step + 1);
  session.run_steps(1);
  ASSERT_FALSE(session.snapshot().banner.empty());
  for (int i = 0; i < 3; ++i) app_->frame();
  const auto& view = app_->state().training_view;
  const ImVec2 after = view.break_it_min;
  EXPECT_GT(before.y, 0.0f);
  EXPECT_EQ(after.x, before.x);
  EXPECT_EQ(after.y, before.y);
  // and it hides neither the plots' legends nor their data: it sits below them
  EXPECT_GT(view.plots_max_y, 0.0f);
  EXPECT_GE(view.banner_min.y, view.plots_max_y);
}

// Enter pressed and released between two frames (a quick tap, which Dear ImGui 1.86 never saw as
// down) still confirms the export dialog's path field.
TEST_F(VizRender, AQuickEnterInATextFieldIsNotLost) {
  InputOverride input = arena_with_pointer_parked();
  const std::string path = (out_ / "quick-enter.csv").string();
  open_export_dialog(ExportDialog::Kind::kCsv, path, input);
  input.key_taps = {GLFW_KEY_ENTER};  // down and up before the next frame
  app_->frame(&input);
  input.key_taps.clear();
  app_->frame(&input);
  EXPECT_TRUE(std::filesystem::exists(path));
}

// Ctrl+Q asks the window to close; Q alone does not.
TEST_F(VizRender, ControlQQuits) {
  InputOverride input = arena_with_pointer_parked();
  input.keys_down = {GLFW_KEY_Q};
  app_->frame(&input);
  EXPECT_FALSE(app_->should_close());
  input.keys_down.clear();
  app_->frame(&input);
  input.keys_down = {GLFW_KEY_LEFT_CONTROL, GLFW_KEY_Q};
  app_->frame(&input);
  EXPECT_TRUE(app_->should_close());
  glfwSetWindowShouldClose(glfwGetCurrentContext(), GLFW_FALSE);  // the suite's window stays
  input.keys_down.clear();
  app_->frame(&input);
  ASSERT_FALSE(app_->should_close());
}

TEST_F(VizRender, KeyboardTransportStepsAndPlays) {
  InputOverride input = arena_with_pointer_parked();
  input.keys_down = {GLFW_KEY_S};  // S: one step
  app_->frame(&input);
  input.keys_down = {};
  app_->frame(&input);
  EXPECT_EQ(app_->lab().arena.game.step_count(), 1);
  input.keys_down = {GLFW_KEY_SPACE};  // Space: play
  app_->frame(&input);
  input.keys_down = {};
  EXPECT_TRUE(app_->lab().arena.playing);
  for (int i = 0; i < 30; ++i) app_->frame(&input);  // 0.5 s at 10 steps/s
  EXPECT_GE(app_->lab().arena.game.step_count(), 5);
  input.keys_down = {GLFW_KEY_R};  // R: reset
  app_->frame(&input);
  EXPECT_EQ(app_->lab().arena.game.step_count(), 0);
  EXPECT_FALSE(app_->lab().arena.playing);
}

// A press of Space released before the next frame starts still plays (Dear ImGui 1.86
// sees only keys that are down when a frame starts; the key callback counts the press).
TEST_F(VizRender, AQuickSpacePressIsNotLost) {
  InputOverride input = arena_with_pointer_parked();
  input.key_taps = {GLFW_KEY_SPACE};  // down and up between frames: never down at a frame start
  app_->frame(&input);
  input.key_taps.clear();
  EXPECT_TRUE(app_->lab().arena.playing);
  app_->frame(&input);
  EXPECT_TRUE(app_->lab().arena.playing) << "counted once, not again on the next frame";
  input.key_taps = {GLFW_KEY_SPACE};
  app_->frame(&input);
  EXPECT_FALSE(app_->lab().arena.playing);
}

// The 3-D view draws the racers' paths and points on the surface, and the surface is not cut off.
TEST_F(VizRender, ArenaThreeDimensionalViewShowsTheRace) {
  Scenario scenario;
  scenario.scene = SceneId::kArena;
  scenario.arena.level = 2;  // Rosenbrock
  scenario.arena.surface = true;
  const Image image = render(scenario, 60, "arena_3d");
  // Adam's orange and SGD-momentum's blue paths (neither colour is in viridis)
  EXPECT_GT(count_near(image, 10, 90, 750, 760, {255, 120, 60, 255}, 40), 11);
  EXPECT_GT(count_near(image, 10, 90, 750, 760, {80, 200, 255, 255}, 40), 270);
  // the surface's top rows are inside the panel: the background shows above them
  EXPECT_GT(count_near(image, 10, 90, 750, 100, {20, 20, 26, 255}, 6), 3600);
}

TEST_F(VizRender, PopupsAreOpaque) {
  EXPECT_EQ(ImGui::GetStyle().Colors[ImGuiCol_PopupBg].w, 1.0f);
}

// Export writes to the chosen path (its folders created) and says where, visibly.
TEST_F(VizRender, ExportWritesTheChosenFileAndConfirmsWhere) {
  Scenario scenario;
  scenario.scene = SceneId::kArena;
  apply_scenario(app_->lab(), scenario);
  app_->frame();
  auto& s = app_->state();
  const std::string target = (out_ / "new" / "folder" / "race.csv").string();
  set_export(ExportDialog::Kind::kCsv, target);  // the folder the user named is created
  EXPECT_TRUE(run_export(s)) << s.export_dialog.error;
  EXPECT_TRUE(std::filesystem::exists(target));
  EXPECT_NE(s.toast.text.find(target), std::string::npos) << s.toast.text;
  EXPECT_TRUE(app_->animating()) << "the confirmation is on screen, fading";
  const std::string png = (out_ / "other" / "window.png").string();
  set_export(ExportDialog::Kind::kWindowPng, png);
  run_export(s);
  app_->frame();  // the frame of the Save click, which still draws the dialog: not the picture
  EXPECT_FALSE(std::filesystem::exists(png));
  app_->frame();  // written after the next render
  EXPECT_EQ(load_png(png).width, 1280);
  EXPECT_EQ(s.toast.text, "Wrote " + png);
  EXPECT_FALSE(s.toast.failure);
  EXPECT_EQ(s.export_dir, (out_ / "other").string()) << "the next export offers this folder";
  s.export_dir = "out";
}

TEST_F(VizRender, ExportsGoToOutByDefault) {
  EXPECT_EQ(std::make_unique<AppState>()->export_dir, "out")
      << "by default exports go to out/ of the working directory";
}

// The par line keeps its height when dragging the start switches it between "par N" (one line)
// and the no-par sentence (two): the controls under it stay where the pointer expects them.
TEST_F(VizRender, TheParLineMovesNoControl) {
  InputOverride input = arena_with_pointer_parked();
  Scenario scenario;
  scenario.scene = SceneId::kArena;
  scenario.arena.level = 2;  // the banana: no par from the level's start
  apply_scenario(app_->lab(), scenario);
  for (int i = 0; i < 3; ++i) app_->frame(&input);
  ASSERT_FALSE(app_->lab().arena.game.par_reached());
  const ImVec2 before = app_->state().arena_view.race_checkbox_min;
  app_->lab().scenario.arena.custom_start = true;  // as a drag does: near the valley's end
  app_->lab().scenario.arena.start_x = 0.9;
  app_->lab().scenario.arena.start_y = 0.81;
  rebuild_scene(app_->lab(), SceneId::kArena);
  for (int i = 0; i < 3; ++i) app_->frame(&input);
  ASSERT_TRUE(app_->lab().arena.game.par_reached());
  const ImVec2 after = app_->state().arena_view.race_checkbox_min;
  EXPECT_GT(before.y, 0.0f);
  EXPECT_EQ(after.y, before.y);
}

// The frame that ends a race drew it as it was when the frame began ("Pause", a status column cut
// short): the window draws a few more frames before it sleeps.
TEST_F(VizRender, AFinishedRaceIsDrawnAsItEnds) {
  InputOverride input = arena_with_pointer_parked();
  auto& lab = app_->lab();
  set_speed(lab, 64.0f);
  set_scene_playing(lab, SceneId::kArena, true);
  for (int i = 0; i < 600 && lab.arena.playing; ++i) app_->frame(&input);
  ASSERT_FALSE(lab.arena.playing);
  ASSERT_TRUE(lab.arena.game.finished());
  app_->state().toast.shown_at = -1e9;  // no confirmation of an earlier test keeps it awake
  EXPECT_TRUE(app_->animating()) << "the window would sleep on a stale frame";
  for (int i = 0; i < 3; ++i) app_->frame(&input);
  EXPECT_FALSE(app_->animating()) << "and then sleeps";
  set_speed(lab, 1.0f);
}

// The export dialog's name opens selected wherever the last dialog left its cursor: typing
// replaces it.
TEST_F(VizRender, TheExportNameOpensSelected) {
  InputOverride input = arena_with_pointer_parked();
  open_export_dialog(ExportDialog::Kind::kCsv, (out_ / "first.csv").string(), input);
  for (int i = 0; i < 4; ++i) {  // the cursor left mid-name, before ".csv"
    input.keys_down = {GLFW_KEY_LEFT};
    app_->frame(&input);
    input.keys_down.clear();
    app_->frame(&input);
  }
  input.key_taps = {GLFW_KEY_ESCAPE};  // cancel
  app_->frame(&input);
  input.key_taps.clear();
  app_->frame(&input);
  open_export_dialog(ExportDialog::Kind::kCsv, (out_ / "second.csv").string(), input);
  ImGui::GetIO().AddInputCharacter('Z');
  app_->frame(&input);
  EXPECT_STREQ(app_->state().export_dialog.name, "Z");
  input.key_taps = {GLFW_KEY_ESCAPE};
  app_->frame(&input);
  input.key_taps.clear();
  app_->frame(&input);
}

// A name holding folders is refused in a red box; the dialog stays open, saying why.
TEST_F(VizRender, ANameWithFoldersIsRefusedInRed) {
  InputOverride input = arena_with_pointer_parked();
  const auto nested = out_ / "chosen" / "tmp" / "x" / "arena.csv25.csv";
  open_export_dialog(ExportDialog::Kind::kCsv, (out_ / "chosen" / "a.csv").string(), input);
  for (char c : std::string("tmp/x/arena.csv25.csv")) ImGui::GetIO().AddInputCharacter(c);
  app_->frame(&input);  // typed over the selected name
  ASSERT_STREQ(app_->state().export_dialog.name, "tmp/x/arena.csv25.csv");
  input.key_taps = {GLFW_KEY_ENTER};  // Save
  app_->frame(&input);
  input.key_taps.clear();
  for (int i = 0; i < 2; ++i) app_->frame(&input);
  const auto& s = app_->state();
  EXPECT_FALSE(std::filesystem::exists(nested));
  EXPECT_FALSE(std::filesystem::exists(out_ / "chosen")) << "no folder was created";
  EXPECT_NE(s.export_dialog.error.find("folder separator"), std::string::npos)
      << s.export_dialog.error;
  EXPECT_TRUE(s.toast.failure);
  const std::string path = (out_ / "refused.png").string();
  ASSERT_TRUE(app_->screenshot(path));
  const Image image = load_png(path);
  // the failure box at the bottom right, white on red (23612 pixels measured, halved as above); a
  // confirmation's box is the window's dark grey with green text
  EXPECT_GT(count_near(image, 640, 560, 1280, 800, {200, 40, 40, 255}, 30), 11000);
  input.key_taps = {GLFW_KEY_ESCAPE};
  app_->frame(&input);
  input.key_taps.clear();
  app_->frame(&input);
  app_->state().toast.shown_at = -1e9;
}

// Ctrl+Q and Ctrl+A pressed and let go between two frames (Ctrl too) are not lost: Ctrl+Q quits,
// Ctrl+A selects a field's text.
TEST_F(VizRender, QuickControlChordsAreNotLost) {
  InputOverride input = arena_with_pointer_parked();
  input.key_taps = {GLFW_KEY_Q};
  input.taps_with_control = true;
  app_->frame(&input);
  EXPECT_TRUE(app_->should_close());
  glfwSetWindowShouldClose(glfwGetCurrentContext(), GLFW_FALSE);  // the suite's window stays
  input.key_taps.clear();
  input.taps_with_control = false;
  app_->frame(&input);
  open_export_dialog(ExportDialog::Kind::kCsv, (out_ / "abc.csv").string(), input);
  input.keys_down = {GLFW_KEY_END};  // the cursor to the end: nothing selected
  app_->frame(&input);
  input.keys_down.clear();
  app_->frame(&input);
  input.key_taps = {GLFW_KEY_A};
  input.taps_with_control = true;
  app_->frame(&input);
  input.key_taps.clear();
  input.taps_with_control = false;
  ImGui::GetIO().AddInputCharacter('x');
  app_->frame(&input);
  EXPECT_STREQ(app_->state().export_dialog.name, "x") << "Ctrl+A selected the whole name";
  input.key_taps = {GLFW_KEY_ESCAPE};
  app_->frame(&input);
  input.key_taps.clear();
  app_->frame(&input);
}
