#include "flt/metatrain/schedule_meta_train.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/autograd.h>
#include <torch/optim/adam.h>
#include <torch/serialize.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>

#include "flt/detail/random.h"
#include "flt/optim/schedule_mnemosyne.h"

namespace flt::metatrain {

using namespace flt::optim;
namespace {

constexpr double kDivergence = 1e6;  // a loss above kDivergence x its start counts as diverged

// splitmix-style mixing: independent, reproducible streams for (seed, a, b).
at::Generator generator_for(uint64_t seed, uint64_t a, uint64_t b) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ULL ^ (a + 0x7F4A7C15ULL) * 0xBF58476D1CE4E5B9ULL ^
               (b + 3) * 0x94D049BB133111EBULL;
  x ^= x >> 29;
  return at::make_generator<at::CPUGeneratorImpl>(x);
}

using flt::detail::uniform;

/// A task whose tensors are multiplied by fixed factors: the optimizer sees parameters 1 / s and
/// gradients s times the original's (Celo's rescaling augmentation).
class RescaledTask : public Task {
 public:
  RescaledTask(std::unique_ptr<Task> inner, torch::Tensor scales)
      : inner_(std::move(inner)), scales_(std::move(scales)) {}
  std::string name() const override { return inner_->name() + "(rescaled)"; }
  TaskFamily family() const override { return inner_->family(); }
  int64_t dim() const override { return inner_->dim(); }
  torch::Tensor initial(at::Generator gen) const override { return inner_->initial(gen) / scales_; }
  torch::Tensor loss(const torch::Tensor& p, at::Generator gen) const override {
    return inner_->loss(p * scales_, gen);
  }
  torch::Tensor eval_loss(const torch::Tensor& p) const override {
    return inner_->eval_loss(p * scales_);
  }
  std::vector<int64_t> segments() const override { return inner_->segments(); }
  bool has_validation() const override { return inner_->has_validation(); }
  torch::Tensor validation_loss(const torch::Tensor& p, at::Generator gen) const override {
    return inner_->validation_loss(p * scales_, gen);
  }

