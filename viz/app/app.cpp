// flt-lab's shell, after Dear ImGui's example_glfw_opengl3: window and contexts (App's
// constructor), the frame (poll, new frame, main window, render, swap), teardown (destructor). The
// main window holds the title, the transport bar, one tab per scene and the status line.

#include "app/app.h"

#define GLFW_INCLUDE_NONE
#include <GL/gl.h>
#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui_internal.h>  // ClosePopupToLevel, BringWindowToDisplayFront
#include <stb_image_write.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <thread>

#include "app/display.h"
#include "app/widgets.h"
#include "flt/runtime.h"

namespace flt::viz {
namespace {

// Headless and scripted frames advance by a fixed 1/60 s so renders are reproducible.
constexpr double kFixedFrameSeconds = 1.0 / 60.0;
// Interactive: at most 60 frames a second while something moves (vsync does not throttle every
// display, e.g. Xvfb); after input, a few frames so hover and popups settle.
constexpr double kMinFrameSeconds = 1.0 / 60.0;
constexpr int kSettleFrames = 3;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void glfw_error(int code, const char* description) {
  std::fprintf(stderr, "GLFW error %d: %s\n", code, description);
}

void show_scene(AppState& s, SceneId scene) {
  switch (scene) {
    case SceneId::kArena: show_arena(s.lab, s.arena_view); break;
    case SceneId::kTraining: show_training(s.lab, s.training_view); break;
    case SceneId::kAttention: show_attention(s.lab, s.attention_view); break;
    case SceneId::kKernel: show_kernel(s.lab, s.kernel_view); break;
    case SceneId::kRpe: show_rpe(s.lab, s.rpe_view); break;
    case SceneId::kLessons: show_lessons(s.lab, s.lessons_view); break;
  }
}

// The title line: the app, the seed, and what keeps running on other tabs (training goes on while
// another tab's bar says Play), with a button that pauses it from here.
void show_title_line(AppState& s) {
  LabState& lab = s.lab;
  ImGui::TextColored(kHeadingColor, "FLT Lab");
  ImGui::SameLine();
  ImGui::TextDisabled("| seed %llu", static_cast<unsigned long long>(lab.scenario.seed));
  const auto running = background_activity(lab, lab.scenario.scene);
  for (const auto& line : running) {
    ImGui::SameLine();
    ImGui::TextColored(kRunningColor, "| %s", line.c_str());
    if (line.rfind("Live Training", 0) == 0) {
      ImGui::SameLine();
      if (ImGui::SmallButton("Pause training")) set_scene_playing(lab, SceneId::kTraining, false);
      ImGui::SameLine();
      if (ImGui::SmallButton("Show")) {
        lab.scenario.scene = SceneId::kTraining;
        lab.scene_changed = true;
      }
    }
  }
}

// The status line: the last message, and the technical readouts behind "details".
void show_status_line(AppState& s) {
  ImGui::Separator();
  ImGui::SetNextItemOpen(s.details_open);
  s.details_open = ImGui::TreeNodeEx("details", ImGuiTreeNodeFlags_NoTreePushOnOpen);
  ImGui::SameLine();
  // one line: a long message ends in "..." with the whole of it in a tooltip
  fitted_text("| " + s.lab.message, ImGui::GetContentRegionAvail().x, /*disabled=*/true);
  if (s.details_open) {
    ImGui::TextDisabled("%s", s.runtime_line.c_str());
    // Idle, the window draws only on input or change: a frame rate averaged over those frames
    // reads as a slow machine.
    char rate[48] = "idle: redraws on input or change";
    if (lab_animating(s.lab))
      std::snprintf(rate, sizeof(rate), "%.1f FPS", ImGui::GetIO().Framerate);
    ImGui::TextDisabled("%s | Dear ImGui %s | GL %s", rate, IMGUI_VERSION, s.gl_renderer.c_str());
  }
}

// The confirmation of copy and export: a box at the bottom right that fades out.
void show_toast(AppState& s) {
  const double now = now_seconds();
  if (!s.toast.visible(now)) return;
  const ImGuiViewport* viewport = ImGui::GetMainViewport();
  ImGui::SetNextWindowPos(ImVec2(viewport->WorkPos.x + viewport->WorkSize.x - 12,
                                 viewport->WorkPos.y + viewport->WorkSize.y - 40),
                          ImGuiCond_Always, ImVec2(1.0f, 1.0f));
  ImGui::SetNextWindowBgAlpha(0.95f * s.toast.alpha(now));
  ImGui::PushStyleVar(ImGuiStyleVar_Alpha, std::max(0.05f, s.toast.alpha(now)));
  ImGui::PushStyleColor(ImGuiCol_WindowBg, s.toast.failure
                                               ? ImGui::ColorConvertU32ToFloat4(kBannerRed)
                                               : ImGui::GetStyleColorVec4(ImGuiCol_WindowBg));
  ImGui::Begin("##toast", nullptr,
               ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_AlwaysAutoResize |
                   ImGuiWindowFlags_NoSavedSettings | ImGuiWindowFlags_NoFocusOnAppearing |
                   ImGuiWindowFlags_NoNav | ImGuiWindowFlags_NoInputs);
  // above an open dialog too (a refused export keeps its dialog open): not dimmed behind it
  ImGui::BringWindowToDisplayFront(ImGui::GetCurrentWindow());
  ImGui::PushTextWrapPos(ImGui::GetFontSize() * 50.0f);
  if (s.toast.failure) {  // what was asked did not happen: white on red, as the NaN banner
    ImGui::TextColored(ImVec4(1, 1, 1, 1), "%s", s.toast.text.c_str());
  } else {
    ImGui::TextColored(kRunningColor, "%s", s.toast.text.c_str());
  }
  ImGui::PopTextWrapPos();
  ImGui::End();
  ImGui::PopStyleColor();
  ImGui::PopStyleVar();
}

void show_main_window(AppState& s, double dt) {
  const ImGuiViewport* viewport = ImGui::GetMainViewport();
  ImGui::SetNextWindowPos(viewport->WorkPos);
  ImGui::SetNextWindowSize(viewport->WorkSize);
  ImGui::Begin("FLT Lab", nullptr,
               ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove |
                   ImGuiWindowFlags_NoSavedSettings | ImGuiWindowFlags_NoBringToFrontOnFocus);
  show_title_line(s);
  show_transport(s);
  const float status_height = ImGui::GetFrameHeightWithSpacing() +
                              (s.details_open ? 2 * ImGui::GetTextLineHeightWithSpacing() : 0.0f);
  LabState& lab = s.lab;
  const bool training = lab.training.session.status().playing;
  if (ImGui::BeginTabBar("scenes")) {
    for (int i = 0; i < kSceneCount; ++i) {
      const auto scene = static_cast<SceneId>(i);
      const ImGuiTabItemFlags flags =
          lab.scene_changed && scene == lab.scenario.scene ? ImGuiTabItemFlags_SetSelected : 0;
      // the Live Training tab says so while it trains (on every tab); the ### id stays the same
      const std::string label = std::string(scene_title(scene)) +
                                (scene == SceneId::kTraining && training ? " (training)" : "") +
                                "###" + scene_key(scene);
      if (ImGui::BeginTabItem(label.c_str(), nullptr, flags)) {
        if (!lab.scene_changed) lab.scenario.scene = scene;
        ImGui::BeginChild("scene", ImVec2(0, -status_height), false);
        s.probe.scene_min = ImGui::GetWindowPos();
        s.probe.scene_max = ImVec2(s.probe.scene_min.x + ImGui::GetWindowSize().x,
                                   s.probe.scene_min.y + ImGui::GetWindowSize().y);
        update_scene(lab, scene, dt);  // only the visible scene plays
        show_scene(s, scene);
        ImGui::EndChild();
        ImGui::EndTabItem();
      }
    }
    ImGui::EndTabBar();
  }
  lab.scene_changed = false;
  show_status_line(s);
  ImGui::End();
  show_toast(s);
}

}  // namespace

std::vector<uint8_t> crop(const std::vector<uint8_t>& rgba, int width, ImVec2 min, ImVec2 max,
                          int* out_width, int* out_height) {
  const int height = static_cast<int>(rgba.size() / 4 / static_cast<size_t>(width));
  const int x0 = std::clamp(static_cast<int>(min.x), 0, width - 1),
            y0 = std::clamp(static_cast<int>(min.y), 0, height - 1);
  const int x1 = std::clamp(static_cast<int>(max.x), x0 + 1, width),
            y1 = std::clamp(static_cast<int>(max.y), y0 + 1, height);
  *out_width = x1 - x0;
  *out_height = y1 - y0;
  std::vector<uint8_t> out(static_cast<size_t>(*out_width) * *out_height * 4);
  for (int y = y0; y < y1; ++y) {
    std::copy_n(rgba.begin() + (static_cast<std::ptrdiff_t>(y) * width + x0) * 4, *out_width * 4,
                out.begin() + static_cast<std::ptrdiff_t>(y - y0) * *out_width * 4);
  }
  return out;
}

bool write_png(const std::string& path, const std::vector<uint8_t>& rgba, int width, int height) {
  return stbi_write_png(path.c_str(), width, height, 4, rgba.data(), width * 4) != 0;
}

void confirm(AppState& s, const std::string& message) {
  s.lab.message = message;
  s.toast.show(message, now_seconds());
}

void report_failure(AppState& s, const std::string& message) {
  s.lab.message = message;
  s.toast.show(message, now_seconds(), /*failed=*/true);
}

void App::on_event(GLFWwindow* window) {
  if (auto* app = static_cast<App*>(glfwGetWindowUserPointer(window))) app->events_ += 1;
}

void App::on_key(GLFWwindow* window, int key, int scancode, int action, int mods) {
  auto* app = static_cast<App*>(glfwGetWindowUserPointer(window));
  if (app == nullptr) return;
  app->events_ += 1;
  // kept even if released this frame; with Ctrl held it is a chord (Ctrl may be up by then too)
  if (action == GLFW_PRESS) app->state_->keys.press(key, (mods & GLFW_MOD_CONTROL) != 0);
}

App::App(int width, int height, bool hidden) : state_(std::make_unique<AppState>()) {
  // 1. GLFW and an OpenGL 3 context (as in Dear ImGui's example_glfw_opengl3)
  if (!display_available()) {
    throw std::runtime_error(
        "flt-lab: no display (DISPLAY and WAYLAND_DISPLAY are not set). Without one, render the "
        "scenes to PNG files:\n  flt-lab --headless --scene all --out DIR");
  }
  glfwSetErrorCallback(glfw_error);
  if (!glfwInit())
    throw std::runtime_error("flt-lab: glfwInit failed (is DISPLAY a running X server?)");
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 0);
  glfwWindowHint(GLFW_VISIBLE, hidden ? GLFW_FALSE : GLFW_TRUE);
  window_ = glfwCreateWindow(width, height, "FLT Lab", nullptr, nullptr);
  if (window_ == nullptr) {
    glfwTerminate();
    throw std::runtime_error("flt-lab: could not create a " + std::to_string(width) + "x" +
                             std::to_string(height) + " OpenGL 3.0 window");
  }
  glfwMakeContextCurrent(window_);
  glfwSwapInterval(hidden ? 0 : 1);  // vsync on screen; as fast as possible headless
  // Our callbacks go in first: Dear ImGui's backend chains to them. They count input (the idle
  // loop redraws on it) and keep key presses that come and go within one frame.
  glfwSetWindowUserPointer(window_, this);
  glfwSetKeyCallback(window_, on_key);
  glfwSetMouseButtonCallback(window_, [](GLFWwindow* w, int, int, int) { on_event(w); });
  glfwSetScrollCallback(window_, [](GLFWwindow* w, double, double) { on_event(w); });
  glfwSetCharCallback(window_, [](GLFWwindow* w, unsigned int) { on_event(w); });
  glfwSetWindowFocusCallback(window_, [](GLFWwindow* w, int) { on_event(w); });
  glfwSetCursorEnterCallback(window_, [](GLFWwindow* w, int) { on_event(w); });
  glfwSetCursorPosCallback(window_, [](GLFWwindow* w, double, double) { on_event(w); });
  glfwSetWindowSizeCallback(window_, [](GLFWwindow* w, int, int) { on_event(w); });
  glfwSetWindowRefreshCallback(window_, on_event);

