#include "flt/metatrain/meta_train.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/autograd.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/adam.h>
#include <torch/serialize.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <memory>
#include <numeric>
#include <sstream>
#include <tuple>

#include "learned_rule.h"

namespace flt::optim {
namespace {

constexpr double kMinLoss = 1e-12, kMaxLoss = 1e30;

at::Generator generator_for(uint64_t seed, uint64_t a, uint64_t b) {
  // splitmix-style mixing keeps the streams of (seed, a, b) independent and reproducible.
  uint64_t x = seed * 0x9E3779B97F4A7C15ULL ^ (a + 0x632BE59BD9B4E019ULL) * 0xBF58476D1CE4E5B9ULL ^
               (b + 1) * 0x94D049BB133111EBULL;
  x ^= x >> 31;
  return at::make_generator<at::CPUGeneratorImpl>(x);
}

/// One inner optimisation in flight.
struct Particle {
  torch::Tensor params;      // (dim)
  torch::Tensor state;       // (dim, state_size)
  torch::Tensor controller;  // (segments, kTensorState): one step-size controller per tensor
  // PES runs the fused inference step: the state of each tensor slot-major, (state_size, n_i),
  // instead of `state`.
  std::vector<torch::Tensor> slot_major;
  int64_t t = 0;
  at::Generator noise;
  bool diverged = false;
};

struct Worker {
  std::unique_ptr<Task> task;
  torch::Tensor segment_sizes;  // (segments) int64: the task's tensors
  torch::Tensor segment_ids;    // (dim) int64: the tensor of each coordinate
  double log_initial = 0.0;
  int64_t horizon = 0;              // inner steps of this task
  std::vector<Particle> particles;  // 1 (backprop) or 2 (PES: +eps, -eps)
  torch::Tensor accumulated;        // PES: sum of this worker's perturbations since the restart
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// log(loss) - log(initial), with the loss clamped so a diverging task cannot produce inf.
torch::Tensor meta_term(const torch::Tensor& loss, double log_initial) {
  return at::log(loss.clamp(kMinLoss, kMaxLoss)) - log_initial;
}

/// The meta-loss weight of inner step t (1..horizon): the density (p + 1) x^p integrated over the
/// step's share ((t - 1) / T, t / T] of the horizon, times T, so the weights' mean is exactly 1.
double step_weight(double late_emphasis, int64_t t, int64_t horizon) {
  if (late_emphasis == 0.0) return 1.0;
  const double T = static_cast<double>(horizon);
  return T * (std::pow(t / T, late_emphasis + 1.0) - std::pow((t - 1) / T, late_emphasis + 1.0));
}

/// Runs one truncation of `particle` with `model` and returns the mean of its meta-terms. With
/// `meta_graph` the result is a graph into the model's parameters (truncated back-propagation);
/// without it (PES) only values are computed. The inner gradients always need autograd.
torch::Tensor unroll(LearnedOptimizerModelImpl& model, const Worker& worker, Particle& particle,
                     int64_t steps, bool meta_graph, double late_emphasis) {
  at::AutoGradMode inner_gradients(true);
  const Task& task = *worker.task;
  auto total = at::zeros({});
  if (particle.diverged) return total;
  auto p = particle.params.detach().requires_grad_(true);
  auto state = particle.state;
  auto controller = particle.controller;
  const auto numels = worker.segment_sizes.to(at::kFloat);
  const int64_t segments = worker.segment_sizes.size(0);
  auto loss = task.loss(p, particle.noise);
  for (int64_t u = 0; u < steps; ++u) {
    const auto grad =
        torch::autograd::grad({loss}, {p}, {}, /*retain_graph=*/meta_graph)[0].detach();
    if (!at::isfinite(grad).all().item<bool>() || !std::isfinite(loss.item<double>())) {
      particle.diverged = true;
      break;
    }
    if (!particle.slot_major.empty()) {
      // Values only (PES): the fused step, tensor by tensor, 3x faster than the composite
      // in one measurement (4 iterations on real-data families: 9 s instead of 28 s).
      torch::NoGradGuard no_grad;
      const auto sizes = model.tensor_step_size(controller, particle.t + 1).to(at::kDouble);
      auto flat = p.detach();
      auto sums = at::zeros({segments, detail::kStatistics}, at::kDouble);
      const auto size_of = sizes.accessor<double, 1>();
      std::vector<LearnedOptimizerModelImpl::FusedTensor> tensors;
      for (int64_t i = 0, offset = 0; i < segments; ++i) {
        const int64_t n = particle.slot_major[i].size(1);
        tensors.push_back({flat.narrow(0, offset, n),
                           grad.narrow(0, offset, n),
                           particle.slot_major[i],
                           size_of[i],
                           {}});
        offset += n;
      }
      model.fused_steps_(*model.prepare_fused_step(particle.t + 1), tensors);
      auto sums_of = sums.accessor<double, 2>();
      for (int64_t i = 0; i < segments; ++i) {
        for (int64_t j = 0; j < detail::kStatistics; ++j)
          sums_of[i][j] = tensors[i].result.statistics[j];
      }
      controller = model.next_tensor_state(controller, sums, numels);
    } else {
      at::AutoGradMode meta(meta_graph);
      const auto step_size =
          model.tensor_step_size(controller, particle.t + 1).index_select(0, worker.segment_ids);
      auto result = model.step(grad, p, state, particle.t + 1, step_size);
      const auto next_p = (meta_graph ? p : p.detach()) + result.update;
      const auto sums =
          at::zeros({segments, detail::kStatistics}, at::kDouble)
              .index_add(
                  0, worker.segment_ids,
                  LearnedOptimizerModelImpl::step_statistics(grad, state, next_p).to(at::kDouble));
      controller = model.next_tensor_state(controller, sums, numels);
      if (meta_graph) {
        p = next_p;
        state = result.state;
      } else {
        p = next_p.detach().requires_grad_(true);
        state = result.state.detach();
        controller = controller.detach();
      }
    }
    ++particle.t;
    loss = task.loss(p, particle.noise);
    const auto scored = task.has_validation() ? task.validation_loss(p, particle.noise) : loss;
    total = total + meta_term(meta_graph ? scored : scored.detach(), worker.log_initial) *
                        step_weight(late_emphasis, particle.t, worker.horizon);
  }
  particle.params = p.detach();
  if (state.defined()) particle.state = state.detach();
  particle.controller = controller.detach();
  return total / static_cast<double>(steps);
}

std::vector<torch::Tensor> trainable(LearnedOptimizerModelImpl& model, const std::string& which) {
  TORCH_CHECK(which == "all" || which == "rule" || which == "controller",
              "meta_train: train must be all, rule or controller, got \"", which, "\"");
  std::vector<torch::Tensor> out;
  for (auto& item : model.named_parameters()) {
    if (!item.value().requires_grad()) continue;
    const bool controller = item.key().rfind("step_", 0) == 0;  // step_log_relative, ...
    if (which == "all" || (which == "controller") == controller) out.push_back(item.value());
  }
  return out;
}

/// The horizon of restart `index`: fixed, or drawn log-uniformly in [horizon, horizon_max].
int64_t restart_horizon(const MetaTrainOptions& options, int64_t index) {
  if (options.horizon_max <= options.horizon) return options.horizon;
  auto gen = generator_for(options.seed ^ 0x40A12, index, 0);
  const double u = at::rand({1}, gen, at::kDouble).item<double>();
  const double h =
      std::exp(std::log(double(options.horizon)) +
               u * (std::log(double(options.horizon_max)) - std::log(double(options.horizon))));
  return std::max<int64_t>(1, std::llround(h / double(options.unroll))) * options.unroll;
}

/// The family (an index into options.families) of worker `w` after restart `restart_index`:
/// families in turn, so every restart sees a balanced mix.
size_t family_slot(const MetaTrainOptions& options, int64_t restart_index, int64_t w) {
  return static_cast<size_t>((restart_index * options.workers + w) %
                             static_cast<int64_t>(options.families.size()));
}

/// Which workers each rank runs: (world_size) lists, ascending. Chosen at every restart by
/// longest processing time first: the costliest worker goes to the least loaded rank, a worker's
/// cost being the seconds its family took per iteration when last measured. Only the speed depends
/// on it: a worker computes the same on any rank, and all are added in worker order.
using Assignment = std::vector<std::vector<int64_t>>;
class WorkerPlacement {
 public:
  explicit WorkerPlacement(const MetaTrainOptions& options)
      : options_(options), family_seconds_(options.families.size(), 0.0) {}

