#pragma once
// Held-out real training runs: ordinary LibTorch minibatch loops (zero_grad, forward, backward,
// step) over real `torch::nn` models and real data (datasets.h), scored by the loss on held-out
// data. The evaluation a user would run before trusting an optimizer: the architectures and data
// sets here are not those meta-training uses (a split of families, not just of seeds).
//
//   auto runs = flt::harness::held_out_training_runs();
//   auto curve = flt::harness::run_training(runs[0], /*seed=*/0, [](auto params) {
//     return std::make_unique<torch::optim::Adam>(std::move(params));
//   });
//
// `evaluate_training_runs` compares optimizers on such runs: baselines get their learning rate
// tuned per run on `learning_rate_grid()` with tuning seeds disjoint from the evaluation seeds.

#include <torch/nn/module.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "flt/harness/evaluate.h"
#include "flt/metatrain/datasets.h"
#include "flt/optim/mnemosyne.h"

namespace flt::harness {

/// A model under training: the module whose `parameters()` the optimizer gets, and its forward.
struct TrainableModel {
  std::shared_ptr<torch::nn::Module> module;
  /// Supervised: a batch of inputs (B, ...) -> outputs (B, classes) or (B, 1).
  /// Language model: tokens (B, L) int64 -> logits (B, L, vocab).
  std::function<torch::Tensor(const torch::Tensor&)> forward;
};

/// Builds a fresh model; called after LibTorch's global generator was seeded with `seed`, so the
/// initial weights are a function of the seed.
using ModelBuilder = std::function<TrainableModel(uint64_t seed)>;

enum class LossKind {
  kCrossEntropy,      ///< mean cross-entropy of logits against class ids (or next tokens)
  kMeanSquaredError,  ///< mean squared error against regression targets
};

/// One training run: a model family, its data and its loop.
struct TrainingRun {
  std::string name;  ///< e.g. "fmnist-cnn"
  std::string
      family;  ///< architecture / data, no commas (a CSV field), e.g. "MLP 4-32-3 ReLU / iris"
  ModelBuilder build;
  /// Supervised data (used when `corpus.vocab` is 0).
  metatrain::data::Split split;
  /// Language-model data: windows of `sequence_length` + 1 tokens of the stream.
  metatrain::data::TextCorpus corpus;
  int64_t sequence_length = 32;  ///< LM only
  int64_t batch = 32;
  int64_t steps = 1000;
  /// Held-out loss every this many steps (and at step 0 and the last step).
  int64_t eval_every = 50;
  /// Held-out examples scored (the first ones of the held-out part; for an LM, consecutive
  /// windows); 0 = all.
  int64_t eval_examples = 0;
  LossKind loss = LossKind::kCrossEntropy;