 private:
  std::unique_ptr<Task> inner_;
  torch::Tensor scales_;  // (dim): one factor per tensor, repeated over its entries
};

/// One run of a pair: its parameters (one leaf per tensor of the task), its optimizer and schedule.
struct Particle {
  std::vector<torch::Tensor> tensors;
  LearnedSchedule schedule{nullptr};
  std::unique_ptr<ScheduleMnemosyne> optimizer;
  at::Generator batches;
  bool diverged = false;
};

struct Pair {
  std::unique_ptr<Task> task;
  double log_initial = 0.0;
  bool tell_loss = false, tell_length = false, tell_validation = false;
  Particle plus, minus;
  torch::Tensor accumulated;  // sum of this episode's perturbations (PES)
};

torch::Tensor flat_of(const std::vector<torch::Tensor>& tensors) {
  return at::cat(tensors);
}

double scored_loss(const Task& task, const torch::Tensor& params, at::Generator& gen) {
  torch::NoGradGuard no_grad;
  return (task.has_validation() ? task.validation_loss(params, gen) : task.eval_loss(params))
      .item<double>();
}

void set_vector(const LearnedSchedule& schedule, const torch::Tensor& vector) {
  torch::NoGradGuard no_grad;
  int64_t offset = 0;
  for (auto& p : schedule->parameters()) {
    p.copy_(vector.narrow(0, offset, p.numel()).view_as(p));
    offset += p.numel();
  }
}

torch::Tensor vector_of(const LearnedSchedule& schedule) {
  std::vector<torch::Tensor> flat;
  for (const auto& p : schedule->parameters()) flat.push_back(p.detach().reshape(-1));
  return at::cat(flat).to(at::kDouble);
}

void start_particle(Particle& particle, const Task& task, const torch::Tensor& start,
                    const LearnedSchedule& base, uint64_t batch_seed, int64_t total_steps) {
  particle.tensors.clear();
  int64_t offset = 0;
  for (int64_t size : task.segments()) {
    particle.tensors.push_back(start.narrow(0, offset, size).clone().requires_grad_(true));
    offset += size;
  }
  particle.schedule = std::dynamic_pointer_cast<LearnedScheduleImpl>(base->clone());
  particle.optimizer = std::make_unique<ScheduleMnemosyne>(
      particle.tensors, ScheduleMnemosyneOptions().total_steps(total_steps), particle.schedule);
  particle.batches = at::make_generator<at::CPUGeneratorImpl>(batch_seed);
  particle.diverged = false;
}

/// Runs `steps` inner steps of one particle from step `t0`; returns the mean weighted meta-term
/// over its scored steps.
double unroll(Particle& particle, const Pair& pair, int64_t t0, int64_t steps, int64_t horizon,
              int64_t score_every) {
  const double diverged_term = std::log(kDivergence);
  double total = 0.0, weights = 0.0;
  for (int64_t u = 1; u <= steps; ++u) {
    const int64_t t = t0 + u;
    const double weight = 2.0 * static_cast<double>(t) / static_cast<double>(horizon);
    const bool scored = u % score_every == 0 || u == steps;
    if (particle.diverged) {
      if (scored) total += weight * diverged_term, weights += weight;
      continue;
    }
    auto& opt = *particle.optimizer;
    opt.zero_grad();
    torch::Tensor loss;
    {
      at::AutoGradMode grad(true);
      loss = pair.task->loss(flat_of(particle.tensors), particle.batches);
      loss.backward();
    }
    const double value = loss.item<double>();
    if (pair.tell_loss) opt.report_loss(value);
    if (pair.tell_validation && t % std::max<int64_t>(1, horizon / 10) == 0)
      opt.report_validation(
          scored_loss(*pair.task, flat_of(particle.tensors).detach(), particle.batches));
    opt.step();
    if (!scored) continue;
    const double now =
        scored_loss(*pair.task, flat_of(particle.tensors).detach(), particle.batches);
    double term =
        std::isfinite(now) ? std::log(std::max(now, 1e-12)) - pair.log_initial : diverged_term;
    if (!std::isfinite(value) || term > diverged_term) {
      particle.diverged = true;
      term = diverged_term;
    }
    total += weight * term;
    weights += weight;
  }
  return weights > 0 ? total / weights : 0.0;
}

struct Checkpoint {
  torch::Tensor theta, adam_m, adam_v;
  int64_t iteration = 0, episode = 0, adam_step = 0;
  // Meta-validation: the best score so far and when it and the last validation ran (-1: never).
  double best_score = 0.0;
  int64_t best_iteration = -1, validated_at = -1;
};

// The validation instances' own stream, the same for every campaign seed so that campaigns compare.
constexpr uint64_t kValidationStream = 0x7A11DA7E;

void save_checkpoint(const std::string& path, const LearnedSchedule& schedule,
                     const Checkpoint& c) {
  torch::serialize::OutputArchive archive;
  torch::serialize::OutputArchive weights;
  write_schedule(weights, *schedule);
  archive.write("schedule", weights);
  archive.write("theta", c.theta);  // double: the schedule holds only its float rounding
  archive.write("adam_m", c.adam_m);
  archive.write("adam_v", c.adam_v);
  archive.write("adam_step", torch::IValue(c.adam_step));
  archive.write("iteration", torch::IValue(c.iteration));
  archive.write("episode", torch::IValue(c.episode));
  archive.write("best_score", torch::IValue(c.best_score));
  archive.write("best_iteration", torch::IValue(c.best_iteration));
  archive.write("validated_at", torch::IValue(c.validated_at));
  const auto temporary = path + ".tmp";
  archive.save_to(temporary);
  std::filesystem::rename(temporary, path);  // a crash mid-write keeps the previous checkpoint
}

bool load_checkpoint(const std::string& path, LearnedSchedule& schedule, Checkpoint& c) {
  if (path.empty() || !std::ifstream(path).good()) return false;
  torch::serialize::InputArchive archive;
  archive.load_from(path);
  torch::serialize::InputArchive weights;
  archive.read("schedule", weights);
  const auto loaded = read_schedule(weights, path);
  TORCH_CHECK(loaded->history_size() == schedule->history_size() &&
                  vector_of(loaded).numel() == vector_of(schedule).numel(),
              "meta_train_schedule: the checkpoint ", path,
              " holds a schedule of another shape; use another --checkpoint path");
  torch::IValue value;
  archive.read("theta", c.theta);
  set_vector(schedule, c.theta.to(at::kFloat));
  archive.read("adam_m", c.adam_m);
  archive.read("adam_v", c.adam_v);
  archive.read("adam_step", value);
  c.adam_step = value.toInt();
  archive.read("iteration", value);
  c.iteration = value.toInt();
  archive.read("episode", value);
  c.episode = value.toInt();
  // Checkpoints of the first campaign have no meta-validation state.
  if (archive.try_read("validated_at", value)) {
    c.validated_at = value.toInt();
    archive.read("best_iteration", value);
    c.best_iteration = value.toInt();
    archive.read("best_score", value);
    c.best_score = value.toDouble();
  }
  return true;
}

}  // namespace

