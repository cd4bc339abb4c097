#pragma once
// Task families for meta-training and evaluating learned optimizers: differentiable problems over
// one flat parameter vector, each instance drawn at random from its family (docs/design.md
// section 5).

#include <ATen/core/Generator.h>
#include <torch/types.h>

#include <memory>
#include <string>
#include <vector>

namespace flt::metatrain {

enum class TaskFamily {
  kRastrigin,          ///< Rastrigin-like: random dimension, shift, rotation, scale, gradient noise
  kAckley,             ///< Ackley with random dimension and shift
  kRosenbrock,         ///< Rosenbrock with random dimension
  kNoisyQuadratic,     ///< 1/2 sum_i lambda_i (x_i - c_i)^2, lambda log-uniform, noisy gradients
  kMLPClassification,  ///< small MLP, cross-entropy on a synthetic teacher's labels, mini-batches
  kMLPRegression,      ///< small MLP, mean squared error to a noisy synthetic teacher, mini-batches
  kTransformerLM,      ///< one-layer causal attention LM on synthetic sequences, mini-batches
  // Real data (Debian packages; datasets.h), scored on held-out data:
  kFashionMLP,       ///< ReLU MLP on a random subset of Fashion-MNIST, random width and batch
  kFashionLogistic,  ///< logistic regression on a random subset of Fashion-MNIST
  kTextGRU,          ///< character-level GRU language model on English text (Debian's licences)
  /// Synthetic tabular problems shaped like users' small runs (rows, features, separability,
  /// label noise, class imbalance, raw feature scales; linear, logistic or MLP; full batch or
  /// mini-batches), each with a held-out split that scores it.
  kTabular,
};
std::string task_family_name(TaskFamily family);
TaskFamily task_family_from_name(const std::string& name);
std::vector<TaskFamily> all_task_families();
/// The families the shipped weights were meta-trained on, the meta-training options' default (every
/// family but kTabular, added after them: the shipped recipe still reproduces its files).
std::vector<TaskFamily> shipped_recipe_families();
/// The families on real data (the last three above).
std::vector<TaskFamily> real_task_families();

/// One problem instance. Parameters are a flat vector of `dim()` entries.
class Task {
 public:
  virtual ~Task() = default;
  /// e.g. "rastrigin(7)"
  virtual std::string name() const = 0;
  virtual TaskFamily family() const = 0;
  virtual int64_t dim() const = 0;
  /// A starting point drawn from the task's initial distribution. -> (dim)
  virtual torch::Tensor initial(at::Generator generator) const = 0;
  /// The training loss (noisy or on a mini-batch drawn from `generator`). params: (dim) -> ()
  virtual torch::Tensor loss(const torch::Tensor& params, at::Generator generator) const = 0;
  /// The noise-free loss (whole data set) used to score optimizers. params: (dim) -> ()
  virtual torch::Tensor eval_loss(const torch::Tensor& params) const = 0;
  /// Sizes of the parameter tensors the flat vector is made of, in order (they sum to dim()): the
  /// learned rule keeps one step-size controller per tensor, as it does for a model's parameters.
  virtual std::vector<int64_t> segments() const { return {dim()}; }
  /// Whether the task has held-out data; meta-training then scores the rule by validation_loss.
  virtual bool has_validation() const { return false; }
  /// A held-out mini-batch loss (tasks with held-out data; the training loss otherwise).
  virtual torch::Tensor validation_loss(const torch::Tensor& params, at::Generator gen) const {
    return loss(params, gen);
  }
};

/// Ranges from which task instances are drawn; held-out evaluation uses other seeds and dimensions.
struct TaskSampling {
  int64_t min_dim = 2;  ///< landscapes: dimension drawn uniformly in [min_dim, max_dim]
  int64_t max_dim = 10;
  double noise = 0.1;   ///< landscapes: gradient-noise std relative to the task's scale (0 = none)
  int64_t hidden = 16;  ///< MLP hidden width
  int64_t batch = 32;   ///< mini-batch size
};

/// A random instance of `family`, fully determined by `generator`'s state.
std::unique_ptr<Task> sample_task(TaskFamily family, at::Generator generator,
                                  const TaskSampling& sampling = {});

/// A landscape task of exactly `dims` dimensions (held-out evaluation: Rastrigin 30-D, ...).
std::unique_ptr<Task> sample_task_with_dim(TaskFamily family, int64_t dims, at::Generator generator,
                                           const TaskSampling& sampling = {});

}  // namespace flt::metatrain
