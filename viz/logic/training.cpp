#include "logic/training.h"

#include <torch/nn/functional/loss.h>
#include <torch/optim/adam.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <limits>
#include <mutex>
#include <sstream>
#include <thread>

#ifdef __linux__
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "flt/attention/flt.h"
#include "flt/attention/transformer.h"
#include "flt/optim/mnemosyne.h"
#include "logic/step_rate.h"
#include "logic/tensors.h"
#include "logic/variant_options.h"
#include "logic/variants.h"

namespace flt::viz {
namespace {

constexpr double kStepsPerSecond = 20.0;   // worker pace at x1
constexpr int kMapEvery = 5;               // refresh the probe's attention maps every 5 steps
constexpr int64_t kMemoryDistance = 2000;  // the schedule memory's view: Delta = 0..2000 steps back

using Clock = std::chrono::steady_clock;

}  // namespace

const char* optimizer_name(TrainingOptimizer optimizer) {
  switch (optimizer) {
    case TrainingOptimizer::kAdam: return "Adam";
    case TrainingOptimizer::kMnemosyne: return "CoordinateMnemosyne (FLT memory per coordinate)";
    case TrainingOptimizer::kLearnedSchedule: return "Mnemosyne (schedule, hand rule)";
  }
  return "?";
}

int schedule_group(const std::string& name) {
  const auto has = [&](const char* part) { return name.find(part) != std::string::npos; };
  if (has("embedding")) return 0;
  if (has("norm")) return 3;
  if (has("ff1") || has("ff2")) return 2;
  if (has("attention") || has("rpe")) return 1;
  return 4;
}

std::string run_label(const TrainingSettings& settings) {
  char text[160];
  if (settings.optimizer != TrainingOptimizer::kAdam) {
    std::snprintf(text, sizeof(text), "%s x%.3g, %s",
                  settings.optimizer == TrainingOptimizer::kMnemosyne ? "Mnemosyne" : "Schedule",
                  settings.learned_lr, variant_name(settings.variant).c_str());
  } else {
    std::snprintf(text, sizeof(text), "Adam lr %.3g, %s", settings.lr,
                  variant_name(settings.variant).c_str());
  }
  return text;
}

struct TrainingSession::Impl {
  // ---- shared with the UI thread (guarded by mutex) ----
  mutable std::mutex mutex;
  std::condition_variable wake;
  bool quit = false;
  bool playing = false;
  int step_requests = 0;
  float speed = 1.0f;
  bool rebuild_requested = false;
  TrainingSettings pending_settings;
  uint64_t pending_seed = 1;
  int64_t nan_inject_step = -1;
  TrainingSnapshot snap;
  std::vector<PreviousRun> previous;  // runs kept for comparison
  TrainingTask previous_task = TrainingTask::kCopy;
  std::function<void()> on_change;
  std::vector<float> probe_q, probe_k;
  int probe_heads = 0, probe_length = 0, probe_dim = 0;

  // ---- owned by whichever thread trains (the worker once started) ----
  std::thread worker;
  bool worker_started = false;
  TrainingSettings settings;
  uint64_t seed = 1;
  flt::attention::TransformerLM lm{nullptr};
  flt::attention::SequenceClassifier classifier{nullptr};
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  HistoryGrid spectrum_grid{10};  // the learned spectra's recording grid (doubles when full)
  torch::Tensor probe;
  int64_t step = 0;
  StepRate rate;

  // Keeps the run in `snap` (guarded by mutex, held by the caller) for comparison when it took a
  // step; a new task drops the earlier runs, whose losses mean something else.
  void archive_run(const TrainingSettings& next) {
    if (next.task != previous_task) previous.clear();
    previous_task = next.task;
    if (snap.loss.empty()) return;
    PreviousRun run{snap.label, snap_optimizer, snap_variant, snap.loss, snap.accuracy};
    const auto same = std::find_if(previous.begin(), previous.end(), [&](const PreviousRun& p) {
      return p.optimizer == run.optimizer && p.variant == run.variant;
    });
    if (same != previous.end()) {
      *same = std::move(run);
    } else {
      previous.push_back(std::move(run));
    }
  }
  TrainingOptimizer snap_optimizer = TrainingOptimizer::kAdam;  // guarded by mutex
  int snap_variant = 0;                                         // guarded by mutex

