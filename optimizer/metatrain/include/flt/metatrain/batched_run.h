#pragma once
// Whole runs of a learned schedule over K task instances at once (batched_tasks.h): the
// ScheduleMnemosyne rule, the same formulas as the optimizer's (LearnedScheduleImpl::decide and
// record over every (tensor, instance) row in one call, the fused per-coordinate pass over each
// stacked parameter's rows), so instance k ends where ScheduleMnemosyne would take it alone, and
// the per-instance loop that checks it; and the tuned reference's runs, AdamW with a half-cosine
// decay, every instance at its own learning rate.

#include <torch/types.h>

#include <memory>
#include <vector>

#include "flt/kernels/schedule_rule.h"
#include "flt/metatrain/batched_tasks.h"
#include "flt/optim/learned_schedule.h"

namespace flt::metatrain {

/// How a run of a task's instances is done (the same for every candidate it compares).
struct EpisodeSpec {
  int64_t steps = 0;
  uint64_t seed = 0;          ///< the run's mini-batch stream (tuned_reference.h's run_stream)
  bool known_length = false;  ///< ScheduleMnemosyneOptions::total_steps(steps), else unknown
  bool report_loss = false;   ///< the training loss given to report_loss every step
};

/// The rule's state over K instances of a task: per stacked parameter its moments (K, 2, n_i),
/// and one history row per (tensor, instance). The instances may be run by several schedules at
/// once (the candidates of an evolution-strategies generation): with C schedules, schedule c steps
/// the c-th block of K / C consecutive instances, and the C schedules decide together as one
/// optim::ScheduleStack (one batched computation a step, not one per schedule).
class BatchedSchedule {
 public:
  /// `params`: the stacked parameters, each (K, shape...) float32 contiguous; `total_steps` > 0
  /// anneals the step along a half cosine and tells the schedule the run's fraction. K must be a
  /// multiple of the number of schedules.
  BatchedSchedule(std::vector<optim::LearnedSchedule> schedules,
                  const std::vector<torch::Tensor>& params, int64_t total_steps);
  ~BatchedSchedule();
  /// One step of every instance: reads each parameter's gradient (K, shape...), updates the
  /// parameters in place. `losses` (K), when given: each instance's training loss of this step,
  /// what its schedule reads as a reported loss (NaN: none; as ScheduleMnemosyne::report_loss).
  void step(const std::vector<torch::Tensor>& params, const torch::Tensor& losses = {});
  /// Steps taken.
  int64_t steps() const { return t_; }
  /// Coordinates left unchanged (non-finite gradient or step), per instance. -> (K) int64
  torch::Tensor skipped() const { return skipped_; }

 private:
  std::vector<optim::LearnedSchedule> schedules_;
  std::unique_ptr<optim::ScheduleStack> stack_;
  /// Per schedule, what its pass reads besides the coordinates (the bias corrections set a step).
  std::vector<kernels::schedule::RuleConstants> constants_;
  int64_t instances_, total_steps_, t_ = 0;
  std::vector<torch::Tensor> moments_;  ///< per parameter (K, 2, n_i) float32
  /// (C, T K / C, history) float64: schedule c's rows, (tensor i, instance j of its block) at
  /// i K / C + j
  torch::Tensor histories_;
  torch::Tensor numels_;         ///< (C T K / C) float64, the rows' coordinates in the same order
  torch::Tensor row_instances_;  ///< (C T K / C) int64, the instance each row belongs to
  torch::Tensor skipped_;        ///< (K) int64
};

/// The final held-out losses of the task's K instances after spec.steps steps of the schedule at
/// lr 1 (spec.known_length: the run's length told), mini-batch keys drawn from the run's batch
/// stream (tuned_reference.h's run_stream(spec.seed, kBatches)); an instance whose training loss
/// turns non-finite scores +inf; spec.report_loss: each instance's schedule reads its own training
/// loss every step. -> (K) float64
torch::Tensor batched_schedule_final_losses(const BatchedTask& task, const EpisodeSpec& spec,
                                            const optim::LearnedSchedule& schedule);
/// The same with C schedules in one run: schedule c runs the c-th block of K / C consecutive
/// instances (a task whose seeds repeat C times runs each schedule on the same instances).
/// -> (K) float64
torch::Tensor batched_schedule_final_losses(const BatchedTask& task, const EpisodeSpec& spec,
                                            const std::vector<optim::LearnedSchedule>& schedules);

/// The same, one instance at a time through flt::optim::ScheduleMnemosyne in a plain training loop
/// (zero_grad, loss, backward, step): what meta-training did before the engine, and the
/// reference the engine is tested against. -> (K) float64
torch::Tensor per_instance_schedule_final_losses(const BatchedTask& task, const EpisodeSpec& spec,
                                                 const optim::LearnedSchedule& schedule);

/// The final held-out losses of the task's K instances after spec.steps steps of AdamW at each
/// instance's own learning rate `lrs[k]` (torch::optim::AdamW's update: betas 0.9 and 0.999, eps
/// 1e-8, weight decay 1e-2), decayed along a half cosine to 0 as adamw_cosine_final_loss does, with
/// the mini-batch keys of batched_schedule_final_losses. A grid of learning rates is extra
/// instances: repeat an instance's seed once per rate (an instance is a function of its seed), so
/// one batched run tunes every instance. An instance whose training loss turns non-finite scores
/// +inf. With `lowest_at`, the held-out loss is also taken at 20 evenly spaced steps of the run and
/// each instance's fraction of the run where it was lowest goes there ((K) float64, in (0, 1]).
/// lrs: (K) -> (K) float64
torch::Tensor batched_adamw_cosine_final_losses(const BatchedTask& task, const EpisodeSpec& spec,
                                                const torch::Tensor& lrs,
                                                torch::Tensor* lowest_at = nullptr);

/// One 64-bit mini-batch key from a run's batch stream.
uint64_t next_batch_key(at::Generator& batches);

}  // namespace flt::metatrain