torch::Tensor validation_log_losses(const LearnedSchedule& schedule,
                                    const ScheduleMetaTrainOptions& options) {
  TORCH_CHECK(!options.validation_families().empty() && options.validation_tasks() >= 1 &&
                  options.validation_horizon() >= 1,
              "meta_train_schedule: meta-validation needs families, validation_tasks >= 1 and "
              "validation_horizon >= 1; got ",
              options.validation_families().size(), " families, ", options.validation_tasks(), ", ",
              options.validation_horizon());
  torch::NoGradGuard no_grad;
  auto out = torch::empty({options.validation_tasks()}, at::kDouble);
  for (int64_t i = 0; i < options.validation_tasks(); ++i) {
    auto gen = generator_for(kValidationStream, static_cast<uint64_t>(i), 0);
    const auto family =
        options
            .validation_families()[static_cast<size_t>(i) % options.validation_families().size()];
    const auto task = sample_task(family, gen, options.sampling());
    const auto initial = task->initial(gen);
    const double log_initial = std::log(std::max(task->eval_loss(initial).item<double>(), 1e-12));
    Particle run;
    start_particle(run, *task, initial, schedule,
                   static_cast<uint64_t>(at::randint(1LL << 62, {1}, gen).item<int64_t>()),
                   /*total_steps=*/0);
    double result = log_initial + std::log(kDivergence);  // a diverged run
    bool finite = true;
    for (int64_t step = 0; step < options.validation_horizon() && finite; ++step) {
      run.optimizer->zero_grad();
      at::AutoGradMode grad(true);
      const auto loss = task->loss(flat_of(run.tensors), run.batches);
      loss.backward();
      finite = std::isfinite(loss.item<double>());
      run.optimizer->step();  // a plain loop: no loss, no length, no validation metric
    }
    const double end = task->eval_loss(flat_of(run.tensors).detach()).item<double>();
    if (finite && std::isfinite(end)) result = std::min(result, std::log(std::max(end, 1e-12)));
    out[i] = result;
  }
  return out;
}