  void changed() {
    std::function<void()> notify;
    {
      std::lock_guard<std::mutex> lock(mutex);
      notify = on_change;
    }
    if (notify) notify();
  }

  flt::attention::TransformerStack& stack() {
    return !classifier.is_empty() ? classifier->stack : lm->stack;
  }

  void rebuild(const TrainingSettings& s, uint64_t new_seed) {
    settings = s;
    seed = new_seed;
    torch::manual_seed(seed);
    const bool use_classifier = task_uses_classifier(s.task);
    const auto probe_batch = make_task_batch(s.task, 1, s.length, seed ^ 0x9e3779b97f4a7c15ULL);
    auto options =
        flt::attention::TransformerOptions(probe_batch.vocab, s.embed_dim, s.heads, s.layers)
            .max_length(probe_batch.length)
            .attention(variant_options(s.variant))
            .classes(2);
    lm = nullptr;
    classifier = nullptr;
    torch::OrderedDict<std::string, torch::Tensor> named;
    if (use_classifier) {
      classifier = flt::attention::SequenceClassifier(options);
      named = classifier->named_parameters();
    } else {
      lm = flt::attention::TransformerLM(options);
      named = lm->named_parameters();
    }
    const std::vector<torch::Tensor> parameters = named.values();
    ScheduleTrace trace;
    if (s.optimizer == TrainingOptimizer::kMnemosyne) {
      // the shipped pretrained meta-weights load by default
      optimizer = std::make_unique<flt::optim::CoordinateMnemosyne>(
          parameters, flt::optim::CoordinateMnemosyneOptions(s.learned_lr));
    } else if (s.optimizer == TrainingOptimizer::kLearnedSchedule) {
      auto learned = std::make_unique<flt::optim::ScheduleMnemosyne>(
          parameters, flt::optim::ScheduleMnemosyneOptions(s.learned_lr));
      const auto schedule = learned->schedule();
      for (const auto& item : named) {
        trace.tensors.push_back(item.key());
        trace.groups.push_back(schedule_group(item.key()));
      }
      trace.sizes.resize(trace.tensors.size());
      trace.memory = flt::optim::memory_name(schedule->options.memory());
      const auto weights = flt::optim::memory_weights(
          schedule->options.memory(), schedule->discount_logit, schedule->flt, kMemoryDistance);
      if (weights.defined()) {
        trace.delta = to_vector(torch::arange(kMemoryDistance + 1, torch::kFloat));
        trace.rpe = to_vector(weights[0].to(torch::kFloat));
        trace.weight = to_vector(weights[1].to(torch::kFloat));
        trace.discount = torch::sigmoid(schedule->discount_logit).item<float>();
      }
      optimizer = std::move(learned);
    } else {
      optimizer = std::make_unique<torch::optim::Adam>(parameters, torch::optim::AdamOptions(s.lr));
    }
    spectrum_grid = HistoryGrid(10);
    probe = torch::tensor(probe_batch.tokens, torch::kLong).view({1, probe_batch.length});
    step = 0;
    rate.reset();
    int64_t count = 0;
    for (const auto& p : parameters) count += p.numel();
    std::ostringstream model;
    model << (use_classifier ? "SequenceClassifier" : "TransformerLM") << ", "
          << flt::attention::attention_name(options.attention()) << " attention, " << s.layers
          << " layers x " << s.heads << " heads, E=" << s.embed_dim << ", L=" << probe_batch.length
          << ", " << count << " parameters, " << optimizer_name(s.optimizer);
    {
      std::lock_guard<std::mutex> lock(mutex);
      snap = TrainingSnapshot{};
      snap.model = model.str();
      snap.label = run_label(s);
      snap_optimizer = s.optimizer;
      snap_variant = s.variant;
      snap.playing = playing;
      snap.speed = speed;
      snap.probe_tokens = probe_batch.tokens;
      snap.schedule = std::move(trace);
    }
    refresh_maps();
  }

