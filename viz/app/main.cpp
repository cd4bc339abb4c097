// flt-lab: the FLT Lab interactive visualiser.
//
//   flt-lab [--state STRING]                      interactive window (1280x800)
//   flt-lab --headless [--scene NAME|all] [--state STRING] [--steps N] [--out DIR]
//                                                 render scenes to DIR/NAME.png, no visible window
//   flt-lab --profile [--scene NAME|all] [--frames N]
//                                                 median frame time per scene, training running
//
// NAME is one of attention, kernel, rpe, training, arena. Without a display (DISPLAY and
// WAYLAND_DISPLAY unset) --headless and --profile start their own Xvfb. `flt-lab --help` lists
// the options. The interactive window keeps the arena player's stars in
// $XDG_STATE_HOME/flt-lab/progress (~/.local/state/flt-lab/progress); --headless and --profile
// neither read nor write them.

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "app/app.h"
#include "app/display.h"
#include "flt/runtime.h"
#include "logic/progress_file.h"

namespace {

using flt::viz::SceneId;

constexpr int kWidth = 1280;
constexpr int kHeight = 800;

struct Options {
  std::string state;
  bool headless = false;
  bool profile = false;
  std::string scene = "all";
  int steps = 60;
  int frames = 120;
  std::string out = ".";
};

// The --scene names: every scene's key, then "all".
std::vector<std::string> scene_names() {
  std::vector<std::string> names;
  for (int i = 0; i < flt::viz::kSceneCount; ++i)
    names.emplace_back(flt::viz::scene_key(static_cast<SceneId>(i)));
  names.emplace_back("all");
  return names;
}

// The command line, described once: CLI11 derives --help, the checks and the error messages
// (which name the option and the value) from it.
void describe(CLI::App& cli, Options& o) {
  cli.add_option("--state", o.state, "start from a state string (the app's Copy state)")
      ->check([](const std::string& text) {
        try {
          flt::viz::decode_state(text);
          return std::string();
        } catch (const std::invalid_argument& e) {
          return std::string(e.what());
        }
      });
  auto* headless = cli.add_flag(
      "--headless", o.headless,
      "render scenes to PNG files without a visible window (starts Xvfb without a display)");
  auto* profile = cli.add_flag("--profile", o.profile,
                               "print the median frame time per scene with live training running");
  headless->excludes(profile);
  cli.add_option("--scene", o.scene, "the scene to render or profile")
      ->check(CLI::IsMember(scene_names()))
      ->capture_default_str();
  // the type check first: "12abc" is a malformed number, not one out of range
  constexpr int kMaxInt = std::numeric_limits<int>::max();
  cli.add_option("--steps", o.steps, "--headless: race or training steps before the picture")
      ->check(CLI::TypeValidator<int>(""))
      ->check(CLI::Range(0, kMaxInt).description("NONNEGATIVE"))
      ->capture_default_str();
  cli.add_option("--frames", o.frames, "--profile: frames measured per scene")
      ->check(CLI::TypeValidator<int>(""))
      ->check(CLI::Range(1, kMaxInt).description("POSITIVE"))
      ->capture_default_str();
  cli.add_option("--out", o.out, "--headless: folder for the PNG files (created)")
      ->capture_default_str();
}

std::vector<SceneId> scenes_for(const std::string& name) {
  std::vector<SceneId> scenes;
  for (int i = 0; i < flt::viz::kSceneCount; ++i) {
    const auto scene = static_cast<SceneId>(i);
    if (name == "all" || name == flt::viz::scene_key(scene)) scenes.push_back(scene);
  }
  return scenes;
}

int run_headless(const Options& o, const flt::viz::Scenario& base) {
  std::filesystem::create_directories(o.out);
  flt::viz::App app(kWidth, kHeight, /*hidden=*/true);
  app.state().export_dir = o.out;
  for (const auto scene : scenes_for(o.scene)) {
    auto scenario = base;
    scenario.scene = scene;
    flt::viz::apply_scenario(app.lab(), scenario);
    flt::viz::settle_scene(app.lab(), scene, o.steps);
    const std::string path = o.out + "/" + flt::viz::scene_key(scene) + ".png";
    if (!app.screenshot(path)) {
      std::cerr << "flt-lab: could not write " << path << "\n";
      return 1;
    }
    std::cout << path << std::endl;
  }
  return 0;
}

int run_profile(const Options& o, const flt::viz::Scenario& base) {
  flt::viz::App app(kWidth, kHeight, /*hidden=*/false);
  flt::viz::LabState& lab = app.lab();
  app.start_worker();
  app.set_vsync(false);
  std::printf(
      "# %s\n# GL renderer: %s\n# window %dx%d, %d frames per scene after 10 warm-up frames, "
      "vsync off, live training running at x64 on its worker thread throughout\n",
      app.state().runtime_line.c_str(), app.renderer().c_str(), kWidth, kHeight, o.frames);
  std::printf("%-10s %18s %10s %10s %18s\n", "scene", "median_ms(train)", "p90_ms", "max_ms",
              "median_ms(idle)");
  const auto measure = [&](int frames) {
    std::vector<double> times;
    for (int i = 0; i < frames + 10; ++i) {
      const double ms = app.frame();
      if (i >= 10) times.push_back(ms);
    }
    std::sort(times.begin(), times.end());
    return times;
  };
  for (const auto scene : scenes_for(o.scene)) {
    auto scenario = base;
    scenario.scene = scene;
    scenario.speed = 64.0f;  // training and the arena run flat out while we measure
    flt::viz::apply_scenario(lab, scenario);
    // the Attention Lab is measured showing its (finished) computation: playing it at x64 would
    // recompute every frame, which measures the attention, not the UI
    lab.arena.playing = scene == SceneId::kArena;
    lab.training.session.set_playing(true);  // live training runs during every scene
    const auto busy = measure(o.frames);
    flt::viz::apply_scenario(lab, scenario);  // same scene, training paused: the UI's own cost
    lab.arena.playing = scene == SceneId::kArena;
    const auto idle = measure(o.frames);
    std::printf("%-10s %18.2f %10.2f %10.2f %18.2f\n", flt::viz::scene_key(scene),
                busy[busy.size() / 2], busy[busy.size() * 9 / 10], busy.back(),
                idle[idle.size() / 2]);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  CLI::App cli{
      "flt-lab: the FLT Lab visualiser (attention, kernels, RPE, live training, the "
      "optimizer arena)",
      "flt-lab"};
  describe(cli, options);
  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return cli.exit(e);  // --help prints the usage; errors name the option and the value
  }
  flt::init(/*quiet=*/true);
  const flt::viz::Scenario scenario =
      options.state.empty() ? flt::viz::Scenario{} : flt::viz::decode_state(options.state);
  try {
    // Headless means headless: without a display, bring our own (stopped when main returns or
    // throws, and with the process however it ends).
    std::optional<flt::viz::VirtualDisplay> virtual_display;
    if ((options.headless || options.profile) && !flt::viz::display_available())
      virtual_display.emplace(kWidth, kHeight);
    if (options.headless) return run_headless(options, scenario);
    if (options.profile) return run_profile(options, scenario);

    // Interactive: the skeleton of Dear ImGui's example_glfw_opengl3 main.cpp, with the set-up and
    // teardown steps in App's constructor and destructor.
    flt::viz::App app(kWidth, kHeight, /*hidden=*/false);  // 1-2. window, GL context, ImGui
    // the player's stars (headless renders and --profile start fresh and leave them alone)
    flt::viz::use_progress_file(app.lab(), flt::viz::default_progress_path());
    flt::viz::apply_scenario(app.lab(), scenario);
    const std::string locked = flt::viz::locked_level_note(app.lab());
    if (!locked.empty()) flt::viz::confirm(app.state(), locked);
    app.start_worker();  // training runs on its own thread; the UI only reads snapshots
    app.run();           // 3-4. poll (or wait when idle), new frame, panels, render, swap
    return 0;            // 5. teardown in ~App
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
}
