#include "flt/optim/schedule_mnemosyne.h"

#include <ATen/ATen.h>
#include <torch/optim/serialize.h>
#include <torch/serialize.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "flt/detail/optimizer_state.h"
#include "flt/kernels/schedule_step.h"
#include "learned_rule.h"
#include "pretrained_weights.h"

namespace flt::optim {
namespace {

using flt::detail::state_key;

constexpr const char* kName = "ScheduleMnemosyne";

// Reads `key`, else `old_key` (the name the Mnemosyne of earlier versions gave the same entry).
torch::Tensor read_tensor(torch::serialize::InputArchive& archive, const char* key,
                          const char* old_key) {
  torch::Tensor value;
  if (!archive.try_read(key, value)) archive.read(old_key, value);
  return value;
}

// The state of `p` made on its first step (no moments yet), else checked against the schedule's
// shape (a loaded or caller-kept state) and brought to the form the step reads.
void prepare_state(const LearnedScheduleImpl& schedule, ScheduleMnemosyneParamState& st,
                   const torch::Tensor& p) {
  const int64_t n = p.numel();
  if (!st.moments().defined() && !st.history().defined()) {
    // Slot-major (2, n): each moment of a run of coordinates is contiguous.
    st.moments(torch::zeros({LearnedScheduleImpl::kMoments, n}, p.options().dtype(at::kFloat)));
    st.history(schedule.initial_history(p));
  }
  constexpr int64_t slots = LearnedScheduleImpl::kMoments;
  TORCH_CHECK(st.moments().defined() && st.moments().dim() == 2 && st.moments().size(0) == slots &&
                  st.moments().size(1) == n,
              kName, ": the moments of a parameter of shape ", p.sizes(), " must be (", slots, ", ",
              n, "), got ", st.moments().defined() ? st.moments().sizes() : at::IntArrayRef{});
  const int64_t history = schedule.history_size();
  // Version 0.1's histories lack the hand rule's log growth, the last slot of a history's fixed
  // part: it starts at 0 (their schedules load with the hand rule off, which never reads it).
  constexpr int64_t added = 1;
  if (st.history().defined() && st.history().numel() == history - added) {
    const auto old = st.history().to(at::kCPU, at::kDouble).reshape({-1});
    constexpr int64_t kept = LearnedScheduleImpl::kHistory - added;
    st.history(at::cat({old.narrow(0, 0, kept), torch::zeros({added}, torch::kDouble),
                        old.narrow(0, kept, old.numel() - kept)}));
  }
  TORCH_CHECK(st.history().defined() && st.history().numel() == history, kName,
              ": the state of a parameter of shape ", p.sizes(), " must have a ", history,
              "-entry history, got ", st.history().defined() ? st.history().numel() : 0,
              " (saved with another memory kind)");
  // The history is read and written through its CPU storage in float64: tensor operations on a
  // few values cost more than a small tensor's whole step.
  if (st.history().scalar_type() != at::kDouble || !st.history().is_contiguous() ||
      !st.history().device().is_cpu())
    st.history(st.history().to(at::kCPU, at::kDouble).contiguous());
}

// The composite reference step of one tensor in chunks of `chunk_size` coordinates (bounded scratch
// memory); adds the pass's statistics to sums[0..kStatistics).
// flat_param: (N), updated in place  flat_grad: (N)
void composite_step(const LearnedScheduleImpl& schedule, ScheduleMnemosyneParamState& st,
                    torch::Tensor flat_param, const torch::Tensor& flat_grad, int64_t t,
                    double step_size, double shrink, double gain, int64_t chunk_size,
                    double* sums) {
  const int64_t n = flat_param.numel();
  for (int64_t start = 0; start < n; start += chunk_size) {
    const int64_t size = std::min(chunk_size, n - start);
    const auto g = flat_grad.narrow(0, start, size).to(at::kFloat);
    auto param = flat_param.narrow(0, start, size);
    auto moments = st.moments().narrow(1, start, size).t();  // (size, 2) view
    const auto finite_grad = at::isfinite(g);
    const auto safe_grad = at::where(finite_grad, g, at::zeros_like(g));
    const auto result = schedule.coordinate_step(param.to(at::kFloat), safe_grad, moments, t,
                                                 step_size, shrink, gain);
    // A coordinate whose gradient or step is not finite keeps its value and its moments.
    const auto ok = finite_grad & at::isfinite(result.param);
    st.skipped(st.skipped() + (~ok).sum().item<int64_t>());
    param.copy_(at::where(ok, result.param, param.to(at::kFloat)).to(param.scalar_type()));
    moments.copy_(at::where(ok.unsqueeze(1), result.moments, moments));
    // The statistics of the coordinates as they are now (a skipped one keeps its old value).
    const auto now = param.to(at::kDouble);
    const auto stats = at::where(ok.unsqueeze(1), result.statistics,
                                 at::stack({at::zeros_like(now), at::zeros_like(now),
                                            result.statistics.select(1, 2), now * now},
                                           1))
                           .sum(0);
    for (int64_t j = 0; j < LearnedScheduleImpl::kStatistics; ++j)
      sums[j] += stats[j].item<double>();
  }
}

// The ranks' mean of each reported signal, over the ranks that reported it: one all-reduce of
// (sum, count) pairs in double, so that every rank records the same values.
ReportedSignals mean_over_ranks(Communicator& ranks, const ReportedSignals& local) {
  auto sums = torch::tensor({local.loss.value_or(0.0), local.loss ? 1.0 : 0.0,
                             local.validation.value_or(0.0), local.validation ? 1.0 : 0.0},
                            torch::kDouble);  // (4)
  ranks.allreduce(sums);
  const double* s = sums.data_ptr<double>();
  ReportedSignals mean;
  if (s[1] > 0) mean.loss = s[0] / s[1];
  if (s[3] > 0) mean.validation = s[2] / s[3];
  return mean;
}

}  // namespace

LearnedSchedule load_pretrained_schedule(Memory memory) {
  const auto blob = detail::pretrained_blob("schedule_" + memory_name(memory));
  if (blob.data == nullptr) return nullptr;
  torch::serialize::InputArchive archive;
  archive.load_from(reinterpret_cast<const char*>(blob.data), blob.size);
  return read_schedule(archive, "the pretrained schedule \"" + memory_name(memory) + "\"");
}

// ---- options and state ------------------------------------------------------------------------

void ScheduleMnemosyneParamState::serialize(torch::serialize::OutputArchive& archive) const {
  write_counters(archive);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(moments);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(history);
}

void ScheduleMnemosyneParamState::serialize(torch::serialize::InputArchive& archive) {
  read_counters(archive);
  moments(read_tensor(archive, "moments", "state"));
  history(read_tensor(archive, "history", "controller"));
}

bool operator==(const ScheduleMnemosyneParamState& lhs, const ScheduleMnemosyneParamState& rhs) {
  return lhs.same_counters(rhs) && torch::equal(lhs.moments(), rhs.moments()) &&
         torch::equal(lhs.history(), rhs.history());
}

// ---- the optimizer ------------------------------------------------------------------------------

LearnedSchedule ScheduleMnemosyne::schedule_for(const ScheduleMnemosyneOptions& options) {
  options.check(kName);
  if (!options.weights().empty()) return load_schedule(options.weights());
  LearnedSchedule shipped =
      options.untrained() ? nullptr : load_pretrained_schedule(options.memory());
  return shipped ? shipped : LearnedSchedule(LearnedScheduleOptions().memory(options.memory()));
}

ScheduleMnemosyne::ScheduleMnemosyne(std::vector<torch::optim::OptimizerParamGroup> param_groups,
                                     ScheduleMnemosyneOptions defaults)
    : LearnedOptimizer(std::move(param_groups), defaults, kName),
      schedule_(schedule_for(defaults)) {
  check_group_communicators();
}

ScheduleMnemosyne::ScheduleMnemosyne(std::vector<torch::Tensor> params,
                                     ScheduleMnemosyneOptions defaults, LearnedSchedule schedule)
    : LearnedOptimizer({torch::optim::OptimizerParamGroup(std::move(params))}, defaults, kName),
      schedule_(std::move(schedule)) {
  check_group_communicators();
  TORCH_CHECK(!schedule_.is_empty(), kName, ": the schedule is empty");
}

void ScheduleMnemosyne::check_group_communicators() const {
  const auto& ranks = static_cast<const ScheduleMnemosyneOptions&>(defaults()).communicator();
  for (size_t i = 0; i < param_groups_.size(); ++i) {
    const auto& own =
        static_cast<const ScheduleMnemosyneOptions&>(param_groups_[i].options()).communicator();
    TORCH_CHECK(!own || own == ranks, kName, ": parameter group ", i,
                " names a communicator of its own; the reports are averaged over the ranks once "
                "per step, over the communicator of the optimizer's options");
  }
}

torch::Tensor ScheduleMnemosyne::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  const torch::Tensor loss = flt::detail::closure_loss(closure);
  auto signals = take_reports();
  if (loss.defined() && loss.numel() == 1) signals.loss = loss.detach().item<double>();
  if (const auto& ranks = static_cast<const ScheduleMnemosyneOptions&>(defaults()).communicator())
    signals = mean_over_ranks(*ranks, signals);
  step_parameters(schedule_, steps_with_gradients(), signals);
  return loss;
}

