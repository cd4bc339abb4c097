#include "flt/metatrain/meta_train.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/adam.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <fstream>
#include <memory>

#include "flt/detail/progress.h"
#include "flt/detail/random.h"
#include "learned_step_fused.h"
#include "meta_train_state.h"
#include "truncated_unroll.h"

namespace flt::metatrain {

using namespace flt::optim;
namespace {

using detail::Assignment;
using detail::family_slot;
using detail::GatherCost;
using detail::kGradient;
using detail::kLoss;
using detail::kSeconds;
using detail::numel;
using detail::Worker;
using detail::WorkerPlacement;

std::vector<torch::Tensor> trainable(LearnedOptimizerModelImpl& model, MetaTrainTarget target) {
  std::vector<torch::Tensor> out;
  for (auto& item : model.named_parameters()) {
    if (!item.value().requires_grad()) continue;
    const bool controller = item.key().rfind("step_", 0) == 0;  // step_log_relative, ...
    if (target == MetaTrainTarget::kAll || (target == MetaTrainTarget::kController) == controller)
      out.push_back(item.value());
  }
  return out;
}

/// The horizon of restart `index`: fixed, or drawn log-uniformly in [horizon, horizon_max].
int64_t restart_horizon(const MetaTrainOptions& options, int64_t index) {
  if (options.horizon_max() <= options.horizon()) return options.horizon();
  auto gen = detail::generator_for(options.seed() ^ 0x40A12, index, 0);
  const double h = flt::detail::log_uniform(gen, static_cast<double>(options.horizon()),
                                            static_cast<double>(options.horizon_max()));
  return std::max<int64_t>(1, std::llround(h / double(options.unroll()))) * options.unroll();
}

/// Restarts the workers `owned` by this rank and drops the others' tasks; a worker's task depends
/// only on its index in all workers, never on the rank that runs it.
void restart(std::vector<Worker>& workers, const std::vector<int64_t>& owned,
             const LearnedOptimizerModelImpl& model, const MetaTrainOptions& options,
             int64_t restart_index) {
  const int64_t particles = options.estimator() == MetaEstimator::kPES ? 2 : 1;
  for (auto& worker : workers) worker = Worker();
  for (const int64_t w : owned) {
    auto gen = detail::generator_for(options.seed(), 1 + restart_index, w);
    const auto family = options.families()[family_slot(options, restart_index, w)];
    auto& worker = workers[w];
    worker.task = sample_task(family, gen, options.sampling());
    const auto sizes = worker.task->segments();
    worker.segment_sizes = torch::tensor(sizes, at::kLong);
    worker.segment_ids = at::repeat_interleave(
        at::arange(static_cast<int64_t>(sizes.size()), at::kLong), worker.segment_sizes);
    TORCH_CHECK(worker.segment_ids.size(0) == worker.task->dim(), "meta_train: the segments of ",
                worker.task->name(), " sum to ", worker.segment_ids.size(0), ", not ",
                worker.task->dim());
    const auto start = worker.task->initial(gen);
    worker.log_initial = detail::clamped_log(worker.task->eval_loss(start).item<double>());
    worker.horizon = restart_horizon(options, restart_index);
    worker.particles.clear();
    const uint64_t noise_seed =
        static_cast<uint64_t>(at::randint(1LL << 62, {1}, gen).item<int64_t>());
    for (int64_t i = 0; i < particles; ++i) {
      detail::Particle particle;
      particle.params = start.clone();
      if (options.estimator() == MetaEstimator::kPES &&
          optim::detail::LearnedModelInternals::fused_supported(model)) {
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

void check_options(const MetaTrainOptions& options) {
  TORCH_CHECK(!options.families().empty(), "meta_train: no task families given");
  TORCH_CHECK(options.iterations() > 0, "meta_train: iterations must be positive, got ",
              options.iterations());
  TORCH_CHECK(options.workers() > 0, "meta_train: workers must be positive, got ",
              options.workers());
  TORCH_CHECK(options.unroll() > 0, "meta_train: unroll must be positive, got ", options.unroll());
  TORCH_CHECK(options.horizon() >= options.unroll() && options.horizon() % options.unroll() == 0,
              "meta_train: horizon must be a positive multiple of unroll (", options.unroll(),
              "), got ", options.horizon());
  TORCH_CHECK(options.meta_lr() > 0.0, "meta_train: meta_lr must be positive, got ",
              options.meta_lr());
  TORCH_CHECK(options.meta_lr_end() > 0.0 && options.meta_lr_end() <= 1.0,
              "meta_train: meta_lr_end must be in (0, 1], got ", options.meta_lr_end());
  TORCH_CHECK(options.pes_sigma() > 0.0, "meta_train: pes_sigma must be positive, got ",
              options.pes_sigma());
  TORCH_CHECK(options.late_emphasis() >= 0.0 && std::isfinite(options.late_emphasis()),
              "meta_train: late_emphasis must be finite and >= 0, got ", options.late_emphasis());
  TORCH_CHECK(options.horizon_max() == 0 || options.horizon_max() >= options.horizon(),
              "meta_train: horizon_max must be 0 or >= horizon (", options.horizon(), "), got ",
              options.horizon_max());
}

/// Where this run starts, (iteration, restart index): rank 0's checkpoint when there is one, else
/// the beginning; every rank then takes rank 0's state.
std::pair<int64_t, int64_t> starting_point(LearnedOptimizerModelImpl& model,
                                           torch::optim::Adam& adam,
                                           const MetaTrainOptions& options,
                                           const std::vector<torch::Tensor>& params) {
  Communicator* const communicator = options.communicator().get();
  const bool writes = communicator == nullptr || communicator->rank() == 0;
  std::pair<int64_t, int64_t> start{0, 0};
  if (writes && !options.checkpoint().empty() && std::ifstream(options.checkpoint()).good()) {
    start = detail::load_checkpoint(options.checkpoint(), model, adam);
    if (options.progress()) {
      std::fprintf(stderr, "meta_train: resumed from %s at iteration %lld\n",
                   options.checkpoint().c_str(), static_cast<long long>(start.first));
    }
  }
  if (communicator) {
    detail::check_same_options(*communicator, options, params);
    start = detail::share_starting_state(*communicator, model, adam, start.first, start.second);
  }
  return start;
}

/// Half-cosine decay from meta_lr to meta_lr * meta_lr_end; a function of the iteration only, so a
/// resumed run follows the same schedule.
void set_meta_lr(torch::optim::Adam& adam, const MetaTrainOptions& options, int64_t iteration) {
  const double fraction =
      static_cast<double>(iteration) / static_cast<double>(options.iterations());
  const double decay = options.meta_lr_end() +
                       (1.0 - options.meta_lr_end()) * 0.5 * (1.0 + std::cos(M_PI * fraction));
  for (auto& group : adam.param_groups()) {
    static_cast<torch::optim::AdamOptions&>(group.options()).lr(options.meta_lr() * decay);
  }
}

/// The mean of the workers' rows, added in worker order (the same on every rank). -> (columns)
torch::Tensor mean_of_rows(const torch::Tensor& rows, int64_t workers) {
  auto mean = rows[0].clone();
  for (int64_t w = 1; w < workers; ++w) mean += rows[w];
  mean /= static_cast<double>(workers);
  return mean;
}

/// The outer Adam step on the mean meta-gradient (in `mean` after kGradient), its norm clipped. A
/// non-finite meta-loss or meta-gradient (a task blew up inside the graph) skips the step.
void outer_step(torch::optim::Adam& adam, const std::vector<torch::Tensor>& params,
                const torch::Tensor& mean, double meta_loss, double clip) {
  for (size_t i = 0, offset = kGradient; i < params.size(); offset += params[i++].numel()) {
    auto p = params[i];
    p.mutable_grad() = mean.narrow(0, offset, p.numel()).view(p.sizes()).to(p.dtype());
  }
  bool finite = std::isfinite(meta_loss);
  for (const auto& p : params) {
    if (p.grad().defined() && !at::isfinite(p.grad()).all().item<bool>()) finite = false;
  }
  if (finite) {
    torch::nn::utils::clip_grad_norm_(params, clip);
    adam.step();
  }
}

/// What each iteration leaves: the meta-losses returned, the running mean over 20 iterations, and
/// on rank 0 the CSV row (appended on resume) and the progress bar.
class MetaLog {
 public:
  MetaLog(const MetaTrainOptions& options, bool writes, int64_t first)
      : iterations_(options.iterations()),
        bar_("meta-train", writes && options.progress(),
             static_cast<double>(first) / static_cast<double>(options.iterations())) {
    if (!writes || options.csv().empty()) return;
    const bool fresh = first == 0 || !std::ifstream(options.csv()).good();
    csv_.reset(std::fopen(options.csv().c_str(), fresh ? "w" : "a"));
    TORCH_CHECK(csv_ != nullptr, "meta_train: cannot write the CSV log ", options.csv());
    if (fresh) std::fprintf(csv_.get(), "iteration,meta_loss,average,seconds\n");
  }

  /// Records iteration `done` (1-based) of the run.
  MetaProgress record(int64_t done, double meta_loss) {
    history_.push_back(meta_loss);
    window_.push_back(meta_loss);
    if (window_.size() > 20) window_.pop_front();
    MetaProgress progress;
    progress.iteration = done;
    progress.iterations = iterations_;
    progress.meta_loss = meta_loss;
    for (double v : window_) progress.average += v / static_cast<double>(window_.size());
    progress.seconds = bar_.seconds();
    if (csv_) {
      std::fprintf(csv_.get(), "%lld,%.6f,%.6f,%.2f\n", static_cast<long long>(done), meta_loss,
                   progress.average, progress.seconds);
      std::fflush(csv_.get());
    }
    char figures[64];
    std::snprintf(figures, sizeof(figures), "%lld/%lld  meta-loss %+.3f (avg %+.3f)",
                  static_cast<long long>(done), static_cast<long long>(iterations_), meta_loss,
                  progress.average);
    bar_.update(static_cast<double>(done) / static_cast<double>(iterations_), figures);
    return progress;
  }

  void finish() { bar_.finish(); }
  const std::vector<double>& history() const { return history_; }

 private:
  int64_t iterations_;
  std::vector<double> history_;
  std::deque<double> window_;
  flt::detail::ProgressBar bar_;
  // Closed on every exit, also when a callback or a task throws.
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> csv_{nullptr, &std::fclose};
};

}  // namespace

std::string meta_estimator_name(MetaEstimator estimator) {
  return estimator == MetaEstimator::kPES ? "pes" : "tbptt";
}

MetaEstimator meta_estimator_from_name(const std::string& name) {
  if (name == "pes") return MetaEstimator::kPES;
  if (name == "tbptt") return MetaEstimator::kTruncatedBackprop;
  TORCH_CHECK(false, "unknown meta-gradient estimator \"", name, "\" (expected pes or tbptt)");
}

std::string meta_train_target_name(MetaTrainTarget target) {
  switch (target) {
    case MetaTrainTarget::kAll: return "all";
    case MetaTrainTarget::kRule: return "rule";
    case MetaTrainTarget::kController: return "controller";
  }
  return "?";
}

MetaTrainTarget meta_train_target_from_name(const std::string& name) {
  for (auto target : {MetaTrainTarget::kAll, MetaTrainTarget::kRule, MetaTrainTarget::kController})
    if (meta_train_target_name(target) == name) return target;
  TORCH_CHECK(false, "unknown meta-training target \"", name,
              "\" (expected all, rule or controller)");
}

std::vector<double> meta_train(LearnedOptimizerModel model, const MetaTrainOptions& options,
                               const std::function<void(const MetaProgress&)>& on_iteration) {
  check_options(options);
  auto params = trainable(*model, options.target());
  torch::optim::Adam adam(params, torch::optim::AdamOptions(options.meta_lr()));
  Communicator* const communicator = options.communicator().get();
  const int rank = communicator ? communicator->rank() : 0;
  const int world_size = communicator ? communicator->world_size() : 1;
  TORCH_CHECK(options.workers() >= world_size, "meta_train: ", options.workers(),
              " workers cannot be shared by ", world_size, " ranks (WORLD_SIZE); give at least ",
              world_size, " workers");
  const bool writes = rank == 0;  // the checkpoint, the CSV and the progress bar
  auto [iteration, restart_index] = starting_point(*model, adam, options, params);
  const int64_t first = iteration;
  MetaLog log(options, writes, first);

  int64_t truncations_left = 0;  // of the current tasks; 0: restart first (also after a resume)
  std::vector<Worker> workers(options.workers());
  auto scratch = std::dynamic_pointer_cast<LearnedOptimizerModelImpl>(model->clone());
  const auto scratch_params = trainable(*scratch, options.target());
  GatherCost gathering;
  WorkerPlacement placement(options);
  Assignment owned;
  for (; iteration < options.iterations(); ++iteration) {
    if (truncations_left == 0) {
      // A restart boundary: the checkpoint resumes exactly from here.
      if (writes && !options.checkpoint().empty() && iteration > first) {
        detail::save_checkpoint(options.checkpoint(), *model, adam, iteration, restart_index);
      }
      owned = placement.assign(restart_index, world_size);
      restart(workers, owned[rank], *model, options, restart_index);
      truncations_left = restart_horizon(options, restart_index) / options.unroll();
      ++restart_index;
    }
    --truncations_left;
    set_meta_lr(adam, options, iteration);
    // Rows are kept per worker, so that every world size adds the same rows in the same order.
    const auto local =
        options.estimator() == MetaEstimator::kTruncatedBackprop
            ? detail::estimate_by_backprop(*model, workers, owned[rank], params, options)
            : detail::estimate_by_pes(*scratch, scratch_params, workers, owned[rank], params,
                                      options, iteration);
    const auto rows =
        detail::gather_workers(local, owned, options.workers(), communicator, gathering);
    const auto mean = mean_of_rows(rows, options.workers());
    const double meta_loss = mean[kLoss].item<double>();
    placement.measured(restart_index - 1, rows.select(1, kSeconds));
    outer_step(adam, params, mean, meta_loss, options.clip());
    const auto progress = log.record(iteration + 1, meta_loss);
    if (on_iteration) on_iteration(progress);
  }
  log.finish();
  if (communicator && writes && options.progress() && iteration > first) {
    gathering.print(world_size, numel(params), options.workers(),
                    static_cast<double>(iteration - first));
  }
  // No rank leaves (closing its connections) while another may still be reading the last gather.
  if (communicator) communicator->barrier();
  // The final state is a restart boundary only when the last tasks just ended; otherwise the next
  // run (more iterations) restarts tasks here, as a run that had not stopped would not: say so.
  if (writes && !options.checkpoint().empty()) {
    detail::save_checkpoint(options.checkpoint(), *model, adam, iteration,
                            restart_index - (truncations_left > 0 ? 1 : 0));
  }
  return log.history();
}

}  // namespace flt::metatrain