  // 2. Dear ImGui context, style and backends
  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGuiIO& io = ImGui::GetIO();
  io.IniFilename = nullptr;  // the state string, not imgui.ini, is the saved state
  ImGui::StyleColorsDark();
  ImGui::GetStyle().FrameRounding = 3.0f;
  // opaque popups: a combo's list must not show the text under it
  ImGui::GetStyle().Colors[ImGuiCol_PopupBg].w = 1.0f;
  ImGui_ImplGlfw_InitForOpenGL(window_, true);
  ImGui_ImplOpenGL3_Init("#version 130");

  state_->headless = hidden;
  state_->runtime_line = flt::runtime_summary(flt::init(/*quiet=*/true));
  state_->gl_renderer = renderer();
  apply_scenario(state_->lab, Scenario{});
}

App::~App() {
  // 5. teardown, in reverse order (textures need the GL context)
  state_.reset();
  ImGui_ImplOpenGL3_Shutdown();
  ImGui_ImplGlfw_Shutdown();
  ImGui::DestroyContext();
  glfwDestroyWindow(window_);
  glfwTerminate();
}

void App::start_worker() {
  // a step taken while paused (Step on the Live Training tab) wakes the idle loop to draw it
  state_->lab.training.session.set_on_change([this] {
    events_ += 1;
    glfwPostEmptyEvent();
  });
  state_->lab.training.session.start_worker();
  state_->lab.training.worker = true;
}