  void refresh_maps() {
    torch::NoGradGuard no_grad;
    auto maps =
        !classifier.is_empty() ? classifier->attention_maps(probe) : lm->attention_maps(probe);
    const int layers = static_cast<int>(maps.size());
    const int heads = static_cast<int>(maps[0].size(1));
    const int length = static_cast<int>(maps[0].size(2));
    auto all = torch::cat(maps, 0).to(torch::kFloat).contiguous();  // (layers, H, L, L)
    // Layer-0 queries and keys of the probe, for the Attention Lab's "live model" input.
    auto [q, k] = stack()->queries_and_keys(probe, 0);  // (1, H, L, D)
    const int64_t d = q.size(3);
    q = q[0].to(torch::kFloat).contiguous();
    k = k[0].to(torch::kFloat).contiguous();
    SpectrumFrame frame;
    torch::Tensor xi_axis, delta_axis;
    const bool has_spectrum = spectrum_frame(length, &frame, &xi_axis, &delta_axis);
    std::lock_guard<std::mutex> lock(mutex);
    if (has_spectrum) {
      snap.spectrum_heads = heads;
      snap.spectrum_xi = to_vector(xi_axis);
      snap.spectrum_delta = to_vector(delta_axis);
      auto& frames = snap.spectra;
      // frames on the grid are history; the last frame always shows the latest step
      const bool last_is_latest_only = frames.size() > 1 && !spectrum_grid.due(frames.back().step);
      if (!frames.empty() && (frames.back().step == step || last_is_latest_only)) {
        frames.back() = std::move(frame);
      } else {
        frames.push_back(std::move(frame));
      }
      std::vector<int64_t> steps;
      for (const auto& f : frames) steps.push_back(f.step);
      keep_only(frames, spectrum_grid.thin(steps, kSpectrumFrames, /*keep_newest=*/true));
    }
    snap.layers = layers;
    snap.heads = heads;
    snap.map_length = length;
    snap.maps = to_vector(all);
    snap.maps_version += 1;
    probe_q = to_vector(q);
    probe_k = to_vector(k);
    probe_heads = heads;
    probe_length = length;
    probe_dim = static_cast<int>(d);
  }

  // The learned spectrum g and RPE function f of layer 0's FLT attention, per head, on fixed axes:
  // xi in [-1.5, 1.5] and delta in [-(L-1), L-1] along the first position axis. False when the
  // model's attention is not FLT. Runs on the training thread, which owns the model.
  bool spectrum_frame(int length, SpectrumFrame* frame, torch::Tensor* xi_axis,
                      torch::Tensor* delta_axis) {
    auto* flt_module = dynamic_cast<flt::attention::FLTAttentionImpl*>(
        &stack()->layers[0]->attention->attention());
    if (flt_module == nullptr) return false;
    torch::NoGradGuard no_grad;
    constexpr int kPoints = 97;
    const int64_t l = flt_module->options.position_dim();
    *xi_axis = torch::linspace(-1.5, 1.5, kPoints);
    *delta_axis = torch::linspace(-(length - 1.0), length - 1.0, kPoints);
    frame->step = step;
    frame->g = to_vector(flt_module->spectrum(along_first_axis(*xi_axis, l)));
    frame->f = to_vector(flt_module->rpe_function(along_first_axis(*delta_axis, l)));
    return true;
  }

  // Adds this step's step sizes to the schedule trace (mutex held) when the step is on its grid.
  void record_schedule(const std::vector<double>& sizes) {
    auto& trace = snap.schedule;
    if (!trace.grid.due(step) || sizes.size() != trace.sizes.size()) return;
    trace.steps.push_back(static_cast<float>(step));
    for (size_t i = 0; i < sizes.size(); ++i)
      trace.sizes[i].push_back(static_cast<float>(sizes[i]));
    const std::vector<int64_t> steps(trace.steps.begin(), trace.steps.end());
    const auto kept = trace.grid.thin(steps, kScheduleRecords, /*keep_newest=*/false);
    for (auto& records : trace.sizes) keep_only(records, kept);
    keep_only(trace.steps, kept);
  }

