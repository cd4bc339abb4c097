#pragma once
// The fused pass of the learned optimizer's second design: its per-coordinate rule
// (schedule_rule.h) over every tensor of one step, on the CPU (one vectorised loop, OpenMP) or on
// CUDA (few launches for all tensors, no host synchronisation until the sums are read).

#include <torch/types.h>

#include <vector>

#include "flt/kernels/schedule_rule.h"

namespace flt::kernels {

/// Whether the fused pass takes this tensor: float32 contiguous parameter and gradient, moments
/// (2, N) contiguous float32, all on one device that has the pass (the CPU; CUDA in builds with
/// CUDA). Others take the composite reference (LearnedScheduleImpl::coordinate_step).
bool schedule_step_supported(const torch::Tensor& param, const torch::Tensor& grad,
                             const torch::Tensor& moments);

/// Steps S tensors of one device in place: params[i] (N_i), grads[i] (N_i), moments[i] (2, N_i)
/// (m then v), with the step's constants and each tensor's decisions. Returns the summed statistics
/// (S, schedule::kSums) float64 on the CPU: sum g d_prev, g^2, d_prev^2, p_new^2 and the count of
/// coordinates left unchanged (non-finite gradient or step), each summed in a fixed order (the same
/// result for any thread count and run to run).
torch::Tensor schedule_step_(const std::vector<torch::Tensor>& params,
                             const std::vector<torch::Tensor>& grads,
                             const std::vector<torch::Tensor>& moments,
                             const schedule::RuleConstants& constants,
                             const std::vector<schedule::TensorDecision>& decisions);

/// The same pass over R rows of a stacked parameter, each row a tensor of its own with its own
/// decision (meta-training steps K task instances' copies of one parameter at once; see
/// flt/metatrain/batched_tasks.h): params (R, N), grads (R, N), moments (R, 2, N), decisions (R)
/// -> (R, schedule::kSums) float64 on the CPU, row r's sums exactly as schedule_step_ gives them
/// for row r alone.
torch::Tensor schedule_step_rows_(const torch::Tensor& params, const torch::Tensor& grads,
                                  const torch::Tensor& moments,
                                  const schedule::RuleConstants& constants,
                                  const std::vector<schedule::TensorDecision>& decisions);

}  // namespace flt::kernels
