// flt-lab: the FLT Lab interactive visualiser.
//
//   flt-lab [--state STRING]                      interactive window (1280x800)
//   flt-lab --headless --scene NAME|all [--state STRING] [--steps N] --out DIR
//                                                 render scenes to DIR/NAME.png without a visible
//                                                 window
//   flt-lab --profile [--frames N]                median frame time per scene (live training
//   running)
//
// NAME is one of attention, kernel, rpe, training, arena. Headless rendering still needs an X
// server: on a machine without a display run it under `xvfb-run -a`.

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "app/app.h"
#include "flt/runtime.h"

namespace {

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

void usage() {
  std::cout << "usage: flt-lab [--state STRING]\n"
               "       flt-lab --headless --scene attention|kernel|rpe|training|arena|all [--state "
               "STRING]\n"
               "               [--steps N] --out DIR\n"
               "       flt-lab --profile [--frames N] [--state STRING]\n";
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--state")
      o.state = value();
    else if (arg == "--headless")
      o.headless = true;
    else if (arg == "--profile")
      o.profile = true;
    else if (arg == "--scene")
      o.scene = value();
    else if (arg == "--steps")
      o.steps = std::stoi(value());
    else if (arg == "--frames")
      o.frames = std::stoi(value());
    else if (arg == "--out")
      o.out = value();
    else if (arg == "--help" || arg == "-h") {
      usage();
      std::exit(0);
    } else {
      throw std::invalid_argument("unknown argument '" + arg + "'");
    }
  }
  if (o.steps < 0)
    throw std::invalid_argument("--steps must be >= 0, got " + std::to_string(o.steps));
  return o;
}

std::vector<flt::viz::SceneId> scenes_for(const std::string& name) {
  std::vector<flt::viz::SceneId> scenes;
  if (name == "all") {
    for (int i = 0; i < flt::viz::kSceneCount; ++i)
      scenes.push_back(static_cast<flt::viz::SceneId>(i));
    return scenes;
  }
  flt::viz::SceneId scene;
  if (!flt::viz::parse_scene(name, &scene)) {
    throw std::invalid_argument("unknown scene '" + name +
                                "' (attention, kernel, rpe, training, arena or all)");
  }
  return {scene};
}

int run_headless(const Options& o, const flt::viz::Scenario& base) {
  std::filesystem::create_directories(o.out);
  flt::viz::App app(kWidth, kHeight, /*hidden=*/true);
  for (const auto scene : scenes_for(o.scene)) {
    auto scenario = base;
    scenario.scene = scene;
    flt::viz::apply_scenario(app.lab(), scenario);
    app.state().export_dir = o.out;
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
      "# %s\n# GL renderer: %s\n# window %dx%d, %d frames per scene after 10 warm-up frames, vsync "
      "off, "
      "live training running at x64 on its worker thread throughout\n",
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
    lab.arena.playing = scene == flt::viz::SceneId::kArena;
    lab.training.session.set_playing(true);  // live training runs during every scene
    const auto busy = measure(o.frames);
    flt::viz::apply_scenario(lab, scenario);  // same scene, training paused: the UI's own cost
    lab.arena.playing = scene == flt::viz::SceneId::kArena;
    const auto idle = measure(o.frames);
    std::printf("%-10s %18.2f %10.2f %10.2f %18.2f\n", flt::viz::scene_key(scene),
                busy[busy.size() / 2], busy[busy.size() * 9 / 10], busy.back(),
                idle[idle.size() / 2]);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  flt::init(/*quiet=*/true);
  Options options;
  flt::viz::Scenario scenario;
  try {
    options = parse(argc, argv);
    if (!options.state.empty()) scenario = flt::viz::decode_state(options.state);
  } catch (const std::exception& e) {
    std::cerr << "flt-lab: " << e.what() << "\n";
    usage();
    return 2;
  }
  try {
    if (options.headless) return run_headless(options, scenario);
    if (options.profile) return run_profile(options, scenario);

    // Interactive: the skeleton of Dear ImGui's example_glfw_opengl3 main.cpp, with the set-up and
    // teardown steps in App's constructor and destructor.
    flt::viz::App app(kWidth, kHeight, /*hidden=*/false);  // 1-2. window, GL context, ImGui
    flt::viz::apply_scenario(app.lab(), scenario);
    app.start_worker();  // training runs on its own thread; the UI only reads snapshots
    while (!app.should_close()) app.frame();  // 3-4. poll, new frame, panels, render, swap
    return 0;                                 // 5. teardown in ~App
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
}
