#pragma once
// The whole flt-lab scenario as one plain struct, and its state string: what the user copies,
// pastes, or passes as `flt-lab --state STRING` to reproduce a scene exactly.
//
// Format: "flt1;key=value;key=value;..." with keys in a fixed order. Decoding accepts the keys in
// any order, leaves missing keys at their defaults and rejects unknown keys or bad values with a
// message naming them. Attention variants are written by name (t.variant=flt); an index is read
// too.

#include <cstdint>
#include <string>

namespace flt::viz {

enum class SceneId { kAttention = 0, kKernel, kRpe, kTraining, kArena, kLessons };
inline constexpr int kSceneCount = 6;

/// "attention", "kernel", "rpe", "training", "arena", "lessons" (the --scene names).
const char* scene_key(SceneId scene);
/// "Attention Lab", "Kernel Explorer", "RPE Studio", "Live Training", "Optimizer Arena",
/// "Lessons" (tabs).
const char* scene_title(SceneId scene);
/// Parses a --scene name; returns false when unknown.
bool parse_scene(const std::string& name, SceneId* scene);

struct ArenaSettings {
  int level = 0;              ///< index into arena_levels()
  bool custom_start = false;  ///< start at (start_x, start_y) instead of the level's start
  double start_x = 0.0, start_y = 0.0;
  double human_lr = 0.01;       ///< the human racer's SGD learning rate
  double human_momentum = 0.9;  ///< and momentum
  bool human_enabled = true;
  bool contours = true;  ///< contour lines over the heatmap
  bool surface = false;  ///< show the landscape as a 3-D surface instead of the map
  bool swarm = false;    ///< the swarm level: populations race on 2-D Rastrigin
};

enum class TrainingTask { kCopy = 0, kReverse, kAssociativeRecall, kPositionMatch };
inline constexpr int kTrainingTaskCount = 4;

/// kMnemosyne: flt::optim::CoordinateMnemosyne (shipped weights, a memory per coordinate);
/// kLearnedSchedule: flt::optim::ScheduleMnemosyne, a learned per-tensor schedule whose FLT memory
/// spans the run.
enum class TrainingOptimizer { kAdam = 0, kMnemosyne, kLearnedSchedule };
inline constexpr int kTrainingOptimizerCount = 3;

struct TrainingSettings {
  TrainingTask task = TrainingTask::kCopy;
  int variant = 0;  ///< index into the AttentionOptions alternatives
  int layers = 2;
  int heads = 2;
  int embed_dim = 32;
  int length = 8;  ///< payload tokens per sequence (the model sees more: separators, answers)
  int batch = 32;
  double lr = 3e-3;  ///< Adam learning rate
  TrainingOptimizer optimizer = TrainingOptimizer::kAdam;
  double learned_lr = 1.0;  ///< Mnemosyne's multiplier on its learned step (either design)
  float smoothing = 0.6f;   ///< EMA smoothing of the curves (display only)
  bool log_loss = true;     ///< log y axis for the loss curve
};

enum class AttentionInput { kRandom = 0, kLocal, kPeriodic, kLiveModel };
inline constexpr int kAttentionInputCount = 4;

struct AttentionLabSettings {
  int variant = 1;  ///< index into the AttentionOptions alternatives
  int length = 48;
  int head_dim = 16;
  int heads = 2;
  AttentionInput input = AttentionInput::kRandom;
  bool causal = false;
  /// q and k of the synthetic inputs are multiplied by this (sharper or flatter softmax; the live
  /// model's are used as they are). 0.5 by default: at 1 the
  /// random-feature estimates' variance swamps them (Performer's error above 1 at 64 features).
  double input_scale = 0.5;
  // The variants' own options (their TORCH_ARG fields).
  double softmax_scale = 0.0;  ///< SoftmaxAttentionOptions::scale (0: 1 / sqrt(D))
  double linear_eps = 1e-6;    ///< LinearAttentionOptions::eps
  int features = 256;          ///< random features m (Performer, FLT) or D (SchoenbAt)
  double fourier_r = 2.0;      ///< FourierAttentionOptions::r_init (R)
  int fourier_phi = 1;     ///< phi, index into kernel_phi_label (s^2, s^4, s^6, |s|, relu, sigmoid)
  int flt_family = 0;      ///< FLTAttentionOptions::family, index into rpe_family_labels()
  int flt_components = 2;  ///< FLTAttentionOptions::components (T)
  int flt_rpe_features = 32;  ///< FLTAttentionOptions::rpe_features (r)
  int schoenbat_kernel =
      0;  ///< SchoenbAttentionOptions::kernel, index into schoenbat_kernel_names()
};

/// Kernel Explorer knobs (FourierFormer kernel phi(s(R x))).
struct KernelSettings {
  double R = 2.0;           ///< the kernel's R (|R| is used)
  int phi = 1;              ///< index into kernel_phi_label: s^2, s^4, s^6, |s|, relu, sigmoid
  double extent = 6.0;      ///< plots cover [-extent, extent] (per axis) unless follow_r
  bool follow_r = true;     ///< the view follows R: [-4 pi / R, 4 pi / R], four lobes a side
  int samples = 400;        ///< N for the density and regression estimators
  double rho = 0.7;         ///< correlation of the 2-D Gaussian the density estimators see
  double bandwidth = 0.35;  ///< the Gaussian KDE's h (Scott's rule at N = 400: 0.37)
  double noise = 0.3;       ///< standard deviation of the regression targets' noise
};

/// RPE Studio knobs (FLT spectrum families; enum values of attention::SpectrumFamily).
struct RpeSettings {
  /// attention::SpectrumFamily. Default: the Gaussian kernel, whose estimate from 32 features
  /// follows f's shape with a max error of 0.17 of max |f| = 1 at seed 1 (0.16 to 0.32 over seeds
  /// 1-5; 0.05 at 512 features); the local box^k, one click away, is the hard case (3.6 of
  /// max |f| = 10).
  int family = 2;
  int components = 2;  ///< T
  int smoothness = 2;  ///< local family's k
  double scale = 1.0;  ///< RpeSpectrumOptions::scale (sigma_0, radius unit, lambda or s_0)
  int features = 32;   ///< r
  int proposal = 0;    ///< attention::ProposalKind (Gaussian, Cauchy)
  double proposal_sigma = 0.25;  ///< about the local g's width (1 / radius) and the kernels' g
  int position_dim = 2;          ///< 1 or 2
  double extent = 6.0;           ///< f plotted over [-extent, extent]
  double xi_extent = 2.0;        ///< g plotted over [-xi_extent, xi_extent]
  int draw = 0;                  ///< redraw counter mixed into the seed
  bool surface = false;          ///< 3-D surface instead of the heatmap
};

/// Lessons: the papers' results in miniature (flt-demo's quick versions, demos/lessons).
struct LessonsSettings {
  int lesson = 0;  ///< index into flt::demos::lessons() (written by key, e.g. lesson=rpe-error)
};

struct Scenario {
  SceneId scene = SceneId::kArena;
  uint64_t seed = 1;
  float speed = 1.0f;  ///< transport speed, x0.25 .. x64
  ArenaSettings arena;
  TrainingSettings training;
  AttentionLabSettings attention;
  KernelSettings kernel;
  RpeSettings rpe;
  LessonsSettings lessons;

  bool operator==(const Scenario& other) const;
  bool operator!=(const Scenario& other) const { return !(*this == other); }
};

/// The state string of `scenario` (round-trips exactly through decode_state).
std::string encode_state(const Scenario& scenario);

/// Parses a state string; throws std::invalid_argument naming the bad key or value.
Scenario decode_state(const std::string& text);

}  // namespace flt::viz
