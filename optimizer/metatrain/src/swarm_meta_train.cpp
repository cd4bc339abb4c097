#include "flt/metatrain/swarm_meta_train.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/util/Exception.h>
#include <torch/serialize.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "antithetic_es.h"
#include "flt/detail/progress.h"
#include "flt/detail/random.h"
#include "flt/metatrain/landscapes.h"

namespace flt::metatrain {

using namespace flt::optim;
namespace {

constexpr double kPi = 3.14159265358979323846;
using flt::detail::log_uniform;

// Rastrigin-like tasks of one dimension, evaluated together. x: (B, P, n) -> (B, P), clean.
// One-funnel tasks have second_shift = shift and offset 0, so the min changes nothing.
torch::Tensor evaluate_tasks(const torch::Tensor& x, const torch::Tensor& shift,
                             const torch::Tensor& second_shift, const torch::Tensor& second_offset,
                             const torch::Tensor& rotation_t, const torch::Tensor& scale) {
  const auto funnel = [&](const torch::Tensor& s) {
    return rastrigin(torch::bmm(x - s.unsqueeze(1), rotation_t) * scale.view({-1, 1, 1}));
  };
  return torch::minimum(funnel(shift), funnel(second_shift) + second_offset.unsqueeze(1));
}

}  // namespace

torch::Tensor swarm_episode_loss(SwarmModelImpl& model, const std::vector<RastriginTask>& tasks,
                                 int64_t particles, int64_t steps, uint64_t seed) {
  TORCH_CHECK(!tasks.empty(), "swarm_episode_loss: no tasks");
  torch::NoGradGuard no_grad;
  const int64_t b = static_cast<int64_t>(tasks.size()), n = tasks[0].shift.size(0);
  std::vector<torch::Tensor> shifts, second_shifts, second_offsets, rotations, scales, noises;
  for (const auto& t : tasks) {
    TORCH_CHECK(t.shift.size(0) == n, "swarm_episode_loss: tasks of one batch need one dimension");
    shifts.push_back(t.shift);
    second_shifts.push_back(t.second_shift.defined() ? t.second_shift : t.shift);
    second_offsets.push_back(torch::tensor(t.second_offset, torch::kDouble));
    rotations.push_back(t.rotation.t());
    scales.push_back(torch::tensor(t.scale, torch::kDouble));
    noises.push_back(torch::tensor(t.noise, torch::kDouble));
  }
  const auto shift = torch::stack(shifts), rotation_t = torch::stack(rotations);
  const auto second_shift = torch::stack(second_shifts),
             second_offset = torch::stack(second_offsets);
  const auto scale = torch::stack(scales), noise = torch::stack(noises).unsqueeze(1);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const int64_t lstm_hidden =
      model.options.variant() == SwarmVariant::kLSTM ? model.options.hidden() : 0;
  auto state =
      initial_swarm_state(b, particles, n, SwarmOptions().initial_sigma(), lstm_hidden, gen);
  auto best_true = torch::full({b}, INFINITY, torch::kDouble);
  auto running = torch::zeros({b}, torch::kDouble);
  for (int64_t t = 0; t < steps; ++t) {
    const auto x = state.u * (2.0 * kRastriginBound);
    const auto clean = evaluate_tasks(x, shift, second_shift, second_offset, rotation_t, scale);
    const auto measured = clean + noise * at::randn({b, particles}, gen, torch::kDouble);
    best_true = torch::minimum(best_true, std::get<0>(clean.min(-1)));
    running = running + torch::log1p(best_true);
    observe_values(state, measured, static_cast<double>(t + 1) / static_cast<double>(steps));
    model.step(state, at::randn({b, particles, n, kSwarmNoiseChannels}, gen, torch::kDouble));
  }
  return 0.5 * running / static_cast<double>(steps) + 0.5 * torch::log1p(best_true);
}

std::vector<double> meta_train_swarm(SwarmModel model, const SwarmMetaTrainOptions& options,
                                     const std::function<void(int64_t, double)>& on_iteration) {
  TORCH_CHECK(options.iterations() >= 1 && options.pairs() >= 1 && options.tasks() >= 1,
              "meta_train_swarm: iterations, pairs and tasks must be >= 1, got ",
              options.iterations(), ", ", options.pairs(), ", ", options.tasks());
  TORCH_CHECK(options.particles() >= 2, "meta_train_swarm: particles must be >= 2, got ",
              options.particles());
  TORCH_CHECK(options.min_steps() >= 1 && options.max_steps() >= options.min_steps(),
              "meta_train_swarm: need 1 <= min_steps <= max_steps, got ", options.min_steps(), ", ",
              options.max_steps());
  TORCH_CHECK(options.sigma() > 0 && options.meta_lr() > 0,
              "meta_train_swarm: sigma and meta_lr must be positive, got ", options.sigma(), ", ",
              options.meta_lr());
  auto theta = model->flat_parameters();
  auto adam_m = torch::zeros_like(theta), adam_v = torch::zeros_like(theta);
  int64_t start = 0;
  if (!options.checkpoint().empty() && std::ifstream(options.checkpoint()).good()) {
    torch::serialize::InputArchive archive;
    archive.load_from(options.checkpoint());
    torch::Tensor iteration;
    archive.read("theta", theta);
    archive.read("adam_m", adam_m);
    archive.read("adam_v", adam_v);
    archive.read("iteration", iteration);
    start = iteration.item<int64_t>();
    TORCH_CHECK(theta.numel() == model->flat_parameters().numel(), "meta_train_swarm: checkpoint ",
                options.checkpoint(), " holds ", theta.numel(), " meta-parameters, the model has ",
                model->flat_parameters().numel());
  }
  const auto save = [&](int64_t iteration) {
    if (options.checkpoint().empty()) return;
    torch::serialize::OutputArchive archive;
    archive.write("theta", theta);
    archive.write("adam_m", adam_m);
    archive.write("adam_v", adam_v);
    archive.write("iteration", torch::tensor(iteration));
    archive.save_to(options.checkpoint() + ".tmp");
    std::rename((options.checkpoint() + ".tmp").c_str(), options.checkpoint().c_str());
  };
  std::ofstream csv;
  if (!options.csv().empty()) {
    const bool fresh = !std::ifstream(options.csv()).good();
    csv.open(options.csv(), std::ios::app);
    if (fresh) csv << "iteration,dims,steps,meta_loss,seconds\n";
  }
  std::vector<double> losses;
  const auto fraction = [&](int64_t iteration) {
    return static_cast<double>(iteration) / static_cast<double>(options.iterations());
  };
  flt::detail::ProgressBar bar("swarm meta-train", options.progress(), fraction(start));
  for (int64_t it = start; it < options.iterations(); ++it) {
    // Everything random in an iteration follows (seed, iteration): a resumed run is the same run.
    auto gen = at::make_generator<at::CPUGeneratorImpl>(options.seed() * 1000003ULL + it);
    const auto n = static_cast<int64_t>(
        std::lround(log_uniform(gen, static_cast<double>(options.family().min_dims),
                                static_cast<double>(options.family().max_dims))));
    const auto steps = static_cast<int64_t>(std::lround(log_uniform(
        gen, static_cast<double>(options.min_steps()), static_cast<double>(options.max_steps()))));
    std::vector<RastriginTask> tasks;
    for (int64_t i = 0; i < options.tasks(); ++i)
      tasks.push_back(sample_rastrigin_task(options.family(), n, gen));
    const auto eps = at::randn({options.pairs(), theta.numel()}, gen, torch::kDouble);
    // Pair k's two candidates run the same episodes (seed of (iteration, k)): antithetic
    // candidates differ only by the perturbation's sign. They come as +, - for each pair in turn.
    int64_t calls = 0;
    const auto meta_loss_at = [&](const torch::Tensor& candidate) {
      const uint64_t episode_seed = options.seed() * 7919ULL + static_cast<uint64_t>(it) * 131ULL +
                                    static_cast<uint64_t>(calls++ / 2);
      model->set_flat_parameters(candidate);
      return swarm_episode_loss(*model, tasks, options.particles(), steps, episode_seed)
          .mean()
          .item<double>();
    };
    // The loss scale differs by an order of magnitude between n = 2 and n = 30: the pairs'
    // differences over their RMS give every iteration the same weight.
    const auto estimate =
        detail::antithetic_es(theta, eps, options.sigma(), detail::EsShaping::kRms, meta_loss_at);
    const double meta_loss = estimate.mean_score;
    // A half-cosine learning rate from meta_lr to meta_lr * meta_lr_end.
    const double frac = static_cast<double>(it) / static_cast<double>(options.iterations());
    const double lr =
        options.meta_lr() * (options.meta_lr_end() +
                             (1.0 - options.meta_lr_end()) * 0.5 * (1.0 + std::cos(kPi * frac)));
    detail::adam_step(theta, adam_m, adam_v, it, estimate.gradient, lr);
    losses.push_back(meta_loss);
    if (csv.is_open())
      csv << it << "," << n << "," << steps << "," << meta_loss << "," << bar.seconds() << "\n"
          << std::flush;
    if ((it + 1) % 10 == 0) save(it + 1);
    char figures[64];
    std::snprintf(figures, sizeof(figures), "%lld/%lld  n=%2lld  meta-loss %.3f",
                  static_cast<long long>(it + 1), static_cast<long long>(options.iterations()),
                  static_cast<long long>(n), meta_loss);
    bar.update(fraction(it + 1), figures);
    if (on_iteration) on_iteration(it, meta_loss);
  }
  bar.finish();
  save(options.iterations());
  model->set_flat_parameters(theta);
  return losses;
}

}  // namespace flt::metatrain
