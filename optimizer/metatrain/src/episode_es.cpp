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

// Episodes of `families`, drawn from `gen`.
std::vector<Episode> draw(const std::vector<BatchedFamily>& families, int64_t count,
                          const EpisodeESOptions& o, at::Generator gen) {
  TORCH_CHECK(!families.empty(), "EpisodeES: no task families to draw from");
  std::vector<Episode> out;
  const auto seed = [&] { return static_cast<uint64_t>(uniform(gen) * 1e9); };
  for (int64_t i = 0; i < count; ++i) {
    const auto family =
        families[static_cast<size_t>(uniform(gen) * static_cast<double>(families.size())) %
                 families.size()];
    const uint64_t shape_seed = seed();
    std::vector<uint64_t> seeds;
    for (int64_t k = 0; k < o.instances(); ++k) seeds.push_back(seed());
    Episode episode;
    const double log_steps = std::log(static_cast<double>(o.min_steps())) +
                             uniform(gen) * std::log(static_cast<double>(o.max_steps()) /
                                                     static_cast<double>(o.min_steps()));
    episode.spec.steps = static_cast<int64_t>(std::round(std::exp(log_steps)));
    episode.spec.seed = seed();
    episode.spec.known_length = uniform(gen) < 0.5;
    episode.task = make_batched_task(family, shape_seed, std::move(seeds), o.rescale());
    out.push_back(std::move(episode));
  }
  return out;
}

std::string describe(const std::vector<Episode>& episodes) {
  std::ostringstream s;
  for (size_t i = 0; i < episodes.size(); ++i)
    s << (i ? "; " : "") << episodes[i].task->name() << " x" << episodes[i].spec.steps
      << (episodes[i].spec.known_length ? " told" : "");
  return s.str();
}

// The part of n units of work rank `rank` of `world` does: [n rank / world, n (rank + 1) / world).
std::pair<int64_t, int64_t> share_of(int64_t n, int rank, int world) {
  return {n * rank / world, n * (rank + 1) / world};
}

// A matrix each rank filled its own rows or columns of (zeros elsewhere), summed over the ranks:
// every rank ends with all of it (x + 0 is exact, so each entry keeps its computing rank's bits).
void combine(Communicator* communicator, torch::Tensor& parts) {
  if (communicator != nullptr && communicator->world_size() > 1) communicator->allreduce(parts);
}

// The task of `episode` with its instances repeated `times` times (block r is a copy).
std::unique_ptr<BatchedTask> repeated(const BatchedTask& task, int64_t times) {
  std::vector<uint64_t> seeds;
  for (int64_t r = 0; r < times; ++r)
    seeds.insert(seeds.end(), task.seeds().begin(), task.seeds().end());
  return make_batched_task(task.family(), task.shape_seed(), std::move(seeds), task.rescaled());
}

}  // namespace

std::vector<double> episode_reference_grid() {
  return {1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1, 1.0};
}

std::vector<std::string> batched_reference_keys(const BatchedTask& task, const EpisodeSpec& spec) {
  torch::NoGradGuard no_grad;
  const auto fingerprints =
      task.validation_loss(task.initial()).to(at::kDouble).contiguous();  // (K)
  std::vector<std::string> keys;
  for (int64_t k = 0; k < task.instances(); ++k) {
    char fingerprint[32];
    std::snprintf(fingerprint, sizeof(fingerprint), "%.17g", fingerprints.data_ptr<double>()[k]);
    std::ostringstream key;
    key << task.name() << '|' << task.shape_seed() << '|' << task.seeds()[static_cast<size_t>(k)]
        << '|' << (task.rescaled() ? "rescaled" : "plain") << '|' << fingerprint << '|'
        << spec.steps << '|' << spec.seed;
    keys.push_back(key.str());
  }
  return keys;
}

EpisodeES::EpisodeES(LearnedSchedule schedule, EpisodeESOptions options, ReferenceCache& references)
    : template_(std::move(schedule)), options_(std::move(options)), references_(references) {
  const auto& o = options_;
  TORCH_CHECK(o.pairs() > 0 && o.episodes() > 0 && o.instances() > 0 &&
                  o.validation_episodes() > 0 && o.validation_every() > 0,
              "EpisodeES: pairs, episodes, instances, validation_episodes and validation_every "
              "must be positive");
  TORCH_CHECK(o.sigma() > 0 && o.learning_rate() > 0, "EpisodeES: sigma (", o.sigma(),
              ") and learning_rate (", o.learning_rate(), ") must be positive");
  TORCH_CHECK(o.min_steps() > 0 && o.max_steps() >= o.min_steps(),
              "EpisodeES: need 0 < min_steps <= max_steps, got ", o.min_steps(), ", ",
              o.max_steps());
  for (auto family : o.validation_families())
    for (auto trained : o.train_families())
      TORCH_CHECK(family != trained, "EpisodeES: family ", batched_family_name(family),
                  " is both trained on and held out for validation");
  torch::NoGradGuard no_grad;
  theta0_ = torch::nn::utils::parameters_to_vector(template_->parameters()).to(at::kDouble).clone();
  moved_ = o.fixed_step_numbers() ? 1 - step_numbers_mask(template_) : torch::ones_like(theta0_);
}

