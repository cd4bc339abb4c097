#include "flt/metatrain/batched_run.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>

#include "flt/kernels/schedule_step.h"
#include "flt/metatrain/tuned_reference.h"
#include "flt/optim/schedule_mnemosyne.h"
#include "learned_rule.h"  // detail::anneal, the optimizer's own

namespace flt::metatrain {

using optim::LearnedScheduleImpl;

uint64_t next_batch_key(at::Generator& batches) {
  auto* impl = at::check_generator<at::CPUGeneratorImpl>(batches);
  std::lock_guard<std::mutex> lock(impl->mutex_);
  return impl->random64();
}

BatchedSchedule::BatchedSchedule(std::vector<optim::LearnedSchedule> schedules,
                                 const std::vector<torch::Tensor>& params, int64_t total_steps)
    : schedules_(std::move(schedules)), total_steps_(total_steps) {
  TORCH_CHECK(!params.empty(), "BatchedSchedule: no parameters");
  TORCH_CHECK(!schedules_.empty(), "BatchedSchedule: no schedules");
  instances_ = params[0].size(0);
  const auto groups = static_cast<int64_t>(schedules_.size());
  TORCH_CHECK(instances_ % groups == 0, "BatchedSchedule: ", instances_,
              " instances do not split into ", groups, " equal blocks, one per schedule");
  const int64_t per_group = instances_ / groups;
  for (size_t c = 1; c < schedules_.size(); ++c)
    TORCH_CHECK(schedules_[c]->history_size() == schedules_[0]->history_size(),
                "BatchedSchedule: schedule ", c, " keeps a history of ",
                schedules_[c]->history_size(), " numbers a tensor, schedule 0 of ",
                schedules_[0]->history_size(), ": the schedules of one run must share a shape");
  torch::NoGradGuard no_grad;  // the schedules' weights are read, not trained
  stack_ = std::make_unique<optim::ScheduleStack>(schedules_);
  // Schedule c's rows: (tensor i, its instance j of the block) at i * per_group + j.
  std::vector<torch::Tensor> rows(static_cast<size_t>(groups));
  std::vector<std::vector<torch::Tensor>> mine(static_cast<size_t>(groups));
  std::vector<double> numels;
  for (const auto& p : params) {
    TORCH_CHECK(p.dim() >= 1 && p.size(0) == instances_ && p.scalar_type() == at::kFloat &&
                    p.is_contiguous() && p.is_cpu(),
                "BatchedSchedule: every parameter must be a contiguous float32 CPU tensor (",
                instances_, ", ...), got ", p.sizes(), " ", p.scalar_type());
    const int64_t n = p.numel() / instances_;
    moments_.push_back(torch::zeros({instances_, LearnedScheduleImpl::kMoments, n}, torch::kFloat));
    for (int64_t k = 0; k < instances_; ++k)
      mine[static_cast<size_t>(k / per_group)].push_back(
          schedules_[static_cast<size_t>(k / per_group)]->initial_history(p.detach()[k]));
    numels.push_back(static_cast<double>(n));
  }
  for (size_t c = 0; c < mine.size(); ++c) rows[c] = at::stack(mine[c]);
  histories_ = at::stack(rows);  // (C, T per_group, H)
  // Every schedule's rows list the tensors in the same order, per_group rows each.
  numels_ = torch::tensor(numels, torch::kDouble).repeat_interleave(per_group).repeat({groups});
  // Row (c, i per_group + j) is instance c per_group + j.
  row_instances_ = (torch::arange(groups, torch::kLong).view({groups, 1, 1}) * per_group +
                    torch::arange(per_group, torch::kLong).view({1, 1, per_group}))
                       .expand({groups, static_cast<int64_t>(params.size()), per_group})
                       .reshape(-1);
  skipped_ = torch::zeros({instances_}, torch::kInt64);
  for (const auto& schedule : schedules_) constants_.push_back(schedule->rule_constants(1));
}

BatchedSchedule::~BatchedSchedule() = default;

void BatchedSchedule::step(const std::vector<torch::Tensor>& params, const torch::Tensor& losses) {
  torch::NoGradGuard no_grad;
  TORCH_CHECK(params.size() == moments_.size(), "BatchedSchedule::step: expected ", moments_.size(),
              " parameters, got ", params.size());
  TORCH_CHECK(!losses.defined() || (losses.dim() == 1 && losses.size(0) == instances_),
              "BatchedSchedule::step: losses must be (", instances_, "), one per instance, got ",
              losses.sizes());
  const int64_t t = ++t_;
  optim::ScheduleSignals signals;
  if (losses.defined())
    signals.row_losses = losses.detach().to(at::kDouble).index_select(0, row_instances_);
  if (total_steps_ > 0)
    signals.fraction = static_cast<double>(t) / static_cast<double>(total_steps_);
  const double anneal = optim::detail::anneal(t, total_steps_);
  const int64_t groups = static_cast<int64_t>(schedules_.size()), per_group = instances_ / groups,
                rows = histories_.size(1);
  // Every schedule decides for its rows in one batched computation.
  auto [decision, histories] = stack_->decide(histories_, t, signals);
  const auto step_sizes = decision.step_size.contiguous(), shrinks = decision.shrink.contiguous(),
             gains = decision.gain.contiguous();
  constexpr int64_t kStatistics = LearnedScheduleImpl::kStatistics;
  auto sums = torch::empty({groups, rows, kStatistics}, torch::kDouble);
  std::vector<torch::Tensor> values, grads;  // each (K, n_i)
  for (size_t i = 0; i < params.size(); ++i) {
    TORCH_CHECK(params[i].grad().defined(), "BatchedSchedule::step: parameter ", i,
                " has no gradient");
    values.push_back(params[i].detach().view({instances_, -1}));
    grads.push_back(params[i].grad().detach().contiguous().view({instances_, -1}));
  }
  // Read and written through their storage: a few numbers per (schedule, tensor), 100s of pairs.
  auto* sum_rows = sums.data_ptr<double>();
  auto* skipped = skipped_.data_ptr<int64_t>();
  std::vector<kernels::schedule::TensorDecision> block(static_cast<size_t>(per_group));
  for (int64_t c = 0; c < groups; ++c) {
    auto& constants = constants_[static_cast<size_t>(c)];
    LearnedScheduleImpl::set_bias_corrections(constants, t);
    const double decay_anneal =
        schedules_[static_cast<size_t>(c)]->options.anneal_decay() ? anneal : 1.0;
    for (size_t i = 0; i < params.size(); ++i) {
      const int64_t first = c * rows + static_cast<int64_t>(i) * per_group;
      for (int64_t j = 0; j < per_group; ++j)
        block[static_cast<size_t>(j)] = LearnedScheduleImpl::tensor_decision(
            step_sizes.data_ptr<double>()[first + j] * anneal,
            shrinks.data_ptr<double>()[first + j] * decay_anneal,
            gains.data_ptr<double>()[first + j]);
      const auto pass = kernels::schedule_step_rows_(
          values[i].narrow(0, c * per_group, per_group),
          grads[i].narrow(0, c * per_group, per_group),
          moments_[i].narrow(0, c * per_group, per_group), constants, block);
      const auto* out = pass.data_ptr<double>();  // (per_group, kStatistics + 1) float64
      for (int64_t j = 0; j < per_group; ++j, out += kStatistics + 1) {
        std::copy(out, out + kStatistics, sum_rows + (first + j) * kStatistics);
        skipped[c * per_group + j] += static_cast<int64_t>(out[kStatistics]);
      }
    }
  }
  const auto width = histories.size(2);
  histories_ = LearnedScheduleImpl::record(histories.view({-1, width}),
                                           sums.view({-1, kStatistics}), numels_)
                   .view({groups, rows, width});
}

namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

std::vector<torch::Tensor> leaves(std::vector<torch::Tensor> params) {
  for (auto& p : params) p = p.detach().clone().requires_grad_(true);
  return params;
}

}  // namespace