  bool language_model() const { return corpus.vocab > 0; }
};

/// Held-out loss above this multiple of its value at step 0, or a non-finite training loss, counts
/// as divergence: the run stops there.
constexpr double kDivergenceFactor = 100.0;

/// What one run measured, at steps 0, eval_every, 2 eval_every, ..., steps.
struct TrainingCurve {
  std::vector<int64_t> steps;
  std::vector<double> held_out;  ///< held-out loss (+inf from divergence on)
  /// Held-out error rate (wrong arg-max class or next token); NaN for regression and from
  /// divergence on.
  std::vector<double> held_out_error;
  std::vector<double> param_norm;  ///< sum over parameter tensors of their L2 norms
  std::vector<double> train_loss;  ///< mean minibatch loss since the previous point (NaN at 0)
  bool diverged = false;
  int64_t diverged_at = -1;  ///< the step whose loss diverged
  double seconds = 0.0;
  /// The last held-out loss, and the lowest along the run.
  double final_loss() const { return held_out.empty() ? INFINITY : held_out.back(); }
  double best_loss() const;
};

/// Trains a fresh model of `run` (weights from `seed`) with the optimizer that `factory` makes over
/// `module->parameters()`, in an ordinary loop: zero_grad, forward, loss, backward, step. The
/// minibatch order depends on `seed` only, so every optimizer sees the same batches. `schedule`
/// scales each group's lr as the loop goes; `evaluation` wraps each held-out evaluation (its
/// BatchNorm batches come from a stream of their own, so the training batches stay the same). A
/// diverging run stops and is reported, never throws.
TrainingCurve run_training(const TrainingRun& run, uint64_t seed, const OptimizerFactory& factory,
                           Schedule schedule = Schedule::kConstant,
                           const EvaluationHook& evaluation = {});

/// The names of the held-out suite's 18 runs, those that need python3-sklearn included: three
/// character models of a licence text (text-gru, text-lstm, text-transformer); long full-batch
/// linear models on sklearn's small sets (iris-, wine-, breast_cancer-, digits-logreg-full,
/// diabetes-linreg-full); minibatch tanh and ReLU MLPs, a CNN and a logistic regression on them
/// (iris-mlp-tanh, wine-mlp, breast_cancer-mlp, breast_cancer-mlp-tanh, digits-mlp,
/// digits-mlp-tanh, digits-cnn, digits-logreg, diabetes-mlp); and a deep tanh regression of a
/// synthetic function (deep-tanh-regression). None of their data sets is used in meta-training.
std::vector<std::string> held_out_training_run_names();

/// The held-out suite (those of `only` when it is not empty; an unknown name throws). Every run
/// subsamples its data to stay cheap on one core. `steps_scale` multiplies the step budgets and
/// evaluation intervals (0.25 for a quick look). The tabular runs need Debian's python3-sklearn;
/// without it they are left out and listed, with the reason, in `skipped`.
std::vector<TrainingRun> held_out_training_runs(double steps_scale = 1.0,
                                                const std::vector<std::string>& only = {},
                                                std::vector<std::string>* skipped = nullptr);

/// The development runs' 12 names: runs of the held-out suite's kinds on other data, for choosing
/// a design before the held-out suite tests it once: three character models of Python source
/// (python-gru, python-lstm, python-transformer); full-batch linear models (fmnist-logreg-full,
/// ill-conditioned-linreg-full); minibatch MLPs, a CNN, a logistic regression and an autoencoder
/// on Fashion-MNIST images from index 10,000 on (fmnist-mlp, fmnist-mlp-tanh, fmnist-cnn,
/// fmnist-logreg, fmnist-autoencoder); and MLPs on two synthetic sets (spirals-mlp-tanh,
/// teacher-mlp). Their data sets are read by neither the held-out suite nor checks from outside
/// the project (datasets.h, python_text; training_run_catalogue.cpp, the generators).
std::vector<std::string> development_training_run_names();

/// The development runs (those of `only` when it is not empty; an unknown name throws), their
/// steps scaled as held_out_training_runs' are.
std::vector<TrainingRun> development_training_runs(double steps_scale = 1.0,
                                                   const std::vector<std::string>& only = {});

/// One small, fast run (a tanh MLP on 2000 Fashion-MNIST images, 100 steps) for smoke tests; not
/// part of the held-out suite.
TrainingRun quick_training_run();

/// An optimizer under test on training runs.
struct RunContender {
  std::string name;
  std::function<OptimizerFactory(double lr)> make;
  bool tune = false;  ///< tune lr on learning_rate_grid() (false: use `fixed_lr`)
  double fixed_lr = 1e-3;
  Schedule schedule = Schedule::kConstant;
  EvaluationHook evaluation;
};

/// The standard contenders: `adam-1e-3` (what users type), `adam-cosine` and `adamw-cosine`
/// (weight decay 1e-2), both with cosine decay to 0 and lr tuned per run.
std::vector<RunContender> baseline_contenders();

/// The baselines that claim to need no tuning, at their authors' defaults (baseline_optimizers.h),
/// lr fixed: `prodigy` (lr 1), `prodigy-cosine` (lr 1 with the cosine decay its authors
/// recommend), `schedule-free-adamw` (lr 0.0025, evaluated at x with BatchNorm statistics
/// recomputed there) and `schedule-free-adamw-warmup` (the same with a linear warm-up over the
/// first 5% of the steps).
std::vector<RunContender> untuned_baseline_contenders();

/// Which of the two learned optimizers a harness builds: CoordinateMnemosyne (a memory per
/// coordinate) or ScheduleMnemosyne (a learned per-tensor schedule).
enum class MnemosyneDesign { kCoordinateMemory, kTensorSchedule };
/// "coordinate-memory", "tensor-schedule"; the inverse throws naming an unknown name.
std::string design_name(MnemosyneDesign design);
MnemosyneDesign design_from_name(const std::string& name);

/// The schedule a contender's weights name: "untrained" the untrained schedule (with the hand
/// rule), kWithoutHandRule the untrained schedule of version 0.1 (the hand rule off: Adam with a
/// step of 2% of each tensor's RMS), else a weights file (a bad one throws here, before any run);
/// empty: null (the optimizer's default).
inline constexpr const char* kWithoutHandRule = "untrained-without-hand-rule";
optim::LearnedSchedule schedule_from_spec(const std::string& weights);

/// A learned optimizer of `design` untuned (lr 1, constant) with the weights file `weights`
/// (empty: the shipped ones; "untrained": the rule with its learned part zeroed;
/// kWithoutHandRule for tensor-schedule: schedule_from_spec), used as a user
/// would: `CoordinateMnemosyne(params, CoordinateMnemosyneOptions().weights(weights))` or the same
/// with ScheduleMnemosyne.
RunContender mnemosyne_contender(const std::string& name = "mnemosyne",
                                 const std::string& weights = "",
                                 MnemosyneDesign design = MnemosyneDesign::kCoordinateMemory);

struct RunEvalOptions {
  int64_t eval_seeds = 5;    ///< seeds 0.. for the reported numbers
  int64_t tuning_seeds = 2;  ///< seeds 10000.. used only to choose learning rates
  /// CSV of tuning results (every grid point's median final held-out loss). Read when it exists
  /// and its rows match a run (name, signature, contender, tuning seeds); written with the new
  /// results. Empty: no cache.
  std::string tuning_cache;
  bool progress = true;  ///< one-line progress bar with ETA on stderr
};

/// Relative difference of median final held-out losses below which two optimizers tie on a run.
constexpr double kRunTieTolerance = 0.01;
/// A run "rises late" when its final held-out loss exceeds its best along the run by this factor.
constexpr double kLateRiseFactor = 1.10;

/// One (run, contender) result.
struct RunRow {
  std::string task, family, contender;
  int64_t steps = 0;
  double lr = 0.0;  ///< tuned (or fixed) learning rate
  bool tuned_from_cache = false;
  double median_final = 0.0;  ///< median over eval seeds of the final held-out loss
  double median_best = 0.0;   ///< median over eval seeds of the best held-out loss along the run
  /// Median over eval seeds of the final held-out error rate (a diverged seed counts 1); NaN for
  /// regression.
  double median_final_error = NAN;
  int64_t late_rise = 0;  ///< seeds whose final exceeds their best by more than 10%
  int64_t diverged = 0;   ///< seeds that diverged
  double seconds = 0.0;   ///< mean wall time of one evaluation run
  std::vector<int64_t> curve_steps;
  std::vector<double> median_curve;       ///< median held-out loss at each curve step
  std::vector<double> median_param_norm;  ///< median parameter-norm sum at each curve step
};

/// A string that changes when anything that affects a run's tuning changes (steps, batch, data
/// sizes, evaluation subset): the tuning cache's key next to the name.
std::string run_signature(const TrainingRun& run);

/// Runs every contender on every run (tuning first where asked), in order; rows ordered by run,
/// then contender.
std::vector<RunRow> evaluate_training_runs(const std::vector<TrainingRun>& runs,
                                           const std::vector<RunContender>& contenders,
                                           const RunEvalOptions& options = {});

/// Win / tie / loss of `a` against `b` by median final held-out loss (tie within
/// kRunTieTolerance relative): +1, 0, -1.
int compare_finals(double a, double b);

/// VeLO's speed-up figure on one run: the steps `baseline` needs (first point of its median curve
/// at or below `target`'s median final loss) divided by `target`'s steps. Returns +inf when the
/// baseline never gets there within its budget.
double speedup(const RunRow& target, const RunRow& baseline);

}  // namespace flt::harness
