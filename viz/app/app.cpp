// flt-lab's shell, after Dear ImGui's example_glfw_opengl3: window and contexts (App's
// constructor), the frame (poll, new frame, main window, render, swap), teardown (destructor). The
// main window holds the title, the transport bar, one tab per scene and the status line.

#include "app/app.h"

#define GLFW_INCLUDE_NONE
#include <GL/gl.h>
#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <stb_image_write.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <stdexcept>

#include "app/display.h"
#include "app/widgets.h"
#include "flt/runtime.h"

namespace flt::viz {
namespace {

// Headless and scripted frames advance by a fixed 1/60 s so renders are reproducible.
constexpr double kFixedFrameSeconds = 1.0 / 60.0;

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

void show_main_window(AppState& s, double dt) {
  const ImGuiViewport* viewport = ImGui::GetMainViewport();
  ImGui::SetNextWindowPos(viewport->WorkPos);
  ImGui::SetNextWindowSize(viewport->WorkSize);
  ImGui::Begin("FLT Lab", nullptr,
               ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove |
                   ImGuiWindowFlags_NoSavedSettings | ImGuiWindowFlags_NoBringToFrontOnFocus);
  ImGui::TextColored(kHeadingColor, "FLT Lab");
  ImGui::SameLine();
  ImGui::TextDisabled("| %s | seed %llu", s.runtime_line.c_str(),
                      static_cast<unsigned long long>(s.lab.scenario.seed));
  show_transport(s);
  const float status_height = ImGui::GetFrameHeightWithSpacing();
  LabState& lab = s.lab;
  if (ImGui::BeginTabBar("scenes")) {
    for (int i = 0; i < kSceneCount; ++i) {
      const auto scene = static_cast<SceneId>(i);
      const ImGuiTabItemFlags flags =
          lab.scene_changed && scene == lab.scenario.scene ? ImGuiTabItemFlags_SetSelected : 0;
      if (ImGui::BeginTabItem(scene_title(scene), nullptr, flags)) {
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
  // status bar
  ImGui::Separator();
  ImGui::TextDisabled("%.1f FPS | Dear ImGui %s | %s", ImGui::GetIO().Framerate, IMGUI_VERSION,
                      lab.message.c_str());
  ImGui::End();
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

  // 2. Dear ImGui context, style and backends
  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGuiIO& io = ImGui::GetIO();
  io.IniFilename = nullptr;  // the state string, not imgui.ini, is the saved state
  ImGui::StyleColorsDark();
  ImGui::GetStyle().FrameRounding = 3.0f;
  ImGui_ImplGlfw_InitForOpenGL(window_, true);
  ImGui_ImplOpenGL3_Init("#version 130");

  state_->headless = hidden;
  state_->runtime_line = flt::runtime_summary(flt::init(/*quiet=*/true));
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
  state_->lab.training.session.start_worker();
  state_->lab.training.worker = true;
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
    io.MousePos = input->mouse;
    io.MouseDown[0] = input->left_down;
    for (int key = 0; key < IM_ARRAYSIZE(io.KeysDown); ++key) {
      io.KeysDown[key] = std::find(input->keys_down.begin(), input->keys_down.end(), key) !=
                         input->keys_down.end();
    }
  }
  const bool fixed_step = state_->headless || input != nullptr;
  if (fixed_step) io.DeltaTime = static_cast<float>(kFixedFrameSeconds);
  ImGui::NewFrame();
  show_main_window(*state_, fixed_step ? kFixedFrameSeconds : io.DeltaTime);
  ImGui::Render();
  int width = 0, height = 0;
  glfwGetFramebufferSize(window_, &width, &height);
  glViewport(0, 0, width, height);
  glClearColor(0.08f, 0.08f, 0.10f, 1.0f);
  glClear(GL_COLOR_BUFFER_BIT);
  ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
  if (!state_->pending_screenshot.empty()) {
    const std::string path = state_->pending_screenshot;
    state_->pending_screenshot.clear();
    int w = 0, h = 0;
    auto pixels = read_pixels(&w, &h);
    if (state_->screenshot_panel_only)
      pixels = crop(pixels, w, state_->probe.scene_min, state_->probe.scene_max, &w, &h);
    const bool ok = write_png(path, pixels, w, h);
    state_->lab.message = ok ? "wrote " + path : "could not write " + path;
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
