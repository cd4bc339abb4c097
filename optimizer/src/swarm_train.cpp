#include "flt/optim/swarm_train.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/util/Exception.h>
#include <torch/serialize.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "flt/optim/landscapes.h"
#include "flt/optim/swarm_baselines.h"

namespace flt::optim {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kRastriginBound = 5.12;

double uniform(at::Generator& gen, double lo, double hi) {
  return lo + (hi - lo) * at::rand({1}, gen, torch::kDouble).item<double>();
}
double log_uniform(at::Generator& gen, double lo, double hi) {
  return std::exp(uniform(gen, std::log(lo), std::log(hi)));
}

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

std::string format_duration(double seconds) {
  char buffer[32];
  const int s = static_cast<int>(seconds);
  std::snprintf(buffer, sizeof(buffer), "%dm%02ds", s / 60, s % 60);
  return buffer;
}

}  // namespace

torch::Tensor RastriginTask::clean(const torch::Tensor& x) const {
  const auto first = rastrigin(torch::matmul(x - shift, rotation.t()) * scale);
  if (!second_shift.defined()) return first;
  return torch::minimum(
      first, rastrigin(torch::matmul(x - second_shift, rotation.t()) * scale) + second_offset);
}

RastriginTask sample_rastrigin_task(const RastriginFamily& family, int64_t n, at::Generator& gen) {
  RastriginTask task;
  task.shift = (at::rand({n}, gen, torch::kDouble) * 2.0 - 1.0) * family.max_shift;
  task.rotation = torch::eye(n, torch::kDouble);
  if (uniform(gen, 0, 1) < family.rotate_probability) {
    // QR of a Gaussian matrix, signs fixed by R's diagonal: a uniformly random rotation.
    const auto qr = at::linalg_qr(at::randn({n, n}, gen, torch::kDouble));
    task.rotation = std::get<0>(qr) * std::get<1>(qr).diagonal().sign().unsqueeze(0);
  }
  task.scale = log_uniform(gen, family.min_scale, family.max_scale);
  task.noise =
      uniform(gen, 0, 1) < family.noise_probability ? uniform(gen, 0, family.max_noise) : 0.0;
  // Drawn last and only when possible, so families without second funnels draw as before.
  if (family.two_funnel_probability > 0 && uniform(gen, 0, 1) < family.two_funnel_probability) {
    task.second_shift = (at::rand({n}, gen, torch::kDouble) * 2.0 - 1.0) * family.max_shift;
    task.second_offset = uniform(gen, 0, static_cast<double>(n));
  }
  return task;
}

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
  TORCH_CHECK(options.iterations >= 1 && options.pairs >= 1 && options.tasks >= 1,
              "meta_train_swarm: iterations, pairs and tasks must be >= 1, got ",
              options.iterations, ", ", options.pairs, ", ", options.tasks);
  TORCH_CHECK(options.particles >= 2, "meta_train_swarm: particles must be >= 2, got ",
              options.particles);
  TORCH_CHECK(options.min_steps >= 1 && options.max_steps >= options.min_steps,
              "meta_train_swarm: need 1 <= min_steps <= max_steps, got ", options.min_steps, ", ",
              options.max_steps);
  TORCH_CHECK(options.sigma > 0 && options.meta_lr > 0,
              "meta_train_swarm: sigma and meta_lr must be positive, got ", options.sigma, ", ",
              options.meta_lr);
  auto theta = model->flat_parameters();
  auto adam_m = torch::zeros_like(theta), adam_v = torch::zeros_like(theta);
  int64_t start = 0;
  if (!options.checkpoint.empty() && std::ifstream(options.checkpoint).good()) {
    torch::serialize::InputArchive archive;
    archive.load_from(options.checkpoint);
    torch::Tensor iteration;
    archive.read("theta", theta);
    archive.read("adam_m", adam_m);
    archive.read("adam_v", adam_v);
    archive.read("iteration", iteration);
    start = iteration.item<int64_t>();
    TORCH_CHECK(theta.numel() == model->flat_parameters().numel(), "meta_train_swarm: checkpoint ",
                options.checkpoint, " holds ", theta.numel(), " meta-parameters, the model has ",
                model->flat_parameters().numel());
  }
  const auto save = [&](int64_t iteration) {
    if (options.checkpoint.empty()) return;
    torch::serialize::OutputArchive archive;
    archive.write("theta", theta);
    archive.write("adam_m", adam_m);
    archive.write("adam_v", adam_v);
    archive.write("iteration", torch::tensor(iteration));
    archive.save_to(options.checkpoint + ".tmp");
    std::rename((options.checkpoint + ".tmp").c_str(), options.checkpoint.c_str());
  };
  std::ofstream csv;
  if (!options.csv.empty()) {
    const bool fresh = !std::ifstream(options.csv).good();
    csv.open(options.csv, std::ios::app);
    if (fresh) csv << "iteration,dims,steps,meta_loss,seconds\n";
  }
  std::vector<double> losses;
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t it = start; it < options.iterations; ++it) {
    // Everything random in an iteration follows (seed, iteration): a resumed run is the same run.
    auto gen = at::make_generator<at::CPUGeneratorImpl>(options.seed * 1000003ULL + it);
    const auto n = static_cast<int64_t>(
        std::lround(log_uniform(gen, static_cast<double>(options.family.min_dims),
                                static_cast<double>(options.family.max_dims))));
    const auto steps = static_cast<int64_t>(std::lround(log_uniform(
        gen, static_cast<double>(options.min_steps), static_cast<double>(options.max_steps))));
    std::vector<RastriginTask> tasks;
    for (int64_t i = 0; i < options.tasks; ++i)
      tasks.push_back(sample_rastrigin_task(options.family, n, gen));
    const auto eps = at::randn({options.pairs, theta.numel()}, gen, torch::kDouble);
    std::vector<double> differences;
    double total = 0.0;
    for (int64_t k = 0; k < options.pairs; ++k) {
      const uint64_t episode_seed = options.seed * 7919ULL + static_cast<uint64_t>(it) * 131ULL + k;
      model->set_flat_parameters(theta + options.sigma * eps[k]);
      const double plus = swarm_episode_loss(*model, tasks, options.particles, steps, episode_seed)
                              .mean()
                              .item<double>();
      model->set_flat_parameters(theta - options.sigma * eps[k]);
      const double minus = swarm_episode_loss(*model, tasks, options.particles, steps, episode_seed)
                               .mean()
                               .item<double>();
      differences.push_back(plus - minus);
      total += 0.5 * (plus + minus);
    }
    // Fitness shaping: the loss scale differs by an order of magnitude between n = 2 and n = 30;
    // dividing the pairs' differences by their RMS gives every iteration the same weight.
    const auto d = torch::tensor(differences, torch::kDouble);
    const auto shaped = d / (d.pow(2).mean().sqrt() + 1e-12);
    const auto gradient = (shaped.unsqueeze(1) * eps).mean(0) / (2.0 * options.sigma);
    const double meta_loss = total / static_cast<double>(options.pairs);
    // Adam with a half-cosine learning rate from meta_lr to meta_lr * meta_lr_end.
    constexpr double kBeta1 = 0.9, kBeta2 = 0.999, kEps = 1e-8;
    const double frac = static_cast<double>(it) / static_cast<double>(options.iterations);
    const double lr = options.meta_lr * (options.meta_lr_end + (1.0 - options.meta_lr_end) * 0.5 *
                                                                   (1.0 + std::cos(kPi * frac)));
    adam_m = kBeta1 * adam_m + (1.0 - kBeta1) * gradient;
    adam_v = kBeta2 * adam_v + (1.0 - kBeta2) * gradient * gradient;
    const double t = static_cast<double>(it + 1);
    theta = theta - lr * (adam_m / (1.0 - std::pow(kBeta1, t))) /
                        ((adam_v / (1.0 - std::pow(kBeta2, t))).sqrt() + kEps);
    losses.push_back(meta_loss);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (csv.is_open())
      csv << it << "," << n << "," << steps << "," << meta_loss << "," << seconds << "\n"
          << std::flush;
    if ((it + 1) % 10 == 0) save(it + 1);
    if (options.progress) {
      const double done = static_cast<double>(it + 1 - start);
      const double eta = seconds / done * static_cast<double>(options.iterations - it - 1);
      const int width = 30;
      const int filled = static_cast<int>(width * (it + 1) / options.iterations);
      std::fprintf(stderr, "\r[%.*s%*s] %lld/%lld  n=%2lld  meta-loss %.3f  %s elapsed, ETA %s   ",
                   filled, "==============================", width - filled, "",
                   static_cast<long long>(it + 1), static_cast<long long>(options.iterations),
                   static_cast<long long>(n), meta_loss, format_duration(seconds).c_str(),
                   format_duration(eta).c_str());
    }
    if (on_iteration) on_iteration(it, meta_loss);
  }
  if (options.progress) std::fprintf(stderr, "\n");
  save(options.iterations);
  model->set_flat_parameters(theta);
  return losses;
}