torch::Tensor batched_schedule_final_losses(const BatchedTask& task, const EpisodeSpec& spec,
                                            const optim::LearnedSchedule& schedule) {
  return batched_schedule_final_losses(task, spec, std::vector<optim::LearnedSchedule>{schedule});
}

torch::Tensor batched_schedule_final_losses(const BatchedTask& task, const EpisodeSpec& spec,
                                            const std::vector<optim::LearnedSchedule>& schedules) {
  TORCH_CHECK(spec.steps > 0, "batched_schedule_final_losses: steps must be positive, got ",
              spec.steps);
  auto batches = run_stream(spec.seed, RunStream::kBatches);
  auto params = leaves(task.initial());
  BatchedSchedule rule(schedules, params, spec.known_length ? spec.steps : 0);
  const int64_t k = task.instances();
  auto diverged = torch::zeros({k}, torch::kBool);
  for (int64_t t = 0; t < spec.steps; ++t) {
    const auto loss = task.loss(params, next_batch_key(batches));  // (K)
    // An instance whose loss is not finite stops counting (the per-instance loop returns then);
    // its rows go on being stepped with the others, harmlessly: instances share no weights.
    diverged.logical_or_(~at::isfinite(loss.detach()));
    loss.sum().backward();
    rule.step(params, spec.report_loss ? loss.detach() : torch::Tensor());
    for (auto& p : params) p.mutable_grad().zero_();
  }
  torch::NoGradGuard no_grad;
  auto final_losses = task.validation_loss(params).to(at::kDouble);
  return at::where(diverged | ~at::isfinite(final_losses), kInfinity, final_losses);
}