bool App::animating() const {
  return lab_animating(state_->lab) || state_->toast.visible(now_seconds()) ||
         !state_->pending_screenshot.empty() || trailing_frames_ > 0;
}

void App::hold_quick_taps() {
  // Dear ImGui 1.86 reads each key's state once a frame, so a key pressed and released between
  // two frames (a quick tap) was never seen: hold such a key down for one frame (what the key
  // callback counted), then give it back its real state. Enter and Escape confirm and cancel text
  // fields; a key pressed with Ctrl is a chord (Ctrl+Q quits, Ctrl+A selects a field's text), so
  // Ctrl is held with it when it was let go as quickly.
  ImGuiIO& io = ImGui::GetIO();
  for (int key : held_taps_) io.KeysDown[key] = glfwGetKey(window_, key) == GLFW_PRESS;
  held_taps_.clear();
  const auto hold = [&](int key) {
    if (io.KeysDown[key]) return;
    io.KeysDown[key] = true;
    held_taps_.push_back(key);
  };
  for (int key : {GLFW_KEY_ENTER, GLFW_KEY_KP_ENTER, GLFW_KEY_ESCAPE}) {
    if (state_->keys.count(key) > 0) hold(key);
  }
  for (const auto& [key, presses] : state_->keys.chords()) {
    if (presses == 0 || key < 0 || key >= IM_ARRAYSIZE(io.KeysDown)) continue;
    if (!io.KeysDown[GLFW_KEY_LEFT_CONTROL] && !io.KeysDown[GLFW_KEY_RIGHT_CONTROL])
      hold(GLFW_KEY_LEFT_CONTROL);
    hold(key);
  }
  // the backend sets the modifier only in its key callback: follow the keys as held now
  io.KeyCtrl = io.KeysDown[GLFW_KEY_LEFT_CONTROL] || io.KeysDown[GLFW_KEY_RIGHT_CONTROL];
}