torch::Tensor step_numbers_mask(const LearnedSchedule& schedule) {
  std::vector<torch::Tensor> parts;
  for (const auto& p : schedule->named_parameters()) {
    const auto& name = p.key();
    const bool step_number = name.rfind("step_", 0) == 0 || name.rfind("growth_", 0) == 0;
    parts.push_back(torch::full({p.value().numel()}, step_number ? 1.0 : 0.0, at::kDouble));
  }
  return at::cat(parts);
}

torch::Tensor memory_read_mask(const LearnedSchedule& schedule) {
  std::vector<torch::Tensor> parts;
  for (const auto& p : schedule->named_parameters()) {
    auto part = torch::zeros(p.value().sizes(), at::kDouble);
    if (p.key() == "head_in.weight")
      part.narrow(1, LearnedScheduleImpl::kFeatures, part.size(1) - LearnedScheduleImpl::kFeatures)
          .fill_(1.0);
    parts.push_back(part.flatten());
  }
  return at::cat(parts);
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

std::vector<Episode> EpisodeES::batch(int64_t generation) const {
  return draw(options_.train_families(), options_.episodes(), options_,
              generator(options_.seed(), generation, kBatch));
}

std::vector<Episode> EpisodeES::validation_set(int64_t draw_index) const {
  TORCH_CHECK(draw_index >= 0, "EpisodeES: validation draw ", draw_index, " (0 or more)");
  return draw(options_.validation_families(), options_.validation_episodes(), options_,
              generator(options_.seed(), draw_index, kValidation));
}

torch::Tensor EpisodeES::references(const Episode& episode) {
  const auto& task = *episode.task;
  const int64_t k = task.instances();
  const auto keys = batched_reference_keys(task, episode.spec);
  auto out = torch::empty({k}, torch::kDouble);
  bool known = true;
  for (int64_t i = 0; i < k && known; ++i) {
    const auto* reference = references_.find(keys[static_cast<size_t>(i)]);
    if (reference != nullptr) out[i] = reference->final_loss;
    known = reference != nullptr;
  }
  if (known) return out;
  // Every instance at every rate of the grid in one batched run: block r is the grid's rate r
  // (this rank's rates, when several ranks split the grid).
  const auto grid = episode_reference_grid();
  const auto g = static_cast<int64_t>(grid.size());
  auto* communicator = options_.communicator().get();
  const auto [first, last] = communicator
                                 ? share_of(g, communicator->rank(), communicator->world_size())
                                 : std::pair<int64_t, int64_t>{0, g};
  auto all_losses = torch::zeros({g * k}, torch::kDouble);
  if (last > first) {
    auto lrs = torch::empty({(last - first) * k}, torch::kDouble);
    for (int64_t r = first; r < last; ++r)
      lrs.narrow(0, (r - first) * k, k).fill_(grid[static_cast<size_t>(r)]);
    all_losses.narrow(0, first * k, (last - first) * k)
        .copy_(batched_adamw_cosine_final_losses(*repeated(task, last - first), episode.spec, lrs));
  }
  combine(communicator, all_losses);
  const auto losses = all_losses;
  for (int64_t i = 0; i < k; ++i) {
    const auto& key = keys[static_cast<size_t>(i)];
    TunedReference reference;
    reference.final_loss = kInfinity;
    for (int64_t r = 0; r < g; ++r) {
      const double loss = losses.data_ptr<double>()[r * k + i];
      reference.by_lr.push_back(loss);
      if (loss < reference.final_loss) reference.final_loss = loss, reference.lr = grid[r];
    }
    TORCH_CHECK(std::isfinite(reference.final_loss),
                "EpisodeES: AdamW-cosine diverged at every rate of the grid on ", key);
    if (references_.find(key) == nullptr) references_.add(key, reference);
    out[i] = reference.final_loss;
  }
  return out;
}

torch::Tensor EpisodeES::instance_scores(const std::vector<torch::Tensor>& thetas,
                                         const std::vector<Episode>& episodes,
                                         const std::function<void()>& progress) {
  TORCH_CHECK(!thetas.empty() && !episodes.empty(), "EpisodeES: nothing to score");
  std::vector<LearnedSchedule> schedules;
  for (const auto& theta : thetas) schedules.push_back(schedule_at(theta));
  const auto candidates = static_cast<int64_t>(thetas.size());
  auto* communicator = options_.communicator().get();
  const int rank = communicator ? communicator->rank() : 0,
            world = communicator ? communicator->world_size() : 1;
  int64_t columns = 0;
  for (const auto& episode : episodes) columns += episode.task->instances();
  auto scores = torch::zeros({candidates, columns}, torch::kDouble);  // this rank's entries
  int64_t column = 0, index = 0;
  for (const auto& episode : episodes) {
    const auto reference = references(episode);
    const int64_t k = episode.task->instances();
    // This rank's candidates of the episode: a block of them, or all of them on every world-th
    // episode when there are fewer candidates than ranks.
    const auto [first, last] = candidates >= world     ? share_of(candidates, rank, world)
                               : index % world == rank ? std::pair<int64_t, int64_t>{0, candidates}
                                                       : std::pair<int64_t, int64_t>{0, 0};
    if (last > first) {
      const std::vector<LearnedSchedule> mine(schedules.begin() + first, schedules.begin() + last);
      const auto losses =
          batched_schedule_final_losses(*repeated(*episode.task, last - first), episode.spec, mine)
              .contiguous();
      for (int64_t c = first; c < last; ++c)
        for (int64_t i = 0; i < k; ++i)
          scores.data_ptr<double>()[c * columns + column + i] = reference_score(
              losses.data_ptr<double>()[(c - first) * k + i], reference.data_ptr<double>()[i]);
    }
    column += k;
    ++index;
    inner_steps_ += candidates * k * episode.spec.steps;  // every rank's, as one process counts
    if (progress) progress();
  }
  combine(communicator, scores);
  return scores;
}

std::vector<double> EpisodeES::mean_scores(const std::vector<torch::Tensor>& thetas,
                                           const std::vector<Episode>& episodes,
                                           const std::function<void()>& progress) {
  const auto means = instance_scores(thetas, episodes, progress).mean(1).contiguous();
  return {means.data_ptr<double>(), means.data_ptr<double>() + means.numel()};
}

GenerationRecord EpisodeES::step(EpisodeESState& state,
                                 const std::function<void(int64_t, int64_t)>& progress) {
  const auto started = std::chrono::steady_clock::now();
  const int64_t inner_steps_before = inner_steps_;
  GenerationRecord record;
  record.generation = state.generation;
  const auto episodes = batch(state.generation);
  record.tasks = describe(episodes);
  const bool validating = (state.generation + 1) % options_.validation_every() == 0;
  const int64_t total =
      static_cast<int64_t>(episodes.size()) +
      (validating ? (validation_.empty() ? (state.best_generation > 0 ? 3 : 2) : 1) *
                        options_.validation_episodes()
                  : 0);
  int64_t done = 0;
  const auto tick = [&] {
    if (progress) progress(++done, total);
  };
  // Every candidate on the same episodes, in one batched run an episode: the hand rule, theta,
  // then theta + sigma eps_k and theta - sigma eps_k pair by pair.
  auto noise_gen = generator(options_.seed(), state.generation, kNoise);
  auto eps = at::randn({options_.pairs(), state.theta.numel()}, noise_gen, at::kDouble);
  if (options_.fixed_step_numbers()) eps *= moved_;  // their estimate, and so their step, is 0
  std::vector<torch::Tensor> thetas = {theta0_, state.theta};
  for (int64_t k = 0; k < options_.pairs(); ++k) {
    thetas.push_back(state.theta + options_.sigma() * eps[k]);
    thetas.push_back(state.theta - options_.sigma() * eps[k]);
  }
  const auto scores = instance_scores(thetas, episodes, tick);  // (2 + 2 pairs, instances)
  record.hand_rule_score = scores[0].mean().item<double>();
  record.theta_score = scores[1].mean().item<double>();
  const auto perturbed = scores.narrow(0, 2, 2 * options_.pairs()).view({options_.pairs(), 2, -1});
  // Each instance one vote on each pair (the mean of the signs of its differences): the families
  // whose scores move most with the step (factorization's 8-50x the others' in the step sweep,
  // docs/learned-optimizer.md) cannot outvote the others.
  const auto estimate = detail::antithetic_es(eps, options_.sigma(), detail::EsShaping::kSign,
                                              perturbed.select(1, 0), perturbed.select(1, 1));
  record.perturbed_score = estimate.mean_score;
  detail::adam_step(state.theta, state.adam_m, state.adam_v, state.generation, estimate.gradient,
                    options_.learning_rate());
  ++state.generation;
  if (validating) {
    // Each scored alone, so a resumed campaign scores exactly what an uninterrupted one does.
    if (validation_.empty()) {
      validation_ = validation_set();
      validation_hand_rule_ = mean_scores({theta0_}, validation_, tick)[0];
      // The best so far, scored again on this process's set. The set is a function of the seed
      // and of the data, and the character family's data is this repository's text, which can
      // move between a campaign's invocations (scripts/metatrain-es pins it to one commit); the
      // stop rule must compare scores on one set. With the data unchanged the score is the
      // stored one exactly. The hand rule's is set below.
      state.best_validation = state.best_generation > 0
                                  ? mean_scores({state.best_theta}, validation_, tick)[0]
                                  : std::numeric_limits<double>::infinity();
    }
    record.validation = mean_scores({state.theta}, validation_, tick)[0];
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
  record.inner_steps = inner_steps_ - inner_steps_before;
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