  /// The assignment for the tasks of restart `restart_index`. Equal costs (nothing measured yet)
  /// give rank r the workers r, r + world_size, ...
  Assignment assign(int64_t restart_index, int world_size) const {
    double known = 0.0, count = 0.0;  // a family not yet measured costs the mean of the others
    for (const double s : family_seconds_) {
      if (s > 0.0) known += s, ++count;
    }
    std::vector<double> cost(options_.workers);
    for (int64_t w = 0; w < options_.workers; ++w) {
      const double s = family_seconds_[family_slot(options_, restart_index, w)];
      cost[w] = s > 0.0 ? s : count > 0.0 ? known / count : 1.0;
    }
    std::vector<int64_t> order(cost.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return cost[a] > cost[b]; });
    std::vector<double> load(world_size, 0.0);
    Assignment owned(world_size);
    for (const auto w : order) {
      const auto r = std::min_element(load.begin(), load.end()) - load.begin();
      owned[r].push_back(w);
      load[r] += cost[w];
    }
    for (auto& list : owned) std::sort(list.begin(), list.end());
    return owned;
  }

  /// Records how long each worker of the tasks of restart `restart_index` took, (workers) seconds.
  void measured(int64_t restart_index, const torch::Tensor& seconds) {
    std::vector<double> sum(family_seconds_.size(), 0.0), n(family_seconds_.size(), 0.0);
    const auto values = seconds.to(at::kDouble).contiguous();
    for (int64_t w = 0; w < options_.workers; ++w) {
      const auto slot = family_slot(options_, restart_index, w);
      sum[slot] += values.data_ptr<double>()[w];
      n[slot] += 1.0;
    }
    for (size_t f = 0; f < sum.size(); ++f) {
      if (n[f] > 0.0) family_seconds_[f] = sum[f] / n[f];
    }
  }