  // One optimisation step; returns false when the NaN guard paused training.
  bool train_step() {
    const auto batch =
        make_task_batch(settings.task, settings.batch, settings.length, seed * 1000003ULL + step);
    auto tokens = torch::tensor(batch.tokens, torch::kLong).view({batch.batch, batch.length});
    auto targets = torch::tensor(batch.targets, torch::kLong);
    torch::Tensor loss, accuracy;
    namespace F = torch::nn::functional;
    if (!classifier.is_empty()) {
      auto logits = classifier->forward(tokens);  // (B, 2)
      loss = F::cross_entropy(logits, targets);
      accuracy = (logits.argmax(-1) == targets).to(torch::kFloat).mean();
    } else {
      auto logits = lm->forward(tokens).view({-1, batch.vocab});  // (B L, V)
      loss = F::cross_entropy(logits, targets,
                              F::CrossEntropyFuncOptions().ignore_index(kIgnoredTarget));
      auto scored = targets != kIgnoredTarget;
      accuracy = (logits.argmax(-1) == targets).masked_select(scored).to(torch::kFloat).mean();
    }
    int64_t inject;
    {
      std::lock_guard<std::mutex> lock(mutex);
      inject = nan_inject_step;
    }
    const bool poisoned = inject >= 0 && step + 1 >= inject;
    if (poisoned) loss = loss * std::numeric_limits<float>::quiet_NaN();
    const double loss_value = loss.item<double>();
    std::string problem;
    if (!std::isfinite(loss_value)) {
      problem = "loss is " + std::to_string(loss_value);
    } else {
      optimizer->zero_grad();
      loss.backward();
      for (const auto& group : optimizer->param_groups()) {
        for (const auto& p : group.params()) {
          if (p.grad().defined() && !p.grad().isfinite().all().item<bool>())
            problem = "a gradient is not finite";
        }
      }
    }
    if (!problem.empty()) {
      // NaN guard: do not apply the update; pause and name the step.
      std::lock_guard<std::mutex> lock(mutex);
      playing = false;
      snap.playing = false;
      snap.nan_paused = true;
      snap.nan_step = step + 1;
      // advice fits the cause: a NaN injected by "Break it" says nothing about the learning rate
      snap.banner = "Training paused: " + problem + " at step " + std::to_string(step + 1) +
                    (poisoned ? ", injected by \"Break it\" (the update was not applied). Play "
                                "goes on from here."
                              : " (the update was not applied). Lower the learning rate or reset.");
      if (poisoned) nan_inject_step = -1;
      return false;
    }
    optimizer->step();
    step += 1;
    rate.record(Clock::now());
    {
      std::lock_guard<std::mutex> lock(mutex);
      snap.step = step;
      snap.loss.push_back(static_cast<float>(loss_value));
      snap.accuracy.push_back(accuracy.item<float>());
      snap.steps_per_second = static_cast<float>(rate.per_second());
      if (settings.optimizer == TrainingOptimizer::kLearnedSchedule)
        record_schedule(static_cast<const flt::optim::ScheduleMnemosyne&>(*optimizer).step_sizes());
    }
    if (step % kMapEvery == 0) refresh_maps();
    return true;
  }

  void worker_loop() {
#ifdef __linux__
    // Lower this thread's priority (and that of the OpenMP team it creates, which inherits it): on
    // a small machine the UI thread then gets the CPU first and frames stay smooth while training.
    setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 10);
#endif
    while (true) {
      bool do_rebuild = false, do_step = false;
      TrainingSettings s;
      uint64_t sd = 0;
      float pace = 1.0f;
      {
        std::unique_lock<std::mutex> lock(mutex);
        wake.wait_for(lock, std::chrono::milliseconds(100),
                      [&] { return quit || rebuild_requested || playing || step_requests > 0; });
        if (quit) return;
        if (rebuild_requested) {
          do_rebuild = true;
          rebuild_requested = false;
          s = pending_settings;
          sd = pending_seed;
        } else if (playing || step_requests > 0) {
          do_step = true;
          if (!playing) step_requests -= 1;
        }
        pace = speed;
      }
      if (do_rebuild) {
        rebuild(s, sd);
        changed();
        continue;
      }
      if (!do_step) continue;
      const auto start = Clock::now();
      train_step();
      changed();
      const auto interval = std::chrono::duration<double>(1.0 / (kStepsPerSecond * pace));
      const auto spent = Clock::now() - start;
      if (spent < interval) {
        std::unique_lock<std::mutex> lock(mutex);
        wake.wait_for(lock, interval - spent, [&] { return quit || rebuild_requested; });
      }
    }
  }
};