torch::Tensor batched_adamw_cosine_final_losses(const BatchedTask& task, const EpisodeSpec& spec,
                                                const torch::Tensor& lrs,
                                                torch::Tensor* lowest_at) {
  constexpr const char* kName = "batched_adamw_cosine_final_losses";
  const int64_t k = task.instances();
  TORCH_CHECK(spec.steps > 0, kName, ": steps must be positive, got ", spec.steps);
  TORCH_CHECK(lrs.dim() == 1 && lrs.size(0) == k, kName, ": lrs must have one rate per instance (",
              k, "), got shape ", lrs.sizes());
  const auto rates = lrs.to(at::kCPU, at::kDouble).contiguous();
  const auto bad = ~(at::isfinite(rates) & (rates > 0));
  TORCH_CHECK(!bad.any().item<bool>(), kName,
              ": every learning rate must be positive and finite, got ",
              rates.masked_select(bad)[0].item<double>(), " for instance ",
              bad.nonzero()[0][0].item<int64_t>());
  // torch::optim::AdamW's defaults and adamw_cosine_final_loss's weight decay.
  constexpr double kBeta1 = 0.9, kBeta2 = 0.999, kEps = 1e-8, kWeightDecay = 1e-2;
  auto batches = run_stream(spec.seed, RunStream::kBatches);
  auto params = leaves(task.initial());
  std::vector<torch::Tensor> first, second;
  for (const auto& p : params) {
    first.push_back(torch::zeros_like(p));
    second.push_back(torch::zeros_like(p));
  }
  auto diverged = torch::zeros({k}, torch::kBool);
  // The lowest held-out loss so far and where (with `lowest_at`): 20 looks, the last at the end.
  constexpr int64_t kLooks = 20;
  torch::Tensor lowest, lowest_step;
  const auto look = [&](int64_t done) {
    torch::NoGradGuard no_grad;
    auto held_out = task.validation_loss(params).to(at::kDouble);
    held_out = at::where(diverged | ~at::isfinite(held_out), kInfinity, held_out);
    const auto fraction = torch::full({k}, static_cast<double>(done) / spec.steps, at::kDouble);
    if (!lowest.defined()) {
      lowest = held_out;
      lowest_step = fraction;
      return;
    }
    const auto better = held_out < lowest;
    lowest = at::where(better, held_out, lowest);
    lowest_step = at::where(better, fraction, lowest_step);
  };
  for (int64_t t = 0; t < spec.steps; ++t) {
    if (lowest_at != nullptr && t > 0 && t * kLooks / spec.steps != (t - 1) * kLooks / spec.steps)
      look(t);
    const auto loss = task.loss(params, next_batch_key(batches));  // (K)
    diverged.logical_or_(~at::isfinite(loss.detach()));
    loss.sum().backward();
    torch::NoGradGuard no_grad;
    const double anneal = 0.5 * (1.0 + std::cos(M_PI * static_cast<double>(t) / spec.steps));
    const double correction1 = 1.0 - std::pow(kBeta1, static_cast<double>(t + 1));
    const double correction2 = 1.0 - std::pow(kBeta2, static_cast<double>(t + 1));
    const auto lr = (rates * anneal).to(at::kFloat);  // (K): each row's rate this step
    for (size_t i = 0; i < params.size(); ++i) {
      auto& p = params[i];
      std::vector<int64_t> per_row(p.dim(), 1);
      per_row[0] = k;
      const auto row_lr = lr.view(per_row);
      const auto& g = p.grad();
      p.mul_(1.0 - row_lr * kWeightDecay);  // decoupled weight decay first, as AdamW does
      first[i].mul_(kBeta1).add_(g, 1.0 - kBeta1);
      second[i].mul_(kBeta2).addcmul_(g, g, 1.0 - kBeta2);
      const auto denominator = (second[i].sqrt() / std::sqrt(correction2)).add_(kEps);
      p.sub_(first[i] / denominator * (row_lr / correction1));
      p.mutable_grad().zero_();
    }
  }
  if (lowest_at != nullptr) {
    look(spec.steps);
    *lowest_at = lowest_step;
  }
  torch::NoGradGuard no_grad;
  auto final_losses = task.validation_loss(params).to(at::kDouble);
  return at::where(diverged | ~at::isfinite(final_losses), kInfinity, final_losses);
}