void ScheduleMnemosyne::step_parameters(LearnedSchedule schedule,
                                        const std::vector<Step>& parameters,
                                        const ReportedSignals& reported) {
  torch::NoGradGuard no_grad;
  ScheduleSignals signals;
  signals.loss = reported.loss;
  signals.validation = reported.validation;
  // Tensors at the same step index and run length are decided together (tensors added later
  // count their own steps).
  std::map<std::pair<int64_t, int64_t>, std::vector<Step>> by_step;
  for (const auto& parameter : parameters) {
    const auto& p = parameter.param;
    if (!p.grad().defined()) continue;
    parameter.options->check(kName);  // a group's options can be edited between steps
    TORCH_CHECK(!p.grad().is_sparse(), kName,
                ": sparse gradients are not supported (parameter of shape ", p.sizes(), ")");
    auto& st = *parameter.state;
    prepare_state(*schedule, st, p);
    st.step(st.step() + 1);
    by_step[{st.step(), parameter.options->total_steps()}].push_back(parameter);
  }
  for (auto& [key, entries] : by_step) {
    const auto [t, total_steps] = key;
    auto step_signals = signals;
    if (total_steps > 0)
      step_signals.fraction = static_cast<double>(t) / static_cast<double>(total_steps);
    std::vector<torch::Tensor> rows;
    for (const auto& e : entries) rows.push_back(e.state->history());
    auto [decision, histories] = schedule->decide(at::stack(rows), t, step_signals);
    const int64_t count = static_cast<int64_t>(entries.size());
    auto sums = torch::zeros({count, LearnedScheduleImpl::kStatistics}, torch::kDouble);
    auto numels = torch::zeros({count}, torch::kDouble);
    const auto step_sizes = decision.step_size.contiguous(), shrinks = decision.shrink.contiguous(),
               gains = decision.gain.contiguous();
    // The fused tensors of each device go through one pass (one call, few launches on CUDA); the
    // others take the composite reference in chunks.
    struct FusedBatch {
      std::vector<torch::Tensor> params, grads, moments;
      std::vector<kernels::schedule::TensorDecision> decisions;
      std::vector<int64_t> rows;
    };
    std::map<std::string, FusedBatch> fused;
    for (int64_t i = 0; i < count; ++i) {
      auto& e = entries[i];
      const double anneal = detail::anneal(t, total_steps);
      const double step_size = e.options->lr() * step_sizes.data_ptr<double>()[i] * anneal;
      const double shrink = shrinks.data_ptr<double>()[i] *
                            (schedule->options.anneal_decay() ? anneal : 1.0),
                   gain = gains.data_ptr<double>()[i];
      e.state->last_step_size(step_size);
      const auto& p = e.param;
      auto flat_param = p.detach().reshape({-1});
      const auto flat_grad = p.grad().detach().reshape({-1});
      numels.data_ptr<double>()[i] = static_cast<double>(p.numel());
      if (e.options->fused() && p.is_contiguous() &&
          kernels::schedule_step_supported(flat_param, flat_grad, e.state->moments())) {
        auto& batch = fused[p.device().str()];
        batch.params.push_back(flat_param);
        batch.grads.push_back(flat_grad);
        batch.moments.push_back(e.state->moments());
        batch.decisions.push_back(LearnedScheduleImpl::tensor_decision(step_size, shrink, gain));
        batch.rows.push_back(i);
        continue;
      }
      composite_step(*schedule, *e.state, flat_param, flat_grad, t, step_size, shrink, gain,
                     e.options->chunk_size(),
                     sums.data_ptr<double>() + i * LearnedScheduleImpl::kStatistics);
      if (!p.is_contiguous()) p.detach().copy_(flat_param.view(p.sizes()));
    }
    for (auto& [device, batch] : fused) {
      const auto pass = kernels::schedule_step_(batch.params, batch.grads, batch.moments,
                                                schedule->rule_constants(t), batch.decisions);
      for (size_t k = 0; k < batch.rows.size(); ++k) {
        const double* row = pass.data_ptr<double>() + k * kernels::schedule::kSums;
        std::copy(row, row + LearnedScheduleImpl::kStatistics,
                  sums.data_ptr<double>() + batch.rows[k] * LearnedScheduleImpl::kStatistics);
        auto& st = *entries[batch.rows[k]].state;
        st.skipped(st.skipped() + static_cast<int64_t>(row[LearnedScheduleImpl::kStatistics]));
      }
    }
    histories = LearnedScheduleImpl::record(histories, sums, numels);
    for (int64_t i = 0; i < count; ++i) entries[i].state->history().copy_(histories[i]);
  }
}

void ScheduleMnemosyne::save(torch::serialize::OutputArchive& archive) const {
  torch::optim::serialize<ScheduleMnemosyneParamState, ScheduleMnemosyneOptions>(archive, *this);
  torch::serialize::OutputArchive schedule_archive(archive.compilation_unit());
  write_schedule(schedule_archive, *schedule_);
  archive.write("learned_schedule", schedule_archive);
}

void ScheduleMnemosyne::load(torch::serialize::InputArchive& archive) {
  detail::check_learned_state_archive(archive, kName, "tensor-schedule");
  torch::optim::serialize<ScheduleMnemosyneParamState, ScheduleMnemosyneOptions>(archive, *this);
  restore_group_options(archive);
  torch::serialize::InputArchive schedule_archive;
  if (archive.try_read("learned_schedule", schedule_archive))
    schedule_ = read_schedule(schedule_archive, "the optimizer archive");
}

}  // namespace flt::optim