// ---- held-out benchmark -------------------------------------------------------------------------

namespace {
// Fixed points of [-2.5, 2.5]^n drawn from their own seed (held-out functions only). -> (count, n)
torch::Tensor fixed_points(int64_t count, int64_t n, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return (at::rand({count, n}, gen, torch::kDouble) * 2.0 - 1.0) * 2.5;
}

// Rastrigin with its minimum moved off the box's centre, which a searcher that recombines uniform
// points would otherwise find for free.
BatchObjective shifted_rastrigin(int64_t n) {
  const auto shift = fixed_points(1, n, 20261125 + n)[0];
  return [shift](const torch::Tensor& x) { return rastrigin(x - shift.to(x.dtype())); };
}

// Two Rastrigin funnels, the second one's floor 2 higher: a searcher that averages across the
// funnels lands between them.
BatchObjective two_funnel_rastrigin(int64_t n) {
  const auto points = fixed_points(2, n, 7100 + n);
  const auto first = points[0], second = points[1];
  return [first, second](const torch::Tensor& x) {
    return torch::minimum(rastrigin(x - first.to(x.dtype())),
                          rastrigin(x - second.to(x.dtype())) + 2.0);
  };
}
}  // namespace

std::vector<BenchmarkFunction> swarm_benchmark_functions() {
  // Success targets: a value a searcher reaches only in the global basin or next to it.
  return {
      {"rastrigin-2", rastrigin, SearchBox::cube(2, -5.12, 5.12), 0.5},
      {"rastrigin-10", rastrigin, SearchBox::cube(10, -5.12, 5.12), 10.0},
      {"rastrigin-30", rastrigin, SearchBox::cube(30, -5.12, 5.12), 60.0},
      {"rastrigin-10-shifted", shifted_rastrigin(10), SearchBox::cube(10, -5.12, 5.12), 10.0},
      {"rastrigin-30-shifted", shifted_rastrigin(30), SearchBox::cube(30, -5.12, 5.12), 60.0},
      {"rastrigin-10-two-funnels", two_funnel_rastrigin(10), SearchBox::cube(10, -5.12, 5.12),
       10.0},
      {"ackley-10", ackley, SearchBox::cube(10, -32.768, 32.768), 1.0},
      {"schwefel-10", schwefel, SearchBox::cube(10, -500, 500), 500.0},
      {"griewank-10", griewank, SearchBox::cube(10, -600, 600), 0.1},
  };
}