torch::Tensor per_instance_schedule_final_losses(const BatchedTask& task, const EpisodeSpec& spec,
                                                 const optim::LearnedSchedule& schedule) {
  TORCH_CHECK(spec.steps > 0, "per_instance_schedule_final_losses: steps must be positive, got ",
              spec.steps);
  auto out = torch::empty({task.instances()}, torch::kDouble);
  for (int64_t k = 0; k < task.instances(); ++k) {
    const auto one = task.instance(k);
    auto batches = run_stream(spec.seed, RunStream::kBatches);
    auto params = leaves(one->initial());
    optim::ScheduleMnemosyne optimizer(
        params,
        optim::ScheduleMnemosyneOptions(1.0).total_steps(spec.known_length ? spec.steps : 0),
        schedule);
    double final_loss = 0.0;
    for (int64_t t = 0; t < spec.steps && std::isfinite(final_loss); ++t) {
      optimizer.zero_grad();
      const auto loss = one->loss(params, next_batch_key(batches)).sum();
      final_loss = loss.item<double>();
      if (!std::isfinite(final_loss)) break;
      loss.backward();
      if (spec.report_loss) optimizer.report_loss(final_loss);
      optimizer.step();
    }
    if (std::isfinite(final_loss)) {
      torch::NoGradGuard no_grad;
      final_loss = one->validation_loss(params).item<double>();
    }
    out[k] = std::isfinite(final_loss) ? final_loss : kInfinity;
  }
  return out;
}

}  // namespace flt::metatrain
