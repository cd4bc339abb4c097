#include "flt/metatrain/episode_es.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/utils/convert_parameters.h>
#include <torch/serialize.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "antithetic_es.h"
#include "flt/optim/schedule_mnemosyne.h"

namespace flt::metatrain {

using namespace flt::optim;
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// Purposes of the campaign's generators, each seeded from (seed, generation, purpose).
enum Purpose : uint64_t { kBatch = 1, kNoise = 2, kValidation = 3 };

at::Generator generator(uint64_t seed, int64_t generation, Purpose purpose) {
  // A large odd multiplier keeps (seed, generation, purpose) triples from colliding.
  const uint64_t mixed = (seed * 1000003ULL + static_cast<uint64_t>(generation)) * 8ULL + purpose;
  return at::make_generator<at::CPUGeneratorImpl>(mixed * 0x9E3779B97F4A7C15ULL);
}

double uniform(at::Generator& gen) {
  return at::rand({1}, gen).item<double>();
}

// Instances of `families` with their run specs, drawn from `gen`.
std::vector<std::pair<std::unique_ptr<Task>, EpisodeSpec>> draw(
    const std::vector<TaskFamily>& families, int64_t count, const EpisodeESOptions& o,
    at::Generator gen) {
  TORCH_CHECK(!families.empty(), "EpisodeES: no task families to draw from");
  std::vector<std::pair<std::unique_ptr<Task>, EpisodeSpec>> out;
  for (int64_t i = 0; i < count; ++i) {
    const auto family =
        families[static_cast<size_t>(uniform(gen) * static_cast<double>(families.size())) %
                 families.size()];
    EpisodeSpec spec;
    const double log_steps = std::log(static_cast<double>(o.min_steps())) +
                             uniform(gen) * std::log(static_cast<double>(o.max_steps()) /
                                                     static_cast<double>(o.min_steps()));
    spec.steps = static_cast<int64_t>(std::round(std::exp(log_steps)));
    spec.seed = static_cast<uint64_t>(uniform(gen) * 1e9);
    spec.known_length = uniform(gen) < 0.5;
    spec.report_loss = uniform(gen) < 0.5;
    out.emplace_back(sample_task(family, gen), spec);
  }
  return out;
}

std::string describe(const std::vector<std::pair<std::unique_ptr<Task>, EpisodeSpec>>& tasks) {
  std::ostringstream s;
  for (size_t i = 0; i < tasks.size(); ++i)
    s << (i ? "; " : "") << tasks[i].first->name() << " x" << tasks[i].second.steps
      << (tasks[i].second.known_length ? " told" : "")
      << (tasks[i].second.report_loss ? " loss" : "");
  return s.str();
}

}  // namespace

double schedule_final_loss(const Task& task, const EpisodeSpec& spec,
                           const LearnedSchedule& schedule) {
  TORCH_CHECK(spec.steps > 0, "schedule_final_loss: steps must be positive, got ", spec.steps);
  auto init = run_stream(spec.seed, RunStream::kInitialPoint),
       batches = run_stream(spec.seed, RunStream::kBatches);
  const auto start = task.initial(init).to(at::kFloat);
  std::vector<torch::Tensor> params;
  int64_t offset = 0;
  for (int64_t size : task.segments()) {
    params.push_back(start.narrow(0, offset, size).clone().requires_grad_(true));
    offset += size;
  }
  ScheduleMnemosyne optimizer(
      params, ScheduleMnemosyneOptions(1.0).total_steps(spec.known_length ? spec.steps : 0),
      schedule);
  for (int64_t t = 0; t < spec.steps; ++t) {
    optimizer.zero_grad();
    const auto loss = task.loss(at::cat(params), batches);
    const double value = loss.item<double>();
    if (!std::isfinite(value)) return kInfinity;
    loss.backward();
    if (spec.report_loss) optimizer.report_loss(value);
    optimizer.step();
  }
  const double final_loss = held_out_loss(task, at::cat(params).detach(), batches);
  return std::isfinite(final_loss) ? final_loss : kInfinity;
}

EpisodeES::EpisodeES(LearnedSchedule schedule, EpisodeESOptions options, ReferenceCache& references)
    : template_(std::move(schedule)), options_(std::move(options)), references_(references) {
  const auto& o = options_;
  TORCH_CHECK(o.pairs() > 0 && o.tasks_per_generation() > 0 && o.validation_tasks() > 0 &&
                  o.validation_every() > 0,
              "EpisodeES: pairs, tasks_per_generation, validation_tasks and validation_every "
              "must be positive");
  TORCH_CHECK(o.sigma() > 0 && o.learning_rate() > 0, "EpisodeES: sigma (", o.sigma(),
              ") and learning_rate (", o.learning_rate(), ") must be positive");
  TORCH_CHECK(o.min_steps() > 0 && o.max_steps() >= o.min_steps(),
              "EpisodeES: need 0 < min_steps <= max_steps, got ", o.min_steps(), ", ",
              o.max_steps());
  for (auto family : o.validation_families())
    for (auto trained : o.train_families())
      TORCH_CHECK(family != trained, "EpisodeES: family ", task_family_name(family),
                  " is both trained on and held out for validation");
  torch::NoGradGuard no_grad;
  theta0_ = torch::nn::utils::parameters_to_vector(template_->parameters()).to(at::kDouble).clone();
}

EpisodeESState EpisodeES::initial_state() const {
  EpisodeESState state;
  state.theta = theta0_.clone();
  state.adam_m = torch::zeros_like(theta0_);
  state.adam_v = torch::zeros_like(theta0_);
  state.best_theta = theta0_.clone();
  return state;
}