void App::run() {
  int settle = kSettleFrames;
  auto last = std::chrono::steady_clock::now();
  while (!should_close()) {
    const bool animate = animating();
    if (!animate && settle == 0) {
      const int64_t seen = events_;
      glfwWaitEventsTimeout(10.0);  // input, a worker's wake-up, or a slow heartbeat
      if (events_ == seen && !animating()) continue;  // nothing changed: draw nothing
      settle = kSettleFrames;
    }
    if (animate) {  // pace continuous drawing (the swap may not wait for the display)
      const auto next = last + std::chrono::duration<double>(kMinFrameSeconds);
      std::this_thread::sleep_until(next);
    }
    last = std::chrono::steady_clock::now();
    frame();
    if (settle > 0) --settle;
  }
}

double App::frame(const InputOverride* input, bool swap) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  // 3. main loop body: poll events, start the frame, panels, render
  glfwPollEvents();
  ImGui_ImplOpenGL3_NewFrame();
  ImGui_ImplGlfw_NewFrame();
  ImGuiIO& io = ImGui::GetIO();
  if (input != nullptr) {  // scripted input replaces the real mouse (the GLFW backend just set it)
    for (int key : input->key_taps) state_->keys.press(key, input->taps_with_control);
    io.MousePos = input->mouse;
    io.MouseDown[0] = input->left_down;
    for (int key = 0; key < IM_ARRAYSIZE(io.KeysDown); ++key) {
      io.KeysDown[key] = std::find(input->keys_down.begin(), input->keys_down.end(), key) !=
                         input->keys_down.end();
    }
  }
  hold_quick_taps();
  const bool was_animating = lab_animating(state_->lab);
  const bool fixed_step = state_->headless || input != nullptr;
  if (fixed_step) io.DeltaTime = static_cast<float>(kFixedFrameSeconds);
  ImGui::NewFrame();
  // Escape closes an open combo or menu (a text field takes it first: it reverts the edit).
  if (ImGui::IsKeyPressed(GLFW_KEY_ESCAPE, false) && !io.WantTextInput &&
      ImGui::IsPopupOpen("", ImGuiPopupFlags_AnyPopupId | ImGuiPopupFlags_AnyPopupLevel)) {
    ImGui::ClosePopupToLevel(0, /*restore_focus_to_window_under_popup=*/true);
  }
  // Ctrl+Q quits (outside a text field, where Q is typed).
  const bool control = io.KeysDown[GLFW_KEY_LEFT_CONTROL] || io.KeysDown[GLFW_KEY_RIGHT_CONTROL];
  if (control && ImGui::IsKeyPressed(GLFW_KEY_Q, false) && !io.WantTextInput) {
    glfwSetWindowShouldClose(window_, GLFW_TRUE);
  }
  if (!state_->lab.alert.empty()) {  // a failure the lab met on its own (progress not saved)
    std::fprintf(stderr, "%s\n", state_->lab.alert.c_str());
    report_failure(*state_, state_->lab.alert);
    state_->lab.alert.clear();
  }
  show_main_window(*state_, fixed_step ? kFixedFrameSeconds : io.DeltaTime);
  // the frame that ended a race or a run drew it as it was when the frame began: draw a few more
  if (was_animating && !lab_animating(state_->lab)) {
    trailing_frames_ = kSettleFrames;
  } else if (trailing_frames_ > 0) {
    --trailing_frames_;
  }
  ImGui::Render();
  int width = 0, height = 0;
  glfwGetFramebufferSize(window_, &width, &height);
  glViewport(0, 0, width, height);
  glClearColor(0.08f, 0.08f, 0.10f, 1.0f);
  glClear(GL_COLOR_BUFFER_BIT);
  ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
  if (!state_->pending_screenshot.empty() && state_->screenshot_skip_frames > 0) {
    state_->screenshot_skip_frames -= 1;
  } else if (!state_->pending_screenshot.empty()) {
    const std::string path = state_->pending_screenshot;
    state_->pending_screenshot.clear();
    int w = 0, h = 0;
    auto pixels = read_pixels(&w, &h);
    if (state_->screenshot_panel_only)
      pixels = crop(pixels, w, state_->probe.scene_min, state_->probe.scene_max, &w, &h);
    if (write_png(path, pixels, w, h)) {
      confirm(*state_, "Wrote " + path);
    } else {
      report_failure(*state_, "Could not write " + path);
    }
  }
  // 4. present
  if (swap) glfwSwapBuffers(window_);
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