std::vector<double> meta_train_schedule(
    LearnedSchedule schedule, const ScheduleMetaTrainOptions& options,
    const std::function<void(const ScheduleMetaProgress&)>& on_iteration) {
  TORCH_CHECK(!options.families().empty(), "meta_train_schedule: no task families");
  TORCH_CHECK(options.pairs() >= 1 && options.unroll() >= 1 && options.iterations() >= 0,
              "meta_train_schedule: need pairs >= 1, unroll >= 1, iterations >= 0; got ",
              options.pairs(), ", ", options.unroll(), ", ", options.iterations());
  TORCH_CHECK(
      options.min_horizon() >= options.unroll() && options.max_horizon() >= options.min_horizon(),
      "meta_train_schedule: need unroll <= min_horizon <= max_horizon, got ", options.unroll(),
      ", ", options.min_horizon(), ", ", options.max_horizon());
  TORCH_CHECK(options.sigma() > 0 && options.meta_lr() > 0 && options.rescale() >= 1 &&
                  options.score_every() >= 1,
              "meta_train_schedule: sigma, meta_lr must be positive, rescale >= 1, score_every "
              ">= 1; got ",
              options.sigma(), ", ", options.meta_lr(), ", ", options.rescale(), ", ",
              options.score_every());
  torch::NoGradGuard no_grad;
  Checkpoint state;
  auto theta = vector_of(schedule);
  state.adam_m = torch::zeros_like(theta);
  state.adam_v = torch::zeros_like(theta);
  if (load_checkpoint(options.checkpoint(), schedule, state)) theta = state.theta;
  const auto start = std::chrono::steady_clock::now();
  std::vector<double> history;
  std::vector<Pair> pairs(options.pairs());
  int64_t horizon = 0, t = 0;  // the episode's length and the steps done in it
  auto episode = state.episode;
  // Meta-validation against the untrained schedule (made afresh: same options, same seed).
  torch::Tensor reference;
  double validated_now = std::numeric_limits<double>::quiet_NaN();
  const auto validate = [&](int64_t iteration) {
    const LearnedSchedule untrained(schedule->options);
    if (!reference.defined()) reference = validation_log_losses(untrained, options);
    if (state.validated_at < 0) {  // the untrained weights are the best until beaten
      state.best_score = 0.0;
      if (!options.best().empty()) save_schedule(untrained, options.best());
    }
    const auto ratios = vector_of(schedule).equal(vector_of(untrained))
                            ? torch::zeros_like(reference)
                            : validation_log_losses(schedule, options) - reference;
    validated_now = ratios.mean().item<double>();
    if (validated_now < state.best_score) {
      state.best_score = validated_now;
      state.best_iteration = iteration;
      if (!options.best().empty()) save_schedule(schedule, options.best());
    }
    state.validated_at = iteration;
    if (!options.validation_csv().empty()) {
      std::ofstream csv(options.validation_csv(), std::ios::app);
      if (csv.tellp() == 0) csv << "iteration,score,worst_log_ratio,best_score,best_iteration\n";
      csv << iteration << "," << validated_now << "," << ratios.max().item<double>() << ","
          << state.best_score << "," << state.best_iteration << "\n";
    }
  };
  for (int64_t iteration = state.iteration; iteration < options.iterations(); ++iteration) {
    validated_now = std::numeric_limits<double>::quiet_NaN();
    if (t == 0) {  // a new episode: draw its horizon and every pair's task
      if (options.validate_every() > 0 &&
          (state.validated_at < 0 || iteration - state.validated_at >= options.validate_every()))
        validate(iteration);
      if (!options.checkpoint().empty() && iteration > state.iteration) {
        state.iteration = iteration;
        state.episode = episode;
        state.theta = theta;
        save_checkpoint(options.checkpoint(), schedule, state);
      }
      auto gen = generator_for(options.seed(), episode, 0);
      const double u = uniform(gen, 0, 1);
      horizon = static_cast<int64_t>(std::exp(
          std::log(static_cast<double>(options.min_horizon())) +
          u * std::log(static_cast<double>(options.max_horizon()) / options.min_horizon())));
      horizon = std::max(options.unroll(), horizon / options.unroll() * options.unroll());
      for (int64_t i = 0; i < options.pairs(); ++i) {
        auto& pair = pairs[i];
        auto task_gen = generator_for(options.seed(), episode, i + 1);
        const auto family = options.families()[static_cast<size_t>(
            at::randint(static_cast<int64_t>(options.families().size()), {1}, task_gen)
                .item<int64_t>())];
        auto task = sample_task(family, task_gen, options.sampling());
        if (options.rescale() > 1.0) {
          std::vector<torch::Tensor> scales;
          for (int64_t size : task->segments()) {
            const double s =
                std::exp((2 * uniform(task_gen, 0, 1) - 1) * std::log(options.rescale()));
            scales.push_back(torch::full({size}, s));
          }
          task = std::make_unique<RescaledTask>(std::move(task), at::cat(scales));
        }
        pair.task = std::move(task);
        pair.tell_loss = uniform(task_gen, 0, 1) < 0.5;
        pair.tell_length = uniform(task_gen, 0, 1) < 0.25;
        pair.tell_validation = pair.task->has_validation() && uniform(task_gen, 0, 1) < 0.25;
        const auto initial = pair.task->initial(task_gen);
        auto score_gen = generator_for(options.seed(), episode, 1000 + i);
        pair.log_initial = std::log(std::max(scored_loss(*pair.task, initial, score_gen), 1e-12));
        const uint64_t batch_seed =
            static_cast<uint64_t>(at::randint(1LL << 62, {1}, task_gen).item<int64_t>());
        const int64_t total = pair.tell_length ? horizon : 0;
        start_particle(pair.plus, *pair.task, initial, schedule, batch_seed, total);
        start_particle(pair.minus, *pair.task, initial, schedule, batch_seed, total);
        pair.accumulated = torch::zeros_like(theta);
      }
      ++episode;
    }
    // PES: every pair draws a perturbation, accumulates it, and runs theta +- eps.
    auto eps_gen = generator_for(options.seed() ^ 0xE95, iteration, 0);
    auto gradient = torch::zeros_like(theta);
    double meta_loss = 0.0;
    for (auto& pair : pairs) {
      const auto eps = at::randn(theta.sizes(), eps_gen, at::kDouble) * options.sigma();
      pair.accumulated += eps;
      set_vector(pair.plus.schedule, (theta + eps).to(at::kFloat));
      set_vector(pair.minus.schedule, (theta - eps).to(at::kFloat));
      const double plus =
          unroll(pair.plus, pair, t, options.unroll(), horizon, options.score_every());
      const double minus =
          unroll(pair.minus, pair, t, options.unroll(), horizon, options.score_every());
      gradient += pair.accumulated * ((plus - minus) / (2 * options.sigma() * options.sigma()));
      meta_loss += 0.5 * (plus + minus);
    }
    gradient /= static_cast<double>(options.pairs());
    meta_loss /= static_cast<double>(options.pairs());
    t += options.unroll();
    if (t >= horizon) t = 0;
    // The outer Adam step on theta, the meta-gradient's norm clipped, half-cosine learning rate.
    const double norm = gradient.norm().item<double>();
    if (norm > options.clip()) gradient *= options.clip() / norm;
    const double progress =
        static_cast<double>(iteration) / std::max<int64_t>(1, options.iterations());
    const double lr =
        options.meta_lr() * (options.meta_lr_end() +
                             (1 - options.meta_lr_end()) * 0.5 * (1 + std::cos(M_PI * progress)));
    ++state.adam_step;
    state.adam_m = 0.9 * state.adam_m + 0.1 * gradient;
    state.adam_v = 0.999 * state.adam_v + 0.001 * gradient * gradient;
    const double step = static_cast<double>(state.adam_step);
    theta -= lr * (state.adam_m / (1 - std::pow(0.9, step))) /
             ((state.adam_v / (1 - std::pow(0.999, step))).sqrt() + 1e-8);
    set_vector(schedule, theta.to(at::kFloat));
    history.push_back(meta_loss);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!options.csv().empty()) {
      std::ofstream csv(options.csv(), std::ios::app);
      if (csv.tellp() == 0) csv << "iteration,episode,horizon,meta_loss,seconds\n";
      csv << iteration + 1 << "," << episode << "," << horizon << "," << meta_loss << "," << seconds
          << "\n";
    }
    if (on_iteration)
      on_iteration(
          {iteration + 1, options.iterations(), episode, horizon, meta_loss, seconds, validated_now,
           state.validated_at < 0 ? std::numeric_limits<double>::quiet_NaN() : state.best_score});
  }
  if (options.validate_every() > 0 && !history.empty() && state.validated_at < options.iterations())
    validate(options.iterations());
  if (!options.checkpoint().empty() && t == 0) {
    state.iteration = options.iterations();
    state.episode = episode;
    state.theta = theta;
    save_checkpoint(options.checkpoint(), schedule, state);
  }
  return history;
}

}  // namespace flt::metatrain
