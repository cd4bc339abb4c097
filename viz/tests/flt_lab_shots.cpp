// flt-lab-shots: scripted screenshots of interactive states (an open combo box, a hovered name, a
// pressed button, live training seen from another tab) that `flt-lab --headless` cannot reach.
// Built with the tests; used for the before/after pictures of docs and issues.
//
//   flt-lab-shots SCRIPT OUT_DIR
//
// SCRIPT holds one command a line ('#' starts a comment):
//   state STRING        apply a state string (every scene rebuilt, paused)
//   settings SCENE STR  take SCENE's settings from the state string STR and rebuild that scene
//                       only (e.g. switch Live Training's optimizer without a reset)
//   settle N            bring the visible scene to a rendered state (N race or training steps)
//   worker              start the training worker (as the interactive app does)
//   play | pause        the visible scene's transport
//   tab SCENE           show SCENE's tab (scene key: arena, training, ...)
//   move X Y            put the mouse at (X, Y)
//   click X Y           move there, press and release the left button (two frames)
//   key NAME            press and release a key (SPACE, S, R, RIGHT, ENTER), a frame each
//   tap NAME            press and release a key between two frames (needs the key callback)
//   frames N            render N frames with the current input
//   sleep MS            wait (the training worker runs meanwhile)
//   save NAME           render a frame and write OUT_DIR/NAME.png
// Without a display it starts its own Xvfb.

#define GLFW_INCLUDE_NONE
#include <GLFW/glfw3.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>

#include "app/app.h"
#include "app/display.h"
#include "flt/runtime.h"

using namespace flt::viz;

namespace {

int key_code(const std::string& name) {
  if (name == "SPACE") return GLFW_KEY_SPACE;
  if (name == "S") return GLFW_KEY_S;
  if (name == "R") return GLFW_KEY_R;
  if (name == "RIGHT") return GLFW_KEY_RIGHT;
  if (name == "ENTER") return GLFW_KEY_ENTER;
  throw std::invalid_argument("unknown key " + name);
}

SceneId scene_of(const std::string& key) {
  SceneId scene;
  if (!parse_scene(key, &scene)) throw std::invalid_argument("unknown scene " + key);
  return scene;
}

void take_settings(Scenario& into, const Scenario& from, SceneId scene) {
  switch (scene) {
    case SceneId::kArena: into.arena = from.arena; break;
    case SceneId::kTraining: into.training = from.training; break;
    case SceneId::kAttention: into.attention = from.attention; break;
    case SceneId::kKernel: into.kernel = from.kernel; break;
    case SceneId::kRpe: into.rpe = from.rpe; break;
    case SceneId::kLessons: into.lessons = from.lessons; break;
  }
}

int run(const std::string& script_path, const std::string& out) {
  std::ifstream script(script_path);
  if (!script) throw std::runtime_error("cannot read " + script_path);
  std::filesystem::create_directories(out);
  App app(1280, 800, /*hidden=*/true);
  InputOverride input{ImVec2(1275, 795), false, {}};
  const auto frame = [&] { app.frame(&input); };
  std::string line;
  while (std::getline(script, line)) {
    std::istringstream words(line);
    std::string command;
    if (!(words >> command) || command[0] == '#') continue;
    LabState& lab = app.lab();
    if (command == "state") {
      std::string text;
      words >> text;
      apply_scenario(lab, decode_state(text));
    } else if (command == "settings") {
      std::string scene, text;
      words >> scene >> text;
      take_settings(lab.scenario, decode_state(text), scene_of(scene));
      rebuild_scene(lab, scene_of(scene));
    } else if (command == "settle") {
      int steps = 0;
      words >> steps;
      settle_scene(lab, lab.scenario.scene, steps);
    } else if (command == "worker") {
      app.start_worker();
    } else if (command == "play" || command == "pause") {
      set_scene_playing(lab, lab.scenario.scene, command == "play");
    } else if (command == "tab") {
      std::string scene;
      words >> scene;
      lab.scenario.scene = scene_of(scene);
      lab.scene_changed = true;
      frame();
    } else if (command == "move" || command == "click") {
      words >> input.mouse.x >> input.mouse.y;
      frame();
      if (command == "click") {
        input.left_down = true;
        frame();
        input.left_down = false;
        frame();
      }
    } else if (command == "key") {
      std::string name;
      words >> name;
      input.keys_down = {key_code(name)};
      frame();
      input.keys_down.clear();
      frame();
    } else if (command == "tap") {
      std::string name;
      words >> name;
      app.state().keys.press(key_code(name));
      frame();
    } else if (command == "frames") {
      int n = 0;
      words >> n;
      for (int i = 0; i < n; ++i) frame();
    } else if (command == "sleep") {
      int ms = 0;
      words >> ms;
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    } else if (command == "save") {
      std::string name;
      words >> name;
      app.frame(&input, /*swap=*/false);
      int w = 0, h = 0;
      const auto pixels = app.read_pixels(&w, &h);
      const std::string path = out + "/" + name + ".png";
      if (!write_png(path, pixels, w, h)) throw std::runtime_error("could not write " + path);
      std::cout << path << std::endl;
      frame();
    } else {
      throw std::invalid_argument("unknown command: " + line);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: flt-lab-shots SCRIPT OUT_DIR\n";
    return 2;
  }
  try {
    flt::init(/*quiet=*/true);
    std::optional<VirtualDisplay> display;
    if (!display_available()) display.emplace(1280, 800);
    return run(argv[1], argv[2]);
  } catch (const std::exception& e) {
    std::cerr << "flt-lab-shots: " << e.what() << "\n";
    return 1;
  }
}