TrainingSession::TrainingSession() : impl_(std::make_unique<Impl>()) {}

TrainingSession::~TrainingSession() {
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->quit = true;
  }
  impl_->wake.notify_all();
  if (impl_->worker.joinable()) impl_->worker.join();
}

void TrainingSession::configure(const TrainingSettings& settings, uint64_t seed) {
  if (!impl_->worker_started) {
    {
      std::lock_guard<std::mutex> lock(impl_->mutex);
      impl_->archive_run(settings);
    }
    impl_->rebuild(settings, seed);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->archive_run(settings);
    impl_->pending_settings = settings;
    impl_->pending_seed = seed;
    impl_->rebuild_requested = true;
    impl_->step_requests = 0;
    impl_->snap.step = 0;  // show the reset at once; the worker rebuilds before its next step
    impl_->snap.loss.clear();
    impl_->snap.accuracy.clear();
    impl_->snap.nan_paused = false;
    impl_->snap.banner.clear();
  }
  impl_->wake.notify_all();
}

void TrainingSession::clear_previous() {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->previous.clear();
}

void TrainingSession::set_on_change(std::function<void()> on_change) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->on_change = std::move(on_change);
}

void TrainingSession::start_worker() {
  if (impl_->worker_started) return;
  if (!impl_->optimizer) impl_->rebuild(TrainingSettings{}, 1);
  impl_->worker_started = true;
  impl_->worker = std::thread([this] { impl_->worker_loop(); });
}

void TrainingSession::set_playing(bool playing) {
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->playing = playing;
    impl_->snap.playing = playing;
    if (playing) {
      impl_->snap.nan_paused = false;
      impl_->snap.banner.clear();
    }
  }
  impl_->wake.notify_all();
}

void TrainingSession::request_step() {
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->step_requests += 1;
  }
  impl_->wake.notify_all();
}

void TrainingSession::set_speed(float speed) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->speed = std::clamp(speed, 0.25f, 64.0f);
  impl_->snap.speed = impl_->speed;
}

void TrainingSession::inject_nan_at(int64_t step) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->nan_inject_step = step;
}

void TrainingSession::run_steps(int n) {
  if (impl_->worker_started) return;  // the worker owns the model
  if (!impl_->optimizer) impl_->rebuild(TrainingSettings{}, 1);
  for (int i = 0; i < n; ++i) {
    if (!impl_->train_step()) break;
  }
  impl_->refresh_maps();
}

TrainingSnapshot TrainingSession::snapshot() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  TrainingSnapshot snap = impl_->snap;
  snap.previous = impl_->previous;
  return snap;
}

TrainingStatus TrainingSession::status() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return {impl_->snap.step, impl_->snap.steps_per_second, impl_->playing};
}

std::string TrainingSession::curves_csv() const {
  const auto snap = snapshot();
  std::ostringstream out;
  out << "run,step,loss,accuracy\n";
  // the earlier runs the plots compare, oldest first, then the current one
  const auto write = [&out](const std::string& label, const std::vector<float>& loss,
                            const std::vector<float>& accuracy) {
    for (size_t i = 0; i < loss.size() && i < accuracy.size(); ++i)
      out << '"' << label << "\"," << i + 1 << ',' << loss[i] << ',' << accuracy[i] << '\n';
  };
  for (const auto& run : snap.previous) write(run.label, run.loss, run.accuracy);
  write(snap.label, snap.loss, snap.accuracy);
  return out.str();
}

bool TrainingSession::probe_queries_keys(std::vector<float>* q, std::vector<float>* k, int* heads,
                                         int* length, int* dim) const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  if (impl_->probe_q.empty()) return false;
  *q = impl_->probe_q;
  *k = impl_->probe_k;
  *heads = impl_->probe_heads;
  *length = impl_->probe_length;
  *dim = impl_->probe_dim;
  return true;
}

}  // namespace flt::viz