std::vector<uint8_t> App::read_pixels(int* width, int* height) const {
  glfwGetFramebufferSize(window_, width, height);
  std::vector<uint8_t> pixels(static_cast<size_t>(*width) * *height * 4);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadBuffer(GL_BACK);
  glReadPixels(0, 0, *width, *height, GL_RGBA, GL_UNSIGNED_BYTE, pixels.data());
  // GL's rows start at the bottom; images start at the top
  const size_t stride = static_cast<size_t>(*width) * 4;
  std::vector<uint8_t> flipped(pixels.size());
  for (int y = 0; y < *height; ++y) {
    std::copy_n(pixels.begin() + static_cast<std::ptrdiff_t>(y * stride), stride,
                flipped.begin() + static_cast<std::ptrdiff_t>((*height - 1 - y) * stride));
  }
  return flipped;
}

bool App::screenshot(const std::string& path) {
  for (int i = 0; i < 3; ++i)
    frame(nullptr, true);  // ImGui settles its layout over a couple of frames
  frame(nullptr, false);
  int w = 0, h = 0;
  const auto pixels = read_pixels(&w, &h);
  glfwSwapBuffers(window_);
  return write_png(path, pixels, w, h);
}

void App::set_vsync(bool on) {
  glfwSwapInterval(on ? 1 : 0);
}

std::string App::renderer() const {
  const auto* text = reinterpret_cast<const char*>(glGetString(GL_RENDERER));
  return text ? text : "unknown";
}

bool App::should_close() const {
  return glfwWindowShouldClose(window_) != 0;
}

}  // namespace flt::viz
