#pragma once
// flt-lab's panels, Dear ImGui style: one function per scene over the lab state (logic/lab.h) and
// that scene's view state (what only drawing needs: textures, camera angles, UI choices), each in
// its own file (scene_<key>.cpp), and the transport bar every scene shares (transport.cpp).

#include <cstdint>
#include <memory>
#include <vector>

#include "app/plot.h"
#include "logic/lab.h"

namespace flt::viz {

struct AppState;

/// A landscape grid drawn as a map: its texture and contour lines, remade when the grid changes.
struct LandscapeMapView {
  Texture texture;
  std::vector<Segment> contours;
  int64_t grid_version = 0;
};

struct ArenaView {
  bool click_mode = false;  ///< the human racer moves only on "My step"
  float yaw = 0.7f, pitch = 0.9f;
  LandscapeMapView map;  ///< the level's landscape
  bool dragging_start = false;
  LandscapeMapView swarm_map;      ///< the swarm level's
  bool attention_lines = true;     ///< draw the swarm's attention between particles
  ImVec2 race_checkbox_min{0, 0};  ///< where "race" was drawn (render tests: controls stay put)
};

struct TrainingView {
  int layer = 0;
  bool compare = true;        ///< earlier runs (TrainingSnapshot::previous) as faint curves
  ImVec2 break_it_min{0, 0};  ///< where "Break it" was drawn (render tests: controls stay put)
  float plots_max_y = 0.0f;   ///< the bottom of the loss and accuracy plots, legends included
  ImVec2 banner_min{0, 0};    ///< the NaN banner's top left ((0, 0): none shown)
  std::vector<std::unique_ptr<Texture>> head_textures;
};

struct AttentionView {
  std::vector<std::unique_ptr<Texture>> maps;  ///< per head: variant, exact, difference
  HeatmapHover hover;                          ///< the first map (head 0, the variant)
};

struct KernelView {
  Texture kernel_map, truth_map, fourier_map, kde_map;
};

struct RpeView {
  Texture map;
  float yaw = 0.6f, pitch = 0.8f;
  int head = 0;  ///< learned spectra: which head of the live model
};

struct LessonsView {
  int shown = -1;  ///< the lesson whose results were drawn last frame (-1: none)
};

/// Play / step / reset, speed, seed, the state string and exports; keys Space, S or Right, R.
void show_transport(AppState& s);

void show_arena(LabState& lab, ArenaView& view);
void show_training(LabState& lab, TrainingView& view);
void show_attention(LabState& lab, AttentionView& view);
void show_kernel(LabState& lab, KernelView& view);
void show_rpe(LabState& lab, RpeView& view);
void show_lessons(LabState& lab, LessonsView& view);

}  // namespace flt::viz