 private:
  const MetaTrainOptions& options_;
  std::vector<double> family_seconds_;  // per family (0: not measured yet)
};

/// Restarts the workers `owned` by this rank and drops the others' tasks; a worker's task depends
/// only on its index in all workers, never on the rank that runs it.
void restart(std::vector<Worker>& workers, const std::vector<int64_t>& owned,
             const LearnedOptimizerModelImpl& model, const MetaTrainOptions& options,
             int64_t restart_index) {
  const int64_t particles = options.estimator == MetaEstimator::kPES ? 2 : 1;
  for (auto& worker : workers) worker = Worker();
  for (const int64_t w : owned) {
    auto gen = generator_for(options.seed, 1 + restart_index, w);
    const auto family = options.families[family_slot(options, restart_index, w)];
    auto& worker = workers[w];
    worker.task = sample_task(family, gen, options.sampling);
    const auto sizes = worker.task->segments();
    worker.segment_sizes = torch::tensor(sizes, at::kLong);
    worker.segment_ids = at::repeat_interleave(
        at::arange(static_cast<int64_t>(sizes.size()), at::kLong), worker.segment_sizes);
    TORCH_CHECK(worker.segment_ids.size(0) == worker.task->dim(), "meta_train: the segments of ",
                worker.task->name(), " sum to ", worker.segment_ids.size(0), ", not ",
                worker.task->dim());
    const auto start = worker.task->initial(gen);
    worker.log_initial =
        std::log(std::clamp(worker.task->eval_loss(start).item<double>(), kMinLoss, kMaxLoss));
    worker.horizon = restart_horizon(options, restart_index);
    worker.particles.clear();
    const uint64_t noise_seed =
        static_cast<uint64_t>(at::randint(1LL << 62, {1}, gen).item<int64_t>());
    for (int64_t i = 0; i < particles; ++i) {
      Particle particle;
      particle.params = start.clone();
      if (options.estimator == MetaEstimator::kPES && model.fused_supported()) {
        for (const auto n : sizes) {
          particle.slot_major.push_back(model.initial_state(n, start.options()).t().contiguous());
        }
      } else {
        particle.state = model.initial_state(start.size(0), start.options());
      }
      std::vector<torch::Tensor> controllers;
      for (int64_t i = 0, offset = 0; i < static_cast<int64_t>(sizes.size()); offset += sizes[i++])
        controllers.push_back(model.initial_tensor_state(start.narrow(0, offset, sizes[i])));
      particle.controller = at::stack(controllers);
      // Antithetic particles share the noise stream: only the perturbation's sign differs.
      particle.noise = at::make_generator<at::CPUGeneratorImpl>(noise_seed);
      worker.particles.push_back(std::move(particle));
    }
    worker.accumulated = torch::Tensor();
  }
}

/// The whole meta-training state: a checkpoint file, or what rank 0 sends the other ranks.
std::unique_ptr<torch::serialize::OutputArchive> checkpoint_archive(
    LearnedOptimizerModelImpl& model, const torch::optim::Adam& adam, int64_t iteration,
    int64_t restart_index) {
  auto archive = std::make_unique<torch::serialize::OutputArchive>();
  archive->write("iteration", torch::IValue(iteration));
  archive->write("restart", torch::IValue(restart_index));
  torch::serialize::OutputArchive model_archive;
  model.save(model_archive);
  archive->write("model", model_archive);
  torch::serialize::OutputArchive adam_archive;
  adam.save(adam_archive);
  archive->write("adam", adam_archive);
  return archive;
}

void save_checkpoint(const std::string& path, LearnedOptimizerModelImpl& model,
                     const torch::optim::Adam& adam, int64_t iteration, int64_t restart_index) {
  const std::string tmp = path + ".tmp";
  checkpoint_archive(model, adam, iteration, restart_index)->save_to(tmp);
  std::rename(tmp.c_str(), path.c_str());  // never leave a half-written checkpoint
}

/// Reads a checkpoint_archive into `model` and `adam`; returns (iteration, restart index).
std::pair<int64_t, int64_t> read_checkpoint(torch::serialize::InputArchive& archive,
                                            LearnedOptimizerModelImpl& model,
                                            torch::optim::Adam& adam) {
  torch::IValue iteration, restart_index;
  archive.read("iteration", iteration);
  archive.read("restart", restart_index);
  torch::serialize::InputArchive model_archive, adam_archive;
  archive.read("model", model_archive);
  model.load(model_archive);
  archive.read("adam", adam_archive);
  adam.load(adam_archive);
  return {iteration.toInt(), restart_index.toInt()};
}

std::pair<int64_t, int64_t> load_checkpoint(const std::string& path,
                                            LearnedOptimizerModelImpl& model,
                                            torch::optim::Adam& adam) {
  torch::serialize::InputArchive archive;
  archive.load_from(path);
  return read_checkpoint(archive, model, adam);
}

/// Every rank starts from rank 0's state (a fresh or given model, or its checkpoint), sent as one
/// serialized checkpoint: the checkpoint file need only exist on rank 0's machine.
std::pair<int64_t, int64_t> share_starting_state(Communicator& communicator,
                                                 LearnedOptimizerModelImpl& model,
                                                 torch::optim::Adam& adam, int64_t iteration,
                                                 int64_t restart_index) {
  std::ostringstream bytes;
  if (communicator.rank() == 0) {
    checkpoint_archive(model, adam, iteration, restart_index)->save_to(bytes);
  }
  auto size = torch::tensor({static_cast<int64_t>(bytes.str().size())}, at::kLong);
  communicator.broadcast(size);
  auto payload = at::empty({size.item<int64_t>()}, at::kByte);
  if (communicator.rank() == 0)
    std::memcpy(payload.data_ptr(), bytes.str().data(), payload.numel());
  communicator.broadcast(payload);
  if (communicator.rank() == 0) return {iteration, restart_index};
  torch::serialize::InputArchive archive;
  archive.load_from(static_cast<const char*>(payload.data_ptr()), payload.numel());
  return read_checkpoint(archive, model, adam);
}

/// Ranks given different options would silently train different things: each rank's options
/// (those that shape the result) and parameter shapes are compared with rank 0's.
void check_same_options(Communicator& communicator, const MetaTrainOptions& options,
                        const std::vector<torch::Tensor>& params) {
  std::ostringstream text;
  text << meta_estimator_name(options.estimator) << " " << options.train << " "
       << options.iterations << " " << options.workers << " " << options.unroll << " "
       << options.horizon << " " << options.horizon_max << " " << options.meta_lr << " "
       << options.meta_lr_end << " " << options.pes_sigma << " " << options.clip << " "
       << options.late_emphasis << " " << options.seed;
  for (const auto family : options.families) text << " " << task_family_name(family);
  for (const auto& p : params) text << " " << p.sizes();
  // std::hash is the same on every rank running the same build of the program.
  const auto mine = torch::tensor({static_cast<int64_t>(std::hash<std::string>{}(text.str()))});
  const auto all = communicator.allgather(mine);
  for (size_t r = 1; r < all.size(); ++r) {
    TORCH_CHECK(torch::equal(all[r], all[0]), "meta_train: rank ", r,
                " was started with other meta-training options or another rule shape than rank 0 "
                "(rank ",
                communicator.rank(), " has: ", text.str(), "); every rank needs the same flags");
  }
}

/// Every worker's row of contributions in worker order, (workers, columns): this rank's rows
/// (those of its `owned[rank]` workers, in order) and the other ranks', the same matrix on every
/// rank whatever the world size.
torch::Tensor gather_workers(const torch::Tensor& local, const Assignment& owned, int64_t workers,
                             Communicator* communicator) {
  if (communicator == nullptr) return local;  // owned[0]: every worker, in order
  // Gloo's allgather takes equal sizes: every rank sends as many rows as the largest share.
  size_t most = 0;
  for (const auto& list : owned) most = std::max(most, list.size());
  auto padded = at::zeros({static_cast<int64_t>(most), local.size(1)}, local.options());
  padded.narrow(0, 0, local.size(0)).copy_(local);
  const auto shares = communicator->allgather(padded);
  std::vector<torch::Tensor> rows(workers);
  for (size_t r = 0; r < owned.size(); ++r) {
    for (size_t k = 0; k < owned[r].size(); ++k) rows[owned[r][k]] = shares[r][k];
  }
  return at::stack(rows);
}

std::string format_duration(double seconds) {
  const int s = static_cast<int>(seconds + 0.5);
  char buffer[32];
  if (s >= 3600) {
    std::snprintf(buffer, sizeof(buffer), "%dh%02dm", s / 3600, (s / 60) % 60);
  } else {
    std::snprintf(buffer, sizeof(buffer), "%dm%02ds", s / 60, s % 60);
  }
  return buffer;
}

}  // namespace

std::string meta_estimator_name(MetaEstimator estimator) {
  return estimator == MetaEstimator::kPES ? "pes" : "tbptt";
}

MetaEstimator meta_estimator_from_name(const std::string& name) {
  if (name == "pes") return MetaEstimator::kPES;
  if (name == "tbptt") return MetaEstimator::kTruncatedBackprop;
  TORCH_CHECK(false, "unknown meta-gradient estimator \"", name, "\" (expected pes or tbptt)");
}

std::vector<double> meta_train(LearnedOptimizerModel model, const MetaTrainOptions& options,
                               const std::function<void(const MetaProgress&)>& on_iteration) {
  TORCH_CHECK(!options.families.empty(), "meta_train: no task families given");
  TORCH_CHECK(options.iterations > 0, "meta_train: iterations must be positive, got ",
              options.iterations);
  TORCH_CHECK(options.workers > 0, "meta_train: workers must be positive, got ", options.workers);
  TORCH_CHECK(options.unroll > 0, "meta_train: unroll must be positive, got ", options.unroll);
  TORCH_CHECK(options.horizon >= options.unroll && options.horizon % options.unroll == 0,
              "meta_train: horizon must be a positive multiple of unroll (", options.unroll,
              "), got ", options.horizon);
  TORCH_CHECK(options.meta_lr > 0.0, "meta_train: meta_lr must be positive, got ", options.meta_lr);
  TORCH_CHECK(options.meta_lr_end > 0.0 && options.meta_lr_end <= 1.0,
              "meta_train: meta_lr_end must be in (0, 1], got ", options.meta_lr_end);
  TORCH_CHECK(options.pes_sigma > 0.0, "meta_train: pes_sigma must be positive, got ",
              options.pes_sigma);

  TORCH_CHECK(options.late_emphasis >= 0.0 && std::isfinite(options.late_emphasis),
              "meta_train: late_emphasis must be finite and >= 0, got ", options.late_emphasis);
  TORCH_CHECK(options.horizon_max == 0 || options.horizon_max >= options.horizon,
              "meta_train: horizon_max must be 0 or >= horizon (", options.horizon, "), got ",
              options.horizon_max);
  auto params = trainable(*model, options.train);
  torch::optim::Adam adam(params, torch::optim::AdamOptions(options.meta_lr));
  Communicator* const communicator = options.communicator.get();
  const int rank = communicator ? communicator->rank() : 0;
  const int world_size = communicator ? communicator->world_size() : 1;
  TORCH_CHECK(options.workers >= world_size, "meta_train: ", options.workers,
              " workers cannot be shared by ", world_size, " ranks (WORLD_SIZE); give at least ",
              world_size, " workers");
  const bool writes = rank == 0;  // the checkpoint, the CSV and the progress bar
  int64_t iteration = 0, restart_index = 0;
  if (writes && !options.checkpoint.empty() && std::ifstream(options.checkpoint).good()) {
    std::tie(iteration, restart_index) = load_checkpoint(options.checkpoint, *model, adam);
    if (options.progress) {
      std::fprintf(stderr, "meta_train: resumed from %s at iteration %lld\n",
                   options.checkpoint.c_str(), static_cast<long long>(iteration));
    }
  }
  if (communicator) {
    check_same_options(*communicator, options, params);
    std::tie(iteration, restart_index) =
        share_starting_state(*communicator, *model, adam, iteration, restart_index);
  }
  // A worker's row of contributions: [meta-loss, seconds it took, meta-gradient (P)].
  constexpr int64_t kLoss = 0, kSeconds = 1, kGradient = 2;
  int64_t parameter_count = 0;
  for (const auto& p : params) parameter_count += p.numel();
  // Closed on every exit, also when a callback or a task throws.
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> csv_file(nullptr, &std::fclose);
  if (writes && !options.csv.empty()) {
    const bool fresh = iteration == 0 || !std::ifstream(options.csv).good();
    csv_file.reset(std::fopen(options.csv.c_str(), fresh ? "w" : "a"));
    TORCH_CHECK(csv_file != nullptr, "meta_train: cannot write the CSV log ", options.csv);
    if (fresh) std::fprintf(csv_file.get(), "iteration,meta_loss,average,seconds\n");
  }
  std::FILE* csv = csv_file.get();

  int64_t truncations_left = 0;  // of the current tasks; 0: restart first (also after a resume)
  std::vector<Worker> workers(options.workers);
  auto scratch = std::dynamic_pointer_cast<LearnedOptimizerModelImpl>(model->clone());
  auto scratch_params = trainable(*scratch, options.train);
  std::vector<double> history;
  std::deque<double> window;
  const auto started = std::chrono::steady_clock::now();
  const int64_t first = iteration;
  // Seconds in gather_workers (waiting for the slowest rank, then the transfer) and bytes received.
  struct {
    double total = 0.0, least = INFINITY, bytes = 0.0;
  } gathering;
  WorkerPlacement placement(options);
  Assignment owned;

  for (; iteration < options.iterations; ++iteration) {
    if (truncations_left == 0) {
      if (writes && !options.checkpoint.empty() && iteration > first) {
        save_checkpoint(options.checkpoint, *model, adam, iteration, restart_index);
      }
      owned = placement.assign(restart_index, world_size);
      restart(workers, owned[rank], *model, options, restart_index);
      truncations_left = restart_horizon(options, restart_index) / options.unroll;
      ++restart_index;
    }
    --truncations_left;
    // Half-cosine decay from meta_lr to meta_lr * meta_lr_end; a function of the iteration only, so
    // a resumed run follows the same schedule.
    const double fraction =
        static_cast<double>(iteration) / static_cast<double>(options.iterations);
    const double decay =
        options.meta_lr_end + (1.0 - options.meta_lr_end) * 0.5 * (1.0 + std::cos(M_PI * fraction));
    for (auto& group : adam.param_groups()) {
      static_cast<torch::optim::AdamOptions&>(group.options()).lr(options.meta_lr * decay);
    }
    // Row k: the contribution of this rank's k-th worker, in double. Kept per worker so that every
    // world size adds the same rows in the same order.
    const auto& mine = owned[rank];
    auto local =
        at::zeros({static_cast<int64_t>(mine.size()), kGradient + parameter_count}, at::kDouble);
    if (options.estimator == MetaEstimator::kTruncatedBackprop) {
      for (size_t k = 0; k < mine.size(); ++k) {
        const auto worker_start = std::chrono::steady_clock::now();
        auto& worker = workers[mine[k]];
        auto row = local[k];
        const auto loss = unroll(*model, worker, worker.particles[0], options.unroll,
                                 /*meta_graph=*/true, options.late_emphasis);
        row[kLoss].fill_(loss.item<double>());
        if (loss.requires_grad()) {  // else diverged: no graph, no gradient
          const auto grads = torch::autograd::grad({loss}, params, {}, /*retain_graph=*/false,
                                                   /*create_graph=*/false, /*allow_unused=*/true);
          for (size_t i = 0, offset = kGradient; i < params.size(); offset += params[i++].numel()) {
            if (grads[i].defined())
              row.narrow(0, offset, params[i].numel()).copy_(grads[i].reshape(-1));
          }
        }
        row[kSeconds].fill_(seconds_since(worker_start));
      }
    } else {
      torch::NoGradGuard no_grad;
      const auto theta = torch::cat([&] {
        std::vector<torch::Tensor> flat;
        for (auto& p : params) flat.push_back(p.detach().reshape(-1));
        return flat;
      }());
      for (size_t k = 0; k < mine.size(); ++k) {
        const auto worker_start = std::chrono::steady_clock::now();
        const int64_t w = mine[k];
        auto& worker = workers[w];
        auto gen = generator_for(options.seed ^ 0x5EED, iteration, w);
        const auto eps = at::randn(theta.sizes(), gen) * options.pes_sigma;
        worker.accumulated = worker.accumulated.defined() ? worker.accumulated + eps : eps;
        double losses[2];
        for (int sign = 0; sign < 2; ++sign) {
          const auto perturbed = theta + (sign == 0 ? eps : -eps);
          int64_t offset = 0;
          for (auto& p : scratch_params) {
            p.copy_(perturbed.narrow(0, offset, p.numel()).view(p.sizes()));
            offset += p.numel();
          }
          losses[sign] = unroll(*scratch, worker, worker.particles[sign], options.unroll,
                                /*meta_graph=*/false, options.late_emphasis)
                             .item<double>();
        }
        auto row = local[k];
        row[kLoss].fill_(0.5 * (losses[0] + losses[1]));
        row.narrow(0, kGradient, parameter_count)
            .copy_(worker.accumulated.to(at::kDouble) *
                   ((losses[0] - losses[1]) / (2.0 * options.pes_sigma * options.pes_sigma)));
        row[kSeconds].fill_(seconds_since(worker_start));
      }
    }
    // The mean over all workers, added in worker order (the same on every rank).
    const auto gather_start = std::chrono::steady_clock::now();
    const auto rows = gather_workers(local, owned, options.workers, communicator);
    const double gather_seconds = seconds_since(gather_start);
    gathering.total += gather_seconds;
    gathering.least = std::min(gathering.least, gather_seconds);
    size_t most = 0;
    for (const auto& list : owned) most = std::max(most, list.size());
    gathering.bytes += static_cast<double>(world_size * most * rows.size(1) * sizeof(double));
    auto mean = rows[0].clone();
    for (int64_t w = 1; w < options.workers; ++w) mean += rows[w];
    mean /= static_cast<double>(options.workers);
    const double meta_loss = mean[kLoss].item<double>();
    placement.measured(restart_index - 1, rows.select(1, kSeconds));
    for (size_t i = 0, offset = kGradient; i < params.size(); offset += params[i++].numel()) {
      params[i].mutable_grad() =
          mean.narrow(0, offset, params[i].numel()).view(params[i].sizes()).to(params[i].dtype());
    }
    // A non-finite meta-gradient (a task blew up inside the graph) skips this outer step.
    bool finite = std::isfinite(meta_loss);
    for (auto& p : params) {
      if (p.grad().defined() && !at::isfinite(p.grad()).all().item<bool>()) finite = false;
    }
    if (finite) {
      torch::nn::utils::clip_grad_norm_(params, options.clip);
      adam.step();
    }

    history.push_back(meta_loss);
    window.push_back(meta_loss);
    if (window.size() > 20) window.pop_front();
    MetaProgress progress;
    progress.iteration = iteration + 1;
    progress.iterations = options.iterations;
    progress.meta_loss = meta_loss;
    for (double v : window) progress.average += v / static_cast<double>(window.size());
    progress.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (csv) {
      std::fprintf(csv, "%lld,%.6f,%.6f,%.2f\n", static_cast<long long>(progress.iteration),
                   meta_loss, progress.average, progress.seconds);
      std::fflush(csv);
    }
    if (writes && options.progress) {
      const double done = static_cast<double>(progress.iteration - first);
      const double eta =
          progress.seconds / done * static_cast<double>(options.iterations - progress.iteration);
      const int width = 30;
      const int filled = static_cast<int>(width * progress.iteration / options.iterations);
      std::fprintf(stderr,
                   "\r[%.*s%*s] %lld/%lld  meta-loss %+.3f (avg %+.3f)  %s elapsed, ETA %s   ",
                   filled, "==============================", width - filled, "",
                   static_cast<long long>(progress.iteration),
                   static_cast<long long>(options.iterations), meta_loss, progress.average,
                   format_duration(progress.seconds).c_str(), format_duration(eta).c_str());
    }
    if (on_iteration) on_iteration(progress);
  }
  if (writes && options.progress) std::fprintf(stderr, "\n");
  if (communicator && writes && options.progress && iteration > first) {
    // What a user needs to judge the scaling: the payload and the time spent in the collective.
    const double iterations_run = static_cast<double>(iteration - first);
    std::fprintf(stderr,
                 "meta_train: %d ranks; each iteration gathered %.0f bytes on average (rows of 2 + "
                 "%lld doubles for %lld workers, every rank sending as many rows as the largest "
                 "share); the gather, with the wait for the slowest rank, took %.3f ms on "
                 "average, %.3f ms at least\n",
                 world_size, gathering.bytes / iterations_run,
                 static_cast<long long>(parameter_count), static_cast<long long>(options.workers),
                 1e3 * gathering.total / iterations_run, 1e3 * gathering.least);
  }
  // No rank leaves (closing its connections) while another may still be reading the last gather.
  if (communicator) communicator->barrier();
  // The final state is a restart boundary only when the last tasks just ended; otherwise the next
  // run (more iterations) restarts tasks here, as a run that had not stopped would not: say so.
  if (writes && !options.checkpoint.empty()) {
    save_checkpoint(options.checkpoint, *model, adam, iteration,
                    restart_index - (truncations_left > 0 ? 1 : 0));
  }
  return history;
}

}  // namespace flt::optim
