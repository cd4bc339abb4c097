#pragma once
// The batched task engine of meta-training: K instances of one task family (their own data,
// initial weights and parameter rescalings) trained as one computation. The instances are tiny,
// as Celo2's are: the engine pays where a single instance's step is mostly per-operation overhead
// (docs/benchmarks.md, "Meta-training's inner steps"). Every parameter tensor is
// stacked along a leading instance dimension, the forward pass is batched over it (batched
// matmul, grouped convolutions, batched recurrent steps), one backward gives every instance's
// gradient (the instances share no weights, so the gradient of the summed loss is each one's own),
// and the learned rule steps all instances at once, each row (instance, tensor) with the per-
// tensor statistics it would have alone (batched_run.h).
//
//   auto task = make_batched_task(BatchedFamily::kTabular, /*shape_seed=*/7, seeds);   // K seeds
//   auto params = task->initial();                 // each (K, ...)
//   auto loss = task->loss(params, key);           // (K), the mini-batch that `key` picks
//
// An instance is a function of (family, shape seed, its own seed) alone: instance(k) is the same
// problem with K = 1, which is how the per-instance loop and the tests check the engine.

#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace flt::metatrain {

/// Families shaped like users' small runs; their data never include Fashion-MNIST's first 10,000
/// training images nor its test images (the outside checks use those).
enum class BatchedFamily {
  /// An MLP (ReLU, one hidden layer of 32-256) or a linear / logistic model on synthetic tabular
  /// data: 128-2048 rows, 2-32 features, standardised or (2 shapes in 5) on raw scales
  /// (10^U(-1, 1)), classification (2-6 classes, label noise, imbalance) or regression;
  /// mini-batches
  /// of 16-64 rows (7 shapes in 10) or the full batch.
  kTabular,
  /// A small CNN (3x3 convolutions of 2-4 then 4-8 channels, the second with stride 2, global
  /// pooling, a linear classifier) on 256-1024 8x8 Fashion-MNIST images from training index 10,000
  /// on, mini-batches of 16-32.
  kImageConv,
  /// An MLP classifier (64 -> 128-1024 ReLU units -> 10) on the same 8x8 images, mini-batches of
  /// 16-64: the wide models users fit, which tune to smaller rates than narrow ones.
  kImageMLP,
  /// An MLP autoencoder (64 -> 4-16 -> 64, tanh) on the same 8x8 images, mean squared error,
  /// mini-batches of 16-64.
  kAutoencoder,
  /// A character-level GRU (hidden 8-16) on this repository's sources and docs, sequences of 8-16
  /// characters in mini-batches of 4-8 (one batched recurrent step per position), cross-entropy of
  /// the next character.
  kCharGRU,
  /// Low-rank matrix completion: U V^T (64-256 rows and columns, rank 4-16, factors drawn with
  /// variance g / rank, g log-uniform over 0.1-1) fitted to the observed 20-80% of a noisy low-rank
  /// matrix, 256-1024 cells a step (the observed ones scored), the other entries scoring it.
  kFactorization,
};
std::string batched_family_name(BatchedFamily family);
BatchedFamily batched_family_from_name(const std::string& name);
std::vector<BatchedFamily> all_batched_families();

/// K instances of one family, all of one shape (widths, rows, lengths come from the shape seed),
/// each with its own data, initial point and parameter rescaling (from its own seed).
class BatchedTask {
 public:
  virtual ~BatchedTask() = default;
  /// e.g. "tabular_mlp(512x12, 3 classes, hidden 32, batch 64) x 64"
  std::string name() const;
  BatchedFamily family() const { return family_; }
  int64_t instances() const { return static_cast<int64_t>(seeds_.size()); }
  uint64_t shape_seed() const { return shape_seed_; }
  const std::vector<uint64_t>& seeds() const { return seeds_; }
  /// Whether the parameter-rescaling augmentation is on.
  bool rescaled() const { return rescale_; }
  /// Shapes of one instance's parameter tensors, in order.
  const std::vector<std::vector<int64_t>>& shapes() const { return shapes_; }
  /// Coordinates of one instance.
  int64_t instance_dim() const;

  /// The instances' initial parameters, each (K, shape...) float32.
  std::vector<torch::Tensor> initial() const;
  /// Each instance's training loss on the mini-batch `key` picks (for instance k, the rows depend
  /// only on its seed and the key: the same for any K). params: each (K, shape...) -> (K)
  torch::Tensor loss(const std::vector<torch::Tensor>& params, uint64_t key) const;
  /// Each instance's held-out loss. -> (K)
  torch::Tensor validation_loss(const std::vector<torch::Tensor>& params) const;
  /// Instance k alone (K = 1), the same problem.
  std::unique_ptr<BatchedTask> instance(int64_t k) const;

 protected:
  BatchedTask(BatchedFamily family, uint64_t shape_seed, std::vector<uint64_t> seeds, bool rescale);
  /// Adds a parameter tensor of one instance's shape; returns its index.
  int64_t add_parameter(std::vector<int64_t> shape);
  /// The family's shape description (name() adds " x K").
  virtual std::string describe() const = 0;
  /// The instances' weights before rescaling, each (K, shape...).
  virtual std::vector<torch::Tensor> initial_weights() const = 0;
  /// The family's loss on the mini-batch `key` picks, or on the held-out data (`key` unused), from
  /// the weights (the parameters with their rescaling undone). -> (K)
  virtual torch::Tensor objective(const std::vector<torch::Tensor>& weights, uint64_t key,
                                  bool held_out) const = 0;
  /// For each instance, `batch` row indices into its `rows` training rows: a function of the
  /// instance's seed and `key` alone. -> (K, batch) int64
  torch::Tensor batch_rows(uint64_t key, int64_t batch, int64_t rows) const;

 private:
  std::vector<torch::Tensor> weights_of(const std::vector<torch::Tensor>& params) const;

  BatchedFamily family_;
  uint64_t shape_seed_;
  std::vector<uint64_t> seeds_;
  bool rescale_;
  std::vector<std::vector<int64_t>> shapes_;
  /// Per tensor, each instance's rescaling (K) (parameter = scale x weight): log-uniform over
  /// [1e-3, 1e3] when rescaling is on (Celo2's augmentation: a rule must not depend on a tensor's
  /// units), else 1. Made on first use.
  mutable std::vector<torch::Tensor> scales_;
};

/// K instances of `family`, one per seed (`rescale`: the parameter-rescaling augmentation on).
std::unique_ptr<BatchedTask> make_batched_task(BatchedFamily family, uint64_t shape_seed,
                                               std::vector<uint64_t> seeds, bool rescale = false);

}  // namespace flt::metatrain
