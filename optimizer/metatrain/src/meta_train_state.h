#pragma once
// What meta-training (meta_train.cpp) keeps and shares beyond one iteration: checkpoints (a file,
// or rank 0's state sent to the other ranks), the options every rank must agree on, which rank
// runs which worker, and the gather of the workers' rows. Internal to flt_metatrain.

#include <torch/optim/adam.h>

#include <chrono>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "flt/metatrain/distributed.h"
#include "flt/metatrain/meta_train.h"
#include "flt/optim/learned_model.h"

namespace flt::metatrain::detail {

/// The family (an index into options.families()) of worker `w` after restart `restart_index`:
/// families in turn, so every restart sees a balanced mix.
size_t family_slot(const MetaTrainOptions& options, int64_t restart_index, int64_t w);

/// Which workers each rank runs: (world_size) lists, ascending. Chosen at every restart by
/// longest processing time first: the costliest worker goes to the least loaded rank, a worker's
/// cost being the seconds its family took per iteration when last measured. Only the speed depends
/// on it: a worker computes the same on any rank, and all are added in worker order.
using Assignment = std::vector<std::vector<int64_t>>;
class WorkerPlacement {
 public:
  explicit WorkerPlacement(const MetaTrainOptions& options)
      : options_(options), family_seconds_(options.families().size(), 0.0) {}

  /// The assignment for the tasks of restart `restart_index`. Equal costs (nothing measured yet)
  /// give rank r the workers r, r + world_size, ...
  Assignment assign(int64_t restart_index, int world_size) const;

  /// Records how long each worker of the tasks of restart `restart_index` took, (workers) seconds.
  void measured(int64_t restart_index, const torch::Tensor& seconds);

 private:
  const MetaTrainOptions& options_;
  std::vector<double> family_seconds_;  // per family (0: not measured yet)
};

/// Writes the whole meta-training state to `path` (through a temporary file, so a crash never
/// leaves half a checkpoint).
void save_checkpoint(const std::string& path, optim::LearnedOptimizerModelImpl& model,
                     const torch::optim::Adam& adam, int64_t iteration, int64_t restart_index);

/// Reads a checkpoint into `model` and `adam`. -> (iteration, restart index)
std::pair<int64_t, int64_t> load_checkpoint(const std::string& path,
                                            optim::LearnedOptimizerModelImpl& model,
                                            torch::optim::Adam& adam);

/// Every rank starts from rank 0's state (a fresh or given model, or its checkpoint), sent as one
/// serialized checkpoint: the checkpoint file need only exist on rank 0's machine.
/// -> (iteration, restart index)
std::pair<int64_t, int64_t> share_starting_state(Communicator& communicator,
                                                 optim::LearnedOptimizerModelImpl& model,
                                                 torch::optim::Adam& adam, int64_t iteration,
                                                 int64_t restart_index);

/// Ranks given different options would silently train different things: each rank's options
/// (those that shape the result) and parameter shapes are compared with rank 0's.
void check_same_options(Communicator& communicator, const MetaTrainOptions& options,
                        const std::vector<torch::Tensor>& params);

/// The time spent gathering the rows (waiting for the slowest rank, then the transfer) and the
/// bytes received: what a user needs to judge the scaling.
struct GatherCost {
  double total = 0.0, least = INFINITY, bytes = 0.0;
  /// One line on stderr, averaged over `iterations`.
  void print(int world_size, int64_t parameter_count, int64_t workers, double iterations) const;
};

/// Every worker's row of contributions in worker order, (workers, columns): this rank's rows
/// (those of its `owned[rank]` workers, in order) and the other ranks', the same matrix on every
/// rank whatever the world size. The time and bytes go to `cost`.
torch::Tensor gather_workers(const torch::Tensor& local, const Assignment& owned, int64_t workers,
                             Communicator* communicator, GatherCost& cost);

}  // namespace flt::metatrain::detail
