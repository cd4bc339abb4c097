#pragma once
// The inner runs meta_train (meta_train.cpp) learns from, a truncation at a time, and its two
// estimators of the meta-gradient over them, one per file: truncated back-propagation
// (truncated_backprop.cpp) and antithetic PES (pes.cpp). Internal to flt_metatrain.

#include <ATen/core/Generator.h>
#include <torch/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "flt/metatrain/meta_train.h"
#include "flt/metatrain/tasks.h"
#include "flt/optim/learned_model.h"

namespace flt::metatrain::detail {

/// One inner optimisation in flight.
struct Particle {
  torch::Tensor params;      ///< (dim)
  torch::Tensor state;       ///< (dim, state_size)
  torch::Tensor controller;  ///< (segments, kTensorState): one step-size controller per tensor
  /// PES runs the fused inference step: the state of each tensor slot-major, (state_size, n_i),
  /// instead of `state`.
  std::vector<torch::Tensor> slot_major;
  int64_t t = 0;
  at::Generator noise;
  bool diverged = false;
};

struct Worker {
  std::unique_ptr<Task> task;
  torch::Tensor segment_sizes;      ///< (segments) int64: the task's tensors
  torch::Tensor segment_ids;        ///< (dim) int64: the tensor of each coordinate
  double log_initial = 0.0;         ///< log of the starting loss (clamped_log)
  int64_t horizon = 0;              ///< inner steps of this task
  std::vector<Particle> particles;  ///< 1 (backprop) or 2 (PES: +eps, -eps)
  torch::Tensor accumulated;        ///< PES: sum of this worker's perturbations since the restart
};

/// log(loss) with the loss clamped to [1e-12, 1e30], so a diverging task cannot produce inf.
double clamped_log(double loss);

/// Runs one truncation of `particle` with `model` and returns the mean of its meta-terms
/// log(loss) - log(initial loss), weighted towards late steps by `late_emphasis`. With `meta_graph`
/// the result is a graph into the model's parameters (truncated back-propagation); without it (PES)
/// only values are computed. The inner gradients always need autograd.
torch::Tensor unroll(optim::LearnedOptimizerModelImpl& model, const Worker& worker,
                     Particle& particle, int64_t steps, bool meta_graph, double late_emphasis);

/// A worker's row of contributions: [meta-loss, seconds it took, meta-gradient (P)].
constexpr int64_t kLoss = 0, kSeconds = 1, kGradient = 2;

/// Independent, reproducible random streams of (seed, a, b).
at::Generator generator_for(uint64_t seed, uint64_t a, uint64_t b);

double seconds_since(std::chrono::steady_clock::time_point start);
int64_t numel(const std::vector<torch::Tensor>& params);

/// Truncated back-propagation: each worker in `mine` unrolls one truncation with a graph into
/// `params`. -> (mine, kGradient + P) rows, in double.
torch::Tensor estimate_by_backprop(optim::LearnedOptimizerModelImpl& model,
                                   std::vector<Worker>& workers, const std::vector<int64_t>& mine,
                                   const std::vector<torch::Tensor>& params,
                                   const MetaTrainOptions& options);

/// Antithetic PES: each worker in `mine` unrolls one truncation at theta + eps and theta - eps (in
/// `scratch`, whose parameters `scratch_params` are the trainable ones), eps drawn from (seed,
/// iteration, worker) and accumulated since the worker's restart. -> (mine, kGradient + P) rows.
torch::Tensor estimate_by_pes(optim::LearnedOptimizerModelImpl& scratch,
                              const std::vector<torch::Tensor>& scratch_params,
                              std::vector<Worker>& workers, const std::vector<int64_t>& mine,
                              const std::vector<torch::Tensor>& params,
                              const MetaTrainOptions& options, int64_t iteration);

}  // namespace flt::metatrain::detail