LearnedSchedule EpisodeES::schedule_at(const torch::Tensor& theta) const {
  TORCH_CHECK(theta.numel() == theta0_.numel(), "EpisodeES: theta has ", theta.numel(),
              " numbers, the schedule ", theta0_.numel());
  auto copy = std::dynamic_pointer_cast<LearnedScheduleImpl>(template_->clone());
  torch::NoGradGuard no_grad;
  torch::nn::utils::vector_to_parameters(theta.to(at::kFloat), copy->parameters());
  return LearnedSchedule(copy);
}

std::vector<std::pair<std::unique_ptr<Task>, EpisodeSpec>> EpisodeES::batch(
    int64_t generation) const {
  return draw(options_.train_families(), options_.tasks_per_generation(), options_,
              generator(options_.seed(), generation, kBatch));
}

std::vector<std::pair<std::unique_ptr<Task>, EpisodeSpec>> EpisodeES::validation_set() const {
  return draw(options_.validation_families(), options_.validation_tasks(), options_,
              generator(options_.seed(), 0, kValidation));
}

double EpisodeES::mean_score(
    const torch::Tensor& theta,
    const std::vector<std::pair<std::unique_ptr<Task>, EpisodeSpec>>& tasks) {
  const auto schedule = schedule_at(theta);
  double total = 0.0;
  for (const auto& [task, spec] : tasks) {
    const double reference = references_.get(*task, spec.steps, spec.seed).final_loss;
    total += reference_score(schedule_final_loss(*task, spec, schedule), reference);
  }
  return total / static_cast<double>(tasks.size());
}

GenerationRecord EpisodeES::step(EpisodeESState& state,
                                 const std::function<void(int64_t, int64_t)>& progress) {
  const auto started = std::chrono::steady_clock::now();
  GenerationRecord record;
  record.generation = state.generation;
  const auto tasks = batch(state.generation);
  record.tasks = describe(tasks);
  // The references first (tuned once per instance, cached), so the candidates' loop is uniform.
  for (const auto& [task, spec] : tasks) references_.get(*task, spec.steps, spec.seed);
  const int64_t pairs = options_.pairs(), total = 2 * pairs + 2;
  int64_t done = 0;
  const auto scored = [&](const torch::Tensor& theta) {
    const double score = mean_score(theta, tasks);
    if (progress) progress(++done, total);
    return score;
  };
  record.hand_rule_score = scored(theta0_);
  record.theta_score = scored(state.theta);
  auto noise_gen = generator(options_.seed(), state.generation, kNoise);
  const auto eps = at::randn({options_.pairs(), state.theta.numel()}, noise_gen, at::kDouble);
  const auto estimate =
      detail::antithetic_es(state.theta, eps, options_.sigma(), detail::EsShaping::kSign, scored);
  record.perturbed_score = estimate.mean_score;
  detail::adam_step(state.theta, state.adam_m, state.adam_v, state.generation, estimate.gradient,
                    options_.learning_rate());
  ++state.generation;
  if (state.generation % options_.validation_every() == 0) {
    if (validation_.empty()) {
      validation_ = validation_set();
      validation_hand_rule_ = mean_score(theta0_, validation_);
    }
    record.validation = mean_score(state.theta, validation_);
    record.validation_hand_rule = validation_hand_rule_;
    // The hand rule is the best until a theta beats it on the validation set.
    if (validation_hand_rule_ < state.best_validation) {
      state.best_validation = validation_hand_rule_;
      state.best_theta = theta0_.clone();
      state.best_generation = 0;
    }
    if (record.validation < state.best_validation) {
      state.best_validation = record.validation;
      state.best_theta = state.theta.clone();
      state.best_generation = state.generation;
    }
  }
  record.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return record;
}

void save_es_state(const EpisodeESState& state, const std::string& path) {
  torch::serialize::OutputArchive archive;
  archive.write("format", torch::IValue(std::string("flt-episode-es")));
  archive.write("generation", torch::IValue(state.generation));
  archive.write("theta", state.theta);
  archive.write("adam_m", state.adam_m);
  archive.write("adam_v", state.adam_v);
  archive.write("best_theta", state.best_theta);
  archive.write("best_validation", torch::IValue(state.best_validation));
  archive.write("best_generation", torch::IValue(state.best_generation));
  // Written beside and renamed over: a campaign killed mid-write keeps its last checkpoint.
  const std::string partial = path + ".partial";
  archive.save_to(partial);
  TORCH_CHECK(std::rename(partial.c_str(), path.c_str()) == 0, "save_es_state: cannot write ",
              path);
}

EpisodeESState load_es_state(const std::string& path) {
  torch::serialize::InputArchive archive;
  try {
    archive.load_from(path);
  } catch (const c10::Error& e) {
    TORCH_CHECK(false, "load_es_state: cannot read ", path, ": ", e.what_without_backtrace());
  }
  torch::IValue value;
  TORCH_CHECK(archive.try_read("format", value) && value.isString() &&
                  value.toStringRef() == "flt-episode-es",
              "load_es_state: ", path, " is not an episode-ES checkpoint");
  EpisodeESState state;
  archive.read("generation", value);
  state.generation = value.toInt();
  archive.read("theta", state.theta);
  archive.read("adam_m", state.adam_m);
  archive.read("adam_v", state.adam_v);
  archive.read("best_theta", state.best_theta);
  archive.read("best_validation", value);
  state.best_validation = value.toDouble();
  archive.read("best_generation", value);
  state.best_generation = value.toInt();
  return state;
}

}  // namespace flt::metatrain
