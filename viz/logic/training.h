#pragma once
// Live Training (GL-free): a small TransformerLM or SequenceClassifier from flt::attention trained
// on a synthetic task on a worker thread. The UI reads snapshots and never waits on a step.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "logic/history.h"
#include "logic/scenario.h"
#include "logic/training_tasks.h"

namespace flt::viz {

/// "Adam", "CoordinateMnemosyne (FLT memory per coordinate)", "Mnemosyne (schedule, hand rule)".
const char* optimizer_name(TrainingOptimizer optimizer);

/// The learned RPE spectra of an FLT model's layer 0 at one step: g and f per head, row-major
/// (heads x points) over TrainingSnapshot::spectrum_xi / spectrum_delta.
struct SpectrumFrame {
  int64_t step = 0;
  std::vector<float> g, f;
};

/// The second design's schedule over the run (TrainingOptimizer::kLearnedSchedule; empty
/// otherwise): the step size each tensor took (lr included), recorded on `grid` (its interval
/// doubles whenever more than kScheduleRecords are kept, so the whole run stays in view), and what
/// its memory weighs an entry Delta steps old (fixed by the schedule's weights).
struct ScheduleTrace {
  std::vector<std::string> tensors;       ///< parameter names
  std::vector<int> groups;                ///< schedule_group of each tensor
  std::vector<float> steps;               ///< x of each record
  std::vector<std::vector<float>> sizes;  ///< per tensor, per record
  HistoryGrid grid;
  std::vector<float> delta, rpe, weight;  ///< Delta, f(Delta), gamma^Delta f(Delta)
  float discount = 0.0f;                  ///< gamma
  std::string memory;                     ///< "flt", "performer", ...
};
inline constexpr int kScheduleRecords = 512;
/// The part of the model a parameter belongs to, from its name: 0 embeddings, 1 attention, 2
/// feed-forward, 3 normalisation, 4 output head.
int schedule_group(const std::string& parameter_name);
inline constexpr const char* kScheduleGroupNames[] = {"embed", "attention", "ffn", "norms",
                                                      "output"};

/// A finished run kept for comparison: the last run of each optimizer with each attention variant
/// since the task was chosen (Adam against Mnemosyne, or one variant after another, on one plot).
struct PreviousRun {
  std::string label;  ///< e.g. "Adam lr 0.003, softmax"
  TrainingOptimizer optimizer = TrainingOptimizer::kAdam;
  int variant = 0;  ///< TrainingSettings::variant
  std::vector<float> loss, accuracy;
};

struct TrainingSnapshot {
  int64_t step = 0;
  std::vector<float> loss, accuracy;  ///< one entry per step
  float steps_per_second = 0.0f;
  bool playing = false;
  float speed = 1.0f;  ///< the pace the worker trains at (set_speed)
  bool nan_paused = false;
  int64_t nan_step = -1;  ///< the step whose loss or gradient was not finite
  std::string banner;     ///< non-empty when training stopped itself
  // attention maps of the fixed probe sequence, layer-major: maps[(l * heads + h) * L * L + i * L +
  // j]
  int layers = 0, heads = 0, map_length = 0;
  std::vector<float> maps;
  std::vector<int64_t> probe_tokens;
  int64_t maps_version = 0;  ///< changes whenever maps change
  // learned spectra (FLT attention only; spectrum_heads = 0 otherwise): frames from step 0 on,
  // thinned to at most kSpectrumFrames by doubling the recording interval
  int spectrum_heads = 0;
  std::vector<float> spectrum_xi, spectrum_delta;
  std::vector<SpectrumFrame> spectra;
  ScheduleTrace schedule;  ///< the second design's step sizes and memory (empty otherwise)
  std::string model;       ///< one-line description
  std::string label;       ///< the current run's short name, as PreviousRun::label
  /// Earlier runs to compare with (the last of each optimizer and variant; cleared when the task
  /// changes).
  std::vector<PreviousRun> previous;
};

/// The short name of a run with these settings ("Adam lr 0.003, softmax").
std::string run_label(const TrainingSettings& settings);

inline constexpr int kSpectrumFrames = 8;

/// The few numbers other tabs show about training, without copying its curves.
struct TrainingStatus {
  int64_t step = 0;
  float steps_per_second = 0.0f;
  bool playing = false;
};

class TrainingSession {
 public:
  TrainingSession();
  ~TrainingSession();  ///< stops and joins the worker
  TrainingSession(const TrainingSession&) = delete;
  TrainingSession& operator=(const TrainingSession&) = delete;

  /// Builds a fresh model and optimizer for these settings (takes effect before the next step).
  /// The run so far, if it took a step, is kept in TrainingSnapshot::previous (replacing the
  /// earlier run of its optimizer and attention variant), unless the task changes: then the
  /// earlier runs are dropped.
  void configure(const TrainingSettings& settings, uint64_t seed);
  /// Forgets the kept runs.
  void clear_previous();
  /// Called (on the training thread) after each step and rebuild, e.g. to wake an idle UI.
  void set_on_change(std::function<void()> on_change);
  /// Starts the worker thread (once); without it, use run_steps.
  void start_worker();
  void set_playing(bool playing);
  void request_step();          ///< one step while paused
  void set_speed(float speed);  ///< x1 = 20 steps/s, x64 unthrottled in practice
  /// Test hook and "break it" button: the loss of the first step numbered `step` or later is
  /// replaced by NaN. The button asks for the shown step + 1; a worker already past it (the shown
  /// step lags the worker's) poisons its next step rather than never.
  void inject_nan_at(int64_t step);

  /// Runs n steps on the calling thread (no worker running); stops early on NaN.
  void run_steps(int n);
  TrainingSnapshot snapshot() const;
  TrainingStatus status() const;
  /// "run,step,loss,accuracy" rows: every earlier run kept for the plots (oldest first), then the
  /// current one; run is the quoted label of the plots' legend.
  std::string curves_csv() const;

  /// Layer-0 queries and keys of the probe sequence, (heads, L, D) row-major; false before a model.
  bool probe_queries_keys(std::vector<float>* q, std::vector<float>* k, int* heads, int* length,
                          int* dim) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace flt::viz