std::vector<std::string> all_searcher_names() {
  return {"swarm-flt", "swarm-performer", "swarm-independent", "swarm-lstm",
          "pso",       "cma-es",          "adam-restarts",     "random"};
}

std::unique_ptr<PopulationSearch> make_searcher(const std::string& name, int64_t particles,
                                                uint64_t seed, double adam_lr,
                                                const std::string& weights_dir) {
  if (name.rfind("swarm-", 0) == 0) {
    const auto variant = swarm_variant_from_name(name.substr(6));
    auto options = SwarmOptions().variant(variant).particles(particles).seed(seed);
    const auto path = weights_dir + "/swarm_" + swarm_variant_name(variant) + ".pt";
    TORCH_CHECK(weights_dir.empty() || weights_dir == kUntrainedSwarm ||
                    std::filesystem::is_directory(weights_dir),
                "swarm weights: ", weights_dir, " is not a directory (expected one holding ",
                "swarm_<variant>.pt files, or \"", kUntrainedSwarm, "\")");
    if (weights_dir == kUntrainedSwarm)
      return std::make_unique<Swarm>(options, SwarmModel(SwarmModelOptions().variant(variant)));
    if (!weights_dir.empty() && std::ifstream(path).good()) options.weights(path);
    return std::make_unique<Swarm>(options);
  }
  if (name == "pso") return std::make_unique<ParticleSwarm>(particles, seed);
  if (name == "cma-es") return std::make_unique<CmaEs>(0, seed);
  if (name == "adam-restarts") return std::make_unique<AdamRestarts>(particles, adam_lr, 50, seed);
  if (name == "random") return std::make_unique<RandomSearch>(particles, seed);
  TORCH_CHECK(false, "unknown searcher \"", name,
              "\" (expected swarm-flt, swarm-performer, swarm-independent, swarm-lstm, pso, "
              "cma-es, adam-restarts or random)");
}

