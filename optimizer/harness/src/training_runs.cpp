#include "flt/harness/training_runs.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>

#include "flt/detail/progress.h"
#include "flt/detail/statistics.h"
#include "flt/harness/baseline_optimizers.h"
#include "flt/optim/mnemosyne.h"

namespace flt::harness {

using namespace flt::optim;
using namespace flt::metatrain;

namespace {

constexpr uint64_t kEvalSeedBase = 0;
constexpr uint64_t kTuningSeedBase = 10000;
// The minibatch order's generator: another stream than the weights' (seeded with the seed itself).
constexpr uint64_t kBatchStream = 0x5eed0bad;
// The batches that re-estimate BatchNorm statistics for an evaluation hook: a stream of their own,
// so the training batches stay those every optimizer sees.
constexpr uint64_t kStatisticsStream = 0xba7c40b5;

using flt::detail::median;

// outputs: (B, C) or (B, L, C) logits, or (B, 1) predictions.
torch::Tensor compute_loss(LossKind kind, const torch::Tensor& outputs,
                           const torch::Tensor& targets) {
  namespace F = torch::nn::functional;
  if (kind == LossKind::kCrossEntropy) {
    return F::cross_entropy(outputs.reshape({-1, outputs.size(-1)}), targets.reshape(-1));
  }
  return F::mse_loss(outputs, targets);
}

/// The held-out loss and, for class (or next-token) targets, the error rate.
struct HeldOutScore {
  double loss = 0.0;
  double error = NAN;  ///< fraction of wrong arg-max predictions; NaN for regression
};

/// Mean held-out loss (and error rate) over the evaluation subset, in chunks so memory stays
/// bounded.
HeldOutScore held_out_score(const TrainingRun& run, const TrainableModel& model) {
  torch::NoGradGuard no_grad;
  torch::Tensor inputs, targets;
  if (run.language_model()) {
    // Consecutive windows of L + 1 tokens (overlapping by one: the last target is the next input).
    const int64_t L = run.sequence_length;
    int64_t windows = (run.corpus.test.size(0) - 1) / L;
    if (run.eval_examples > 0) windows = std::min(windows, run.eval_examples);
    const auto starts = torch::arange(windows, torch::kInt64) * L;
    const auto index = starts.unsqueeze(1) + torch::arange(L + 1, torch::kInt64);
    const auto tokens = run.corpus.test.index({index});  // (W, L + 1)
    inputs = tokens.slice(1, 0, L);
    targets = tokens.slice(1, 1, L + 1);
  } else {
    int64_t n = run.split.test_x.size(0);
    if (run.eval_examples > 0) n = std::min(n, run.eval_examples);
    inputs = run.split.test_x.slice(0, 0, n);
    targets = run.split.test_y.slice(0, 0, n);
  }
  const int64_t chunk = run.language_model() ? 256 : 1000;
  const bool classes = run.loss == LossKind::kCrossEntropy;
  double total = 0.0, wrong = 0.0;
  const int64_t n = inputs.size(0);
  for (int64_t i = 0; i < n; i += chunk) {
    const int64_t j = std::min(n, i + chunk);
    const auto outputs = model.forward(inputs.slice(0, i, j));
    const auto chunk_targets = targets.slice(0, i, j);
    total +=
        compute_loss(run.loss, outputs, chunk_targets).item<double>() * static_cast<double>(j - i);
    if (classes) {
      // Mean over the chunk's predictions (one per example, or per token of a window).
      wrong += outputs.argmax(-1).ne(chunk_targets).to(torch::kDouble).mean().item<double>() *
               static_cast<double>(j - i);
    }
  }
  HeldOutScore score;
  score.loss = total / static_cast<double>(n);
  if (classes) score.error = wrong / static_cast<double>(n);
  return score;
}

/// `run.batch` windows of L + 1 tokens at random starts of the training stream: inputs (B, L),
/// targets (B, L), the next tokens.
std::pair<torch::Tensor, torch::Tensor> random_windows(const TrainingRun& run, at::Generator& gen) {
  const int64_t L = run.sequence_length;
  const auto starts = torch::randint(run.corpus.train.size(0) - L, {run.batch}, gen, torch::kInt64);
  const auto tokens =
      run.corpus.train.index({starts.unsqueeze(1) + torch::arange(L + 1, torch::kInt64)});
  return {tokens.slice(1, 0, L), tokens.slice(1, 1, L + 1)};
}

/// Recomputes every BatchNorm layer's running statistics at the current parameters: reset, then
/// a cumulative average over `batches` training batches drawn from `gen` (train mode, no
/// gradient), as torch.optim.swa_utils.update_bn does for an average of weights. Without
/// BatchNorm layers it does nothing.
void recompute_batch_norm(const TrainingRun& run, const TrainableModel& model, int64_t batches,
                          at::Generator& gen) {
  std::vector<std::function<void()>> restore;  // each layer's momentum, put back after
  const auto take = [&](auto* layer) {
    if (layer == nullptr || !layer->options.track_running_stats()) return;
    const auto momentum = layer->options.momentum();
    layer->reset_running_stats();
    layer->options.momentum(c10::nullopt);  // the cumulative average of the batches' statistics
    restore.push_back([layer, momentum] { layer->options.momentum(momentum); });
  };
  for (const auto& module : model.module->modules()) {
    take(dynamic_cast<torch::nn::BatchNorm1dImpl*>(module.get()));
    take(dynamic_cast<torch::nn::BatchNorm2dImpl*>(module.get()));
    take(dynamic_cast<torch::nn::BatchNorm3dImpl*>(module.get()));
  }
  if (restore.empty()) return;
  torch::NoGradGuard no_grad;
  model.module->train();
  for (int64_t b = 0; b < batches; ++b) {
    if (run.language_model()) {
      model.forward(random_windows(run, gen).first);
    } else {
      const int64_t n = run.split.train_x.size(0);
      const auto index = torch::randint(n, {std::min(run.batch, n)}, gen, torch::kInt64);
      model.forward(run.split.train_x.index_select(0, index));
    }
  }
  for (const auto& undo : restore) undo();
}

double parameter_norm_sum(const std::vector<torch::Tensor>& params) {
  torch::NoGradGuard no_grad;
  double sum = 0.0;
  for (const auto& p : params) sum += p.norm().item<double>();
  return sum;
}

void validate(const TrainingRun& run) {
  TORCH_CHECK(run.build != nullptr, "run_training(", run.name, "): no model builder");
  TORCH_CHECK(run.steps >= 1 && run.batch >= 1 && run.eval_every >= 1, "run_training(", run.name,
              "): steps, batch and eval_every must be >= 1, got ", run.steps, ", ", run.batch, ", ",
              run.eval_every);
  if (run.language_model()) {
    TORCH_CHECK(run.loss == LossKind::kCrossEntropy, "run_training(", run.name,
                "): a language model is trained with cross-entropy");
    TORCH_CHECK(run.sequence_length >= 1 && run.corpus.train.size(0) > run.sequence_length + 1 &&
                    run.corpus.test.size(0) > run.sequence_length + 1,
                "run_training(", run.name, "): sequence_length ", run.sequence_length,
                " does not fit the corpus");
  } else {
    TORCH_CHECK(run.split.train_x.defined() && run.split.train_x.size(0) > 0, "run_training(",
                run.name, "): no training data");
    TORCH_CHECK((run.loss == LossKind::kCrossEntropy) == (run.split.classes > 0), "run_training(",
                run.name,
                "): cross-entropy needs class targets, mean squared error regression "
                "targets (split \"",
                run.split.name, "\" has ", run.split.classes, " classes)");
  }
}

// ---- tuning cache -------------------------------------------------------------------------------

using CacheKey =
    std::tuple<std::string, std::string, std::string, int64_t>;  // task, sig, who, seeds
using GridScores = std::map<double, double>;                     // lr -> median final

std::map<CacheKey, GridScores> read_cache(const std::string& path) {
  std::map<CacheKey, GridScores> cache;
  std::ifstream file(path);
  if (!file) return cache;
  std::string line;
  std::getline(file, line);  // header
  while (std::getline(file, line)) {
    std::vector<std::string> fields;
    std::stringstream stream(line);
    std::string field;
    while (std::getline(stream, field, ',')) fields.push_back(field);
    if (fields.size() != 6) continue;
    const CacheKey key{fields[0], fields[1], fields[2], std::stoll(fields[3])};
    cache[key][std::stod(fields[4])] = std::stod(fields[5]);
  }
  return cache;
}

void write_cache(const std::string& path, const std::map<CacheKey, GridScores>& cache) {
  const std::string temporary = path + ".tmp";
  std::FILE* file = std::fopen(temporary.c_str(), "w");
  TORCH_CHECK(file != nullptr, "evaluate_training_runs: cannot write the tuning cache ", temporary);
  std::fprintf(file, "task,signature,contender,tuning_seeds,lr,median_final_held_out\n");
  for (const auto& [key, scores] : cache) {
    for (const auto& [lr, score] : scores) {
      std::fprintf(file, "%s,%s,%s,%lld,%.17g,%.17g\n", std::get<0>(key).c_str(),
                   std::get<1>(key).c_str(), std::get<2>(key).c_str(),
                   static_cast<long long>(std::get<3>(key)), lr, score);
    }
  }
  std::fclose(file);
  std::rename(temporary.c_str(), path.c_str());
}

/// The grid's learning rates all present (compared to 1e-9 relative: the file holds %.17g).
bool complete(const GridScores& scores) {
  for (double lr : learning_rate_grid()) {
    const auto near = scores.lower_bound(lr * (1 - 1e-9));
    if (near == scores.end() || near->first > lr * (1 + 1e-9)) return false;
  }
  return true;
}

/// Lowest median final; the smaller lr on a tie.
double best_lr(const GridScores& scores) {
  double best = INFINITY, lr = learning_rate_grid().front();
  for (const auto& [candidate, score] : scores) {
    if (score < best) best = score, lr = candidate;
  }
  return lr;
}

}  // namespace

double TrainingCurve::best_loss() const {
  double best = INFINITY;
  for (double v : held_out) {
    if (std::isfinite(v)) best = std::min(best, v);
  }
  return best;
}

TrainingCurve run_training(const TrainingRun& run, uint64_t seed, const OptimizerFactory& factory,
                           Schedule schedule, const EvaluationHook& evaluation) {
  validate(run);
  const auto started = std::chrono::steady_clock::now();
  torch::manual_seed(seed);
  const TrainableModel model = run.build(seed);
  model.module->train();
  const auto params = model.module->parameters();
  auto optimizer = factory(params);
  std::vector<double> base_lr;
  for (auto& group : optimizer->param_groups()) base_lr.push_back(group.options().get_lr());

  auto batches = at::make_generator<at::CPUGeneratorImpl>(kBatchStream + seed);
  auto statistics_batches = at::make_generator<at::CPUGeneratorImpl>(kStatisticsStream + seed);
  torch::Tensor order;  // supervised: this epoch's permutation
  int64_t position = 0;
  const auto next_batch = [&]() -> std::pair<torch::Tensor, torch::Tensor> {
    if (run.language_model()) return random_windows(run, batches);
    const int64_t n = run.split.train_x.size(0);
    const int64_t batch = std::min(run.batch, n);
    if (!order.defined() || position + batch > n) {
      order = torch::randperm(n, batches, torch::kInt64);
      position = 0;
    }
    const auto index = order.slice(0, position, position + batch);
    position += batch;
    return {run.split.train_x.index_select(0, index), run.split.train_y.index_select(0, index)};
  };

  TrainingCurve curve;
  const auto record = [&](int64_t step, double train_loss) {
    curve.steps.push_back(step);
    curve.train_loss.push_back(train_loss);
    if (curve.diverged) {
      curve.held_out.push_back(INFINITY);
      curve.held_out_error.push_back(NAN);
      curve.param_norm.push_back(INFINITY);
      return;
    }
    // At the evaluation point: the loss and the norm of the weights the optimizer would return.
    if (evaluation.before) evaluation.before(*optimizer);
    if (evaluation.batch_norm_batches > 0) {
      recompute_batch_norm(run, model, evaluation.batch_norm_batches, statistics_batches);
    }
    model.module->eval();
    const HeldOutScore score = held_out_score(run, model);
    double loss = score.loss;
    model.module->train();
    const double norm = parameter_norm_sum(params);
    if (evaluation.after) evaluation.after(*optimizer);
    if (!curve.held_out.empty() &&
        !(std::isfinite(loss) && loss <= kDivergenceFactor * curve.held_out.front())) {
      curve.diverged = true;
      curve.diverged_at = step;
      loss = INFINITY;
    }
    curve.held_out.push_back(loss);
    curve.held_out_error.push_back(std::isfinite(loss) ? score.error : NAN);
    curve.param_norm.push_back(std::isfinite(norm) ? norm : INFINITY);
  };
  record(0, NAN);

  double interval_sum = 0.0;
  int64_t interval_count = 0;
  for (int64_t t = 0; t < run.steps; ++t) {
    if (!curve.diverged) {
      if (schedule != Schedule::kConstant) {
        const double factor = schedule_factor(schedule, t, run.steps);
        auto& groups = optimizer->param_groups();
        for (size_t g = 0; g < groups.size(); ++g) groups[g].options().set_lr(base_lr[g] * factor);
      }
      const auto [x, y] = next_batch();
      optimizer->zero_grad();
      const auto loss = compute_loss(run.loss, model.forward(x), y);
      loss.backward();
      optimizer->step();
      const double value = loss.item<double>();
      if (!std::isfinite(value)) {
        curve.diverged = true;
        curve.diverged_at = t;
      } else {
        interval_sum += value;
        ++interval_count;
      }
    }
    const int64_t done = t + 1;
    if (done % run.eval_every == 0 || done == run.steps) {
      record(done, interval_count > 0 ? interval_sum / static_cast<double>(interval_count) : NAN);
      interval_sum = 0.0;
      interval_count = 0;
    }
  }
  curve.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return curve;
}

std::vector<RunContender> baseline_contenders() {
  RunContender adam;
  adam.name = "adam-1e-3";
  adam.fixed_lr = 1e-3;
  adam.make = [](double lr) -> OptimizerFactory {
    return [lr](std::vector<torch::Tensor> p) {
      return std::make_unique<torch::optim::Adam>(std::move(p), torch::optim::AdamOptions(lr));
    };
  };
  RunContender adam_cosine = adam;
  adam_cosine.name = "adam-cosine";
  adam_cosine.tune = true;
  adam_cosine.schedule = Schedule::kCosine;
  RunContender adamw_cosine;
  adamw_cosine.name = "adamw-cosine";
  adamw_cosine.tune = true;
  adamw_cosine.schedule = Schedule::kCosine;
  adamw_cosine.make = [](double lr) -> OptimizerFactory {
    return [lr](std::vector<torch::Tensor> p) {
      return std::make_unique<torch::optim::AdamW>(
          std::move(p), torch::optim::AdamWOptions(lr).weight_decay(1e-2));
    };
  };
  return {adam, adam_cosine, adamw_cosine};
}

namespace {
/// A contender at its authors' fixed lr: `Optimizer(params, Options(lr))`.
template <typename Optimizer, typename Options>
RunContender untuned_contender(const char* name, double lr) {
  RunContender c;
  c.name = name;
  c.fixed_lr = lr;
  c.make = [](double rate) -> OptimizerFactory {
    return [rate](std::vector<torch::Tensor> p) {
      return std::make_unique<Optimizer>(std::move(p), Options(rate));
    };
  };
  return c;
}
}  // namespace

std::vector<RunContender> untuned_baseline_contenders() {
  RunContender prodigy = untuned_contender<Prodigy, ProdigyOptions>("prodigy", 1.0);
  RunContender prodigy_cosine = prodigy;
  prodigy_cosine.name = "prodigy-cosine";
  prodigy_cosine.schedule = Schedule::kCosine;
  RunContender schedule_free =
      untuned_contender<ScheduleFreeAdamW, ScheduleFreeAdamWOptions>("schedule-free-adamw", 0.0025);
  // Judged at x, the average, with BatchNorm statistics recomputed there (its authors' direction;
  // 10 batches, about the window of BatchNorm's own running average at momentum 0.1).
  schedule_free.evaluation.before = [](torch::optim::Optimizer& o) {
    dynamic_cast<ScheduleFreeAdamW&>(o).eval();
  };
  schedule_free.evaluation.after = [](torch::optim::Optimizer& o) {
    dynamic_cast<ScheduleFreeAdamW&>(o).train();
  };
  schedule_free.evaluation.batch_norm_batches = 10;
  // The loop's warm-up is ScheduleFreeAdamWOptions::warmup_steps(5% of the run): the same gamma_t
  // (test WarmupByTheLoop_IsTheOptimizersWarmup), applied by the loop because a factory does not
  // see the run's length.
  RunContender schedule_free_warmup = schedule_free;
  schedule_free_warmup.name = "schedule-free-adamw-warmup";
  schedule_free_warmup.schedule = Schedule::kWarmup;
  return {prodigy, prodigy_cosine, schedule_free, schedule_free_warmup};
}

std::string design_name(MnemosyneDesign design) {
  return design == MnemosyneDesign::kTensorSchedule ? "tensor-schedule" : "coordinate-memory";
}

MnemosyneDesign design_from_name(const std::string& name) {
  if (name == "coordinate-memory") return MnemosyneDesign::kCoordinateMemory;
  if (name == "tensor-schedule") return MnemosyneDesign::kTensorSchedule;
  TORCH_CHECK(false, "unknown Mnemosyne design \"", name,
              "\" (expected coordinate-memory or tensor-schedule)");
}

LearnedSchedule schedule_from_spec(const std::string& weights) {
  if (weights.empty()) return nullptr;
  if (weights == "untrained") return LearnedSchedule(LearnedScheduleOptions());
  if (weights == kWithoutHandRule)
    return LearnedSchedule(LearnedScheduleOptions().hand_rule(false));
  return load_schedule(weights);
}

RunContender mnemosyne_contender(const std::string& name, const std::string& weights,
                                 MnemosyneDesign design) {
  RunContender c;
  c.name = name;
  c.fixed_lr = 1.0;
  const bool untrained = weights == "untrained";
  const std::string file = untrained ? "" : weights;
  // The schedule design takes its schedule from the spec, one copy per optimizer.
  const LearnedSchedule schedule =
      design == MnemosyneDesign::kTensorSchedule ? schedule_from_spec(weights) : nullptr;
  c.make = [file, untrained, design, schedule](double lr) -> OptimizerFactory {
    return [lr, file, untrained, design,
            schedule](std::vector<torch::Tensor> p) -> std::unique_ptr<torch::optim::Optimizer> {
      if (design == MnemosyneDesign::kTensorSchedule) {
        ScheduleMnemosyneOptions options(lr);
        if (!schedule) return std::make_unique<ScheduleMnemosyne>(std::move(p), options);
        return std::make_unique<ScheduleMnemosyne>(
            std::move(p), options,
            LearnedSchedule(std::dynamic_pointer_cast<LearnedScheduleImpl>(schedule->clone())));
      }
      return std::make_unique<CoordinateMnemosyne>(
          std::move(p), CoordinateMnemosyneOptions(lr).weights(file).untrained(untrained));
    };
  };
  return c;
}

std::string run_signature(const TrainingRun& run) {
  std::ostringstream s;
  s << "steps=" << run.steps << ";batch=" << run.batch << ";eval=" << run.eval_every << "/"
    << run.eval_examples;
  if (run.language_model()) {
    s << ";L=" << run.sequence_length << ";tokens=" << run.corpus.train.size(0) << "/"
      << run.corpus.test.size(0);
  } else {
    s << ";n=" << run.split.train_x.size(0) << "/" << run.split.test_x.size(0);
  }
  return s.str();
}

std::vector<RunRow> evaluate_training_runs(const std::vector<TrainingRun>& runs,
                                           const std::vector<RunContender>& contenders,
                                           const RunEvalOptions& options) {
  TORCH_CHECK(!contenders.empty(), "evaluate_training_runs: no optimizers given");
  TORCH_CHECK(options.eval_seeds > 0 && options.tuning_seeds > 0,
              "evaluate_training_runs: eval_seeds and tuning_seeds must be positive, got ",
              options.eval_seeds, " and ", options.tuning_seeds);
  auto cache = options.tuning_cache.empty() ? std::map<CacheKey, GridScores>{}
                                            : read_cache(options.tuning_cache);
  const auto key = [&](const TrainingRun& run, const RunContender& c) {
    return CacheKey{run.name, run_signature(run), c.name, options.tuning_seeds};
  };
  const auto grid = learning_rate_grid();

  int64_t total = 0;  // run-steps still to do
  for (const auto& run : runs) {
    for (const auto& c : contenders) {
      total += options.eval_seeds * run.steps;
      const auto found = cache.find(key(run, c));
      if (c.tune && (found == cache.end() || !complete(found->second))) {
        total += static_cast<int64_t>(grid.size()) * options.tuning_seeds * run.steps;
      }
    }
  }
  flt::detail::ProgressBar progress("training runs", options.progress);
  int64_t done = 0;
  const auto advance = [&](int64_t steps, const std::string& what) {
    done += steps;
    progress.update(static_cast<double>(done) / static_cast<double>(std::max<int64_t>(1, total)),
                    what);
  };

  std::vector<RunRow> rows;
  for (const auto& run : runs) {
    for (const auto& contender : contenders) {
      RunRow row;
      row.task = run.name;
      row.family = run.family;
      row.contender = contender.name;
      row.steps = run.steps;
      row.lr = contender.fixed_lr;
      if (contender.tune) {
        auto& scores = cache[key(run, contender)];
        row.tuned_from_cache = complete(scores);
        if (!row.tuned_from_cache) {
          scores.clear();
          for (double lr : grid) {
            std::vector<double> finals;
            for (int64_t s = 0; s < options.tuning_seeds; ++s) {
              const auto curve = run_training(run, kTuningSeedBase + s, contender.make(lr),
                                              contender.schedule, contender.evaluation);
              finals.push_back(curve.final_loss());
              char what[96];
              std::snprintf(what, sizeof(what), "%s %s tune lr %.2g", run.name.c_str(),
                            contender.name.c_str(), lr);
              advance(run.steps, what);
            }
            scores[lr] = median(finals);
          }
          if (!options.tuning_cache.empty()) write_cache(options.tuning_cache, cache);
        }
        row.lr = best_lr(scores);
      }
      std::vector<TrainingCurve> curves;
      std::vector<double> finals, bests, errors;
      for (int64_t s = 0; s < options.eval_seeds; ++s) {
        curves.push_back(run_training(run, kEvalSeedBase + s, contender.make(row.lr),
                                      contender.schedule, contender.evaluation));
        const auto& curve = curves.back();
        finals.push_back(curve.final_loss());
        bests.push_back(curve.best_loss());
        // A diverged seed counts as all wrong, as its loss counts as +inf.
        const bool classes = run.loss == LossKind::kCrossEntropy;
        errors.push_back(curve.diverged && classes ? 1.0 : curve.held_out_error.back());
        row.diverged += curve.diverged ? 1 : 0;
        row.late_rise += curve.final_loss() > kLateRiseFactor * curve.best_loss() ? 1 : 0;
        row.seconds += curve.seconds / static_cast<double>(options.eval_seeds);
        advance(run.steps, run.name + " " + contender.name + " seed " + std::to_string(s));
      }
      row.median_final = median(finals);
      row.median_best = median(bests);
      row.median_final_error = median(errors);
      row.curve_steps = curves.front().steps;
      for (size_t i = 0; i < row.curve_steps.size(); ++i) {
        std::vector<double> loss, norm;
        for (const auto& curve : curves) {
          loss.push_back(curve.held_out[i]);
          norm.push_back(curve.param_norm[i]);
        }
        row.median_curve.push_back(median(loss));
        row.median_param_norm.push_back(median(norm));
      }
      rows.push_back(std::move(row));
    }
  }
  progress.finish();
  return rows;
}

int compare_finals(double a, double b) {
  if (a == b) return 0;  // also two diverged (inf) runs
  if (!std::isfinite(a) || !std::isfinite(b)) return std::isfinite(a) ? 1 : -1;
  if (std::abs(a - b) <= kRunTieTolerance * std::max(std::abs(a), std::abs(b))) return 0;
  return a < b ? 1 : -1;
}

double speedup(const RunRow& target, const RunRow& baseline) {
  for (size_t i = 0; i < baseline.median_curve.size(); ++i) {
    if (baseline.median_curve[i] <= target.median_final) {
      return static_cast<double>(baseline.curve_steps[i]) / static_cast<double>(target.steps);
    }
  }
  return INFINITY;
}

}  // namespace flt::harness