double tune_adam_lr(const std::vector<double>& grid, int64_t seeds, int64_t budget_per_dim,
                    int64_t particles) {
  TORCH_CHECK(!grid.empty() && seeds >= 1, "tune_adam_lr: need a grid and seeds >= 1");
  constexpr int64_t kDims = 10;
  double best_lr = grid[0], best_median = INFINITY;
  for (double lr : grid) {
    std::vector<double> bests;
    for (int64_t s = 0; s < seeds; ++s) {
      auto gen = at::make_generator<at::CPUGeneratorImpl>(4242 + s);  // tuning tasks, not held out
      RastriginFamily family;
      family.noise_probability = 0.0;
      family.two_funnel_probability = 0.0;
      const auto task = sample_rastrigin_task(family, kDims, gen);
      AdamRestarts adam(particles, lr, 50, static_cast<uint64_t>(s + 1));
      bests.push_back(run_search(
                          adam, [&](const torch::Tensor& x) { return task.clean(x); },
                          SearchBox::cube(kDims, -kRastriginBound, kRastriginBound),
                          budget_per_dim * kDims)
                          .best_value);
    }
    std::sort(bests.begin(), bests.end());
    const double median = bests[bests.size() / 2];
    if (median < best_median) {
      best_median = median;
      best_lr = lr;
    }
  }
  return best_lr;
}

std::vector<ComparisonRun> compare_searchers(const ComparisonOptions& options) {
  TORCH_CHECK(options.seeds >= 1 && options.budget_per_dim >= 1 && options.particles >= 2,
              "compare_searchers: need seeds >= 1, budget_per_dim >= 1, particles >= 2; got ",
              options.seeds, ", ", options.budget_per_dim, ", ", options.particles);
  std::vector<BenchmarkFunction> functions;
  for (const auto& f : swarm_benchmark_functions()) {
    if (options.functions.empty() || std::find(options.functions.begin(), options.functions.end(),
                                               f.name) != options.functions.end())
      functions.push_back(f);
  }
  TORCH_CHECK(!functions.empty() || options.functions.empty(),
              "compare_searchers: no function "
              "matches the names given (first: \"",
              options.functions[0], "\")");
  const auto searchers = options.searchers.empty() ? all_searcher_names() : options.searchers;
  std::vector<ComparisonRun> runs;
  const double total =
      static_cast<double>(functions.size() * searchers.size()) * static_cast<double>(options.seeds);
  for (const auto& f : functions) {
    for (const auto& name : searchers) {
      for (int64_t s = 1; s <= options.seeds; ++s) {
        auto searcher = make_searcher(name, options.particles, static_cast<uint64_t>(s),
                                      options.adam_lr, options.weights_dir);
        ComparisonRun run{f.name, name, static_cast<uint64_t>(s),
                          run_search(*searcher, f.f, f.box, options.budget_per_dim * f.box.dims())};
        run.success = run.result.best_value < f.target;
        runs.push_back(std::move(run));
        if (options.progress) {
          options.progress(static_cast<double>(runs.size()) / total, f.name + " " + name);
        }
      }
    }
  }
  return runs;
}

std::pair<std::vector<double>, std::vector<double>> median_best_curve(
    const std::vector<ComparisonRun>& runs, const std::string& function,
    const std::string& searcher, int64_t budget, int points) {
  std::vector<double> xs, ys;
  for (int i = 1; i <= points; ++i) {
    const auto at = static_cast<int64_t>(static_cast<double>(budget) * i / points);
    std::vector<double> values;
    for (const auto& r : runs) {
      if (r.function != function || r.searcher != searcher) continue;
      const auto& e = r.result.evaluation_history;
      const auto it = std::upper_bound(e.begin(), e.end(), at);
      if (it == e.begin()) continue;
      values.push_back(r.result.best_history[static_cast<size_t>(it - e.begin() - 1)]);
    }
    if (values.empty()) continue;
    std::sort(values.begin(), values.end());
    xs.push_back(static_cast<double>(at));
    ys.push_back(values[values.size() / 2]);
  }
  return {xs, ys};
}

ComparisonCell summarize(const std::vector<ComparisonRun>& runs, const std::string& function,
                         const std::string& searcher) {
  std::vector<double> bests;
  int64_t successes = 0;
  for (const auto& r : runs) {
    if (r.function != function || r.searcher != searcher) continue;
    bests.push_back(r.result.best_value);
    successes += r.success ? 1 : 0;
  }
  ComparisonCell cell;
  cell.runs = static_cast<int64_t>(bests.size());
  if (bests.empty()) return cell;
  std::sort(bests.begin(), bests.end());
  const size_t m = bests.size() / 2;
  cell.median = bests.size() % 2 ? bests[m] : 0.5 * (bests[m - 1] + bests[m]);
  cell.success_rate = static_cast<double>(successes) / static_cast<double>(bests.size());
  return cell;
}

}  // namespace flt::optim
