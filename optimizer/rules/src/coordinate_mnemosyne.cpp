#include "flt/optim/mnemosyne.h"

#include <ATen/ATen.h>
#include <torch/optim/serialize.h>
#include <torch/serialize.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "flt/detail/optimizer_state.h"
#include "flt/kernels/schedule_step.h"
#include "learned_rule.h"
#include "pretrained_weights.h"

namespace flt::optim {
namespace {

using flt::detail::state_key;

// 2: the per-tensor step-size controller (its meta-parameters replace step_scale).
constexpr int64_t kFormatVersion = 2;

void write_options(torch::serialize::OutputArchive& archive,
                   const LearnedOptimizerModelOptions& o) {
  archive.write("format", torch::IValue(std::string("flt-learned-optimizer")));
  archive.write("version", torch::IValue(kFormatVersion));
  detail::write_shape_options(archive, o);
}

LearnedOptimizerModelOptions read_options(torch::serialize::InputArchive& archive,
                                          const std::string& source) {
  torch::IValue value;
  TORCH_CHECK(archive.try_read("format", value) && value.isString() &&
                  value.toStringRef() == "flt-learned-optimizer",
              "learned optimizer weights: ", source,
              " is not a weights file written by flt-metatrain");
  archive.read("version", value);
  TORCH_CHECK(value.toInt() == kFormatVersion, "learned optimizer weights: ", source,
              " has format version ", value.toInt(), ", this build reads ", kFormatVersion,
              value.toInt() < kFormatVersion
                  ? " (weights from before the per-tensor step-size controller: re-train them with "
                    "flt-metatrain)"
                  : "");
  LearnedOptimizerModelOptions o;
  detail::read_shape_options(archive, o);
  return o;
}

// The archive's own keys, sorted, without the "training" flag every archive carries.
std::string key_list(torch::serialize::InputArchive& archive) {
  auto keys = archive.keys();
  keys.erase(std::remove(keys.begin(), keys.end(), "training"), keys.end());
  std::sort(keys.begin(), keys.end());
  std::string list;
  for (const auto& key : keys) list += (list.empty() ? "" : ", ") + key;
  return "{" + list + "}";
}

// LibTorch's optimizer loader meets another optimizer's archive (say Adam's) with an INTERNAL
// ASSERT that asks for a PyTorch bug report; recognise it first by the parameter-group options
// (those MnemosyneOptions::serialize writes) and name what the archive holds instead.
void check_is_mnemosyne_state(torch::serialize::InputArchive& archive) {
  torch::IValue version;
  torch::serialize::InputArchive groups, group, options;
  TORCH_CHECK(
      archive.try_read("pytorch_version", version) && archive.try_read("param_groups", groups),
      "Mnemosyne::load: the archive is not an optimizer state (it holds ", key_list(archive), ")");
  // No parameter group to look at: LibTorch's loader reports the group count itself.
  if (!groups.try_read("param_groups/0", group) || !group.try_read("options", options)) return;
  torch::IValue value;
  if (options.try_read("memory", value) && options.try_read("chunk_size", value)) return;
  const std::string found = key_list(options);
  const std::string origin =
      found == "{amsgrad, betas, eps, lr, weight_decay}" ? " (torch::optim::Adam or AdamW)"
      : found == "{dampening, lr, momentum, nesterov, weight_decay}" ? " (torch::optim::SGD)"
                                                                     : "";
  TORCH_CHECK(false,
              "Mnemosyne::load: the archive is not a Mnemosyne optimizer state: its parameter "
              "groups have the options ",
              found, origin,
              ", a Mnemosyne state has {chunk_size, fused, "
              "lr, memory, weights}");
}

LearnedOptimizerModel default_model(const MnemosyneOptions& options) {
  return options.weights().empty() ? load_pretrained_model(options.memory())
                                   : load_model(options.weights());
}

// The second design's schedule: the given file, else the shipped weights of that memory kind, else
// the untrained schedule (Adam with a step relative to each tensor's RMS).
LearnedSchedule default_schedule(const MnemosyneOptions& options) {
  if (!options.weights().empty()) return load_schedule(options.weights());
  const auto blob = detail::pretrained_blob("schedule_" + memory_name(options.memory()));
  if (blob.data == nullptr)
    return LearnedSchedule(LearnedScheduleOptions().memory(options.memory()));
  torch::serialize::InputArchive archive;
  archive.load_from(reinterpret_cast<const char*>(blob.data), blob.size);
  return read_schedule(archive,
                       "the pretrained schedule \"" + memory_name(options.memory()) + "\"");
}

}  // namespace

// ---- weights files -------------------------------------------------------------------------

void write_model(torch::serialize::OutputArchive& archive, const LearnedOptimizerModelImpl& model) {
  write_options(archive, model.options);
  detail::write_module_weights(archive, model);
}

LearnedOptimizerModel read_model(torch::serialize::InputArchive& archive,
                                 const std::string& source) {
  LearnedOptimizerModel model(read_options(archive, source));
  detail::read_module_weights(archive, *model);
  return model;
}

void save_model(const LearnedOptimizerModel& model, const std::string& path) {
  detail::save_weights_file(path, [&](auto& archive) { write_model(archive, *model); });
}

LearnedOptimizerModel load_model(const std::string& path) {
  return detail::load_weights_file(path, "learned optimizer weights",
                                   [&](auto& archive) { return read_model(archive, path); });
}

LearnedOptimizerModel load_pretrained_model(Memory memory) {
  const auto name = memory_name(memory);
  const auto blob = detail::pretrained_blob(name);
  TORCH_CHECK(blob.data != nullptr, "no pretrained weights for memory \"", name,
              "\" ship with this build (optimizer/pretrained/mnemosyne_", name,
              ".pt); train them with flt-metatrain or pass MnemosyneOptions().weights(path)");
  torch::serialize::InputArchive archive;
  archive.load_from(reinterpret_cast<const char*>(blob.data), blob.size);
  return read_model(archive, "the pretrained weights for \"" + name + "\"");
}

std::vector<Memory> pretrained_memories() {
  std::vector<Memory> found;
  for (Memory m : all_memories()) {
    if (detail::pretrained_blob(memory_name(m)).data != nullptr) found.push_back(m);
  }
  return found;
}

// ---- options and state ------------------------------------------------------------------------

void MnemosyneOptions::serialize(torch::serialize::OutputArchive& archive) const {
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(lr);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(chunk_size);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(weights);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(fused);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(total_steps);
  archive.write("memory", torch::IValue(memory_name(memory())));
  archive.write("design", torch::IValue(design_name(design())));
}

void MnemosyneOptions::serialize(torch::serialize::InputArchive& archive) {
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, lr);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(int64_t, chunk_size);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(std::string, weights);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(bool, fused);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(int64_t, total_steps);
  torch::IValue value;
  archive.read("memory", value);
  memory(memory_from_name(value.toStringRef()));
  // States saved before the second design existed are the first design's.
  design(archive.try_read("design", value) ? design_from_name(value.toStringRef())
                                           : MnemosyneDesign::kCoordinateMemory);
}

bool operator==(const MnemosyneOptions& lhs, const MnemosyneOptions& rhs) {
  return lhs.lr() == rhs.lr() && lhs.memory() == rhs.memory() && lhs.weights() == rhs.weights() &&
         lhs.chunk_size() == rhs.chunk_size() && lhs.fused() == rhs.fused() &&
         lhs.total_steps() == rhs.total_steps() && lhs.design() == rhs.design();
}

void MnemosyneParamState::serialize(torch::serialize::OutputArchive& archive) const {
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(step);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(state);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(skipped);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(controller);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(last_step_size);
}

void MnemosyneParamState::serialize(torch::serialize::InputArchive& archive) {
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(int64_t, step);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(torch::Tensor, state);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(int64_t, skipped);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(torch::Tensor, controller);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(double, last_step_size);
}

bool operator==(const MnemosyneParamState& lhs, const MnemosyneParamState& rhs) {
  return lhs.step() == rhs.step() && lhs.skipped() == rhs.skipped() &&
         torch::equal(lhs.state(), rhs.state()) && torch::equal(lhs.controller(), rhs.controller());
}

// ---- the optimizer
// ---------------------------------------------------------------------------------

namespace {

// Every option of every constructor and param group, checked in one place; a bad value is named.
void check_options(const MnemosyneOptions& o) {
  TORCH_CHECK(std::isfinite(o.lr()) && o.lr() >= 0.0, "Mnemosyne: lr must be finite and >= 0, got ",
              o.lr());
  TORCH_CHECK(o.chunk_size() > 0, "Mnemosyne: chunk_size must be positive, got ", o.chunk_size());
  TORCH_CHECK(o.total_steps() >= 0, "Mnemosyne: total_steps must be >= 0 (0 = unknown), got ",
              o.total_steps());
}

// The controller's update once a tensor's step is done: its statistics become its next state.
void finish_tensor(const LearnedOptimizerModelImpl::ControllerParameters& parameters,
                   MnemosyneParamState& st, float* controller,
                   const LearnedOptimizerModelImpl::TensorState& tensor_state, int64_t skipped,
                   const std::array<double, 4>& statistics, int64_t n) {
  st.skipped(st.skipped() + skipped);
  const auto next =
      LearnedOptimizerModelImpl::next_tensor_state(parameters, tensor_state, statistics, n);
  std::copy(next.begin(), next.end(), controller);  // rounded to float, as stored
}

}  // namespace

Mnemosyne::Mnemosyne(std::vector<torch::optim::OptimizerParamGroup> param_groups,
                     MnemosyneOptions defaults)
    : Optimizer(checked(std::move(param_groups), defaults),
                std::make_unique<MnemosyneOptions>(defaults)) {
  if (defaults.design() == MnemosyneDesign::kTensorSchedule)
    schedule_ = default_schedule(defaults);
  else
    model_ = default_model(defaults);
}

Mnemosyne::Mnemosyne(std::vector<torch::Tensor> params, MnemosyneOptions defaults,
                     LearnedOptimizerModel model)
    : Optimizer(checked({torch::optim::OptimizerParamGroup(std::move(params))}, defaults),
                std::make_unique<MnemosyneOptions>(defaults)),
      model_(std::move(model)) {
  TORCH_CHECK(!model_.is_empty(), "Mnemosyne: the model is empty");
}

Mnemosyne::Mnemosyne(std::vector<torch::Tensor> params, MnemosyneOptions defaults,
                     LearnedSchedule schedule)
    : Optimizer(checked({torch::optim::OptimizerParamGroup(std::move(params))}, defaults),
                std::make_unique<MnemosyneOptions>(
                    MnemosyneOptions(defaults).design(MnemosyneDesign::kTensorSchedule))),
      schedule_(std::move(schedule)) {
  TORCH_CHECK(!schedule_.is_empty(), "Mnemosyne: the schedule is empty");
}

std::vector<torch::optim::OptimizerParamGroup> Mnemosyne::checked(
    std::vector<torch::optim::OptimizerParamGroup> groups, const MnemosyneOptions& defaults) {
  check_options(defaults);
  std::set<const void*> seen;
  int64_t count = 0;
  for (const auto& group : groups) {
    if (group.has_options()) check_options(static_cast<const MnemosyneOptions&>(group.options()));
    for (size_t i = 0; i < group.params().size(); ++i) {
      const auto& p = group.params()[i];
      TORCH_CHECK(p.defined(), "Mnemosyne: parameter ", i, " is an undefined tensor");
      TORCH_CHECK(p.is_leaf(), "Mnemosyne: parameter ", i, " of shape ", p.sizes(),
                  " is not a leaf tensor (it is computed from others); pass the leaves");
      TORCH_CHECK(p.is_floating_point(), "Mnemosyne: parameter ", i, " has dtype ", p.scalar_type(),
                  "; only floating-point parameters can be optimised");
      TORCH_CHECK(seen.insert(p.unsafeGetTensorImpl()).second, "Mnemosyne: parameter ", i,
                  " of shape ", p.sizes(), " appears more than once");
      ++count;
    }
  }
  TORCH_CHECK(count > 0, "Mnemosyne: the parameter list is empty");
  return groups;
}

MnemosyneParamState& Mnemosyne::state_of(const torch::Tensor& p, std::set<std::string>& refreshed) {
  const int64_t n = p.numel();
  auto key = state_key(state_, p);
  auto it = state_.find(key);
  if (it == state_.end()) {
    auto fresh = std::make_unique<MnemosyneParamState>();
    // Slot-major (state_size, n): each state slot of a run of coordinates is contiguous.
    if (schedule_) {
      fresh->state(torch::zeros({LearnedScheduleImpl::kMoments, n}, p.options().dtype(at::kFloat)));
      fresh->controller(schedule_->initial_history(p));
    } else {
      fresh->state(model_on(p.device(), refreshed)
                       ->initial_state(n, p.options().dtype(at::kFloat))
                       .t()
                       .contiguous());
      fresh->controller(model_->initial_tensor_state(p));
    }
    it = state_.emplace(key, std::move(fresh)).first;
  }
  auto& st = static_cast<MnemosyneParamState&>(*it->second);
  const int64_t slots = schedule_ ? LearnedScheduleImpl::kMoments : model_->state_size();
  TORCH_CHECK(st.state().dim() == 2 && st.state().size(0) == slots && st.state().size(1) == n,
              "Mnemosyne: the state of a parameter of shape ", p.sizes(), " must be (", slots, ", ",
              n, "), got ", st.state().sizes(),
              " (saved with another memory kind or design, or by a version that stored it as "
              "(numel, state_size))");
  const int64_t history = schedule_ ? schedule_->history_size() : detail::kTensorState;
  TORCH_CHECK(st.controller().defined() && st.controller().numel() == history,
              "Mnemosyne: the state of a parameter of shape ", p.sizes(), " must have a ", history,
              "-entry ", schedule_ ? "history" : "step-size controller", ", got ",
              st.controller().defined() ? st.controller().numel() : 0,
              " (saved with another design, or by a version before it)");
  // The per-tensor state is read and written through its CPU storage (float32 for the
  // controller, float64 for the schedule's history: tensor operations on a few values cost more
  // than a small tensor's whole step).
  const auto type = schedule_ ? at::kDouble : at::kFloat;
  if (st.controller().scalar_type() != type || !st.controller().is_contiguous() ||
      !st.controller().device().is_cpu())
    st.controller(st.controller().to(at::kCPU, type).contiguous());
  return st;
}

LearnedOptimizerModelImpl::FusedResult Mnemosyne::composite_step(
    LearnedOptimizerModel& model, torch::Tensor flat_param, const torch::Tensor& flat_grad,
    torch::Tensor& state, int64_t t, double step_size, int64_t chunk_size) {
  LearnedOptimizerModelImpl::FusedResult out;
  const int64_t n = flat_param.numel();
  const auto size_tensor = torch::full({}, step_size, flat_param.options().dtype(at::kFloat));
  for (int64_t start = 0; start < n; start += chunk_size) {
    const int64_t size = std::min(chunk_size, n - start);
    const auto g = flat_grad.narrow(0, start, size).to(at::kFloat);
    auto param = flat_param.narrow(0, start, size);
    auto chunk_state = state.narrow(1, start, size).t();  // (size, state_size) view
    const auto finite_grad = at::isfinite(g);
    const auto safe_grad = at::where(finite_grad, g, at::zeros_like(g));
    auto result = model->step(safe_grad, param.to(at::kFloat), chunk_state, t, size_tensor);
    // A coordinate whose gradient or step is not finite keeps its value and its state.
    const auto ok = finite_grad & at::isfinite(result.update);
    out.skipped += (~ok).sum().item<int64_t>();
    const auto update = at::where(ok, result.update, at::zeros_like(result.update));
    param.add_(update.to(param.scalar_type()));
    const auto sums =
        LearnedOptimizerModelImpl::step_statistics(safe_grad, chunk_state, param.to(at::kFloat))
            .to(at::kDouble)
            .sum(0);
    for (int64_t i = 0; i < 4; ++i) out.statistics[i] += sums[i].item<double>();
    chunk_state.copy_(at::where(ok.unsqueeze(1), result.state, chunk_state));
  }
  return out;
}

torch::Tensor Mnemosyne::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  torch::Tensor loss;
  if (closure) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  if (schedule_) {
    schedule_step(loss);
    return loss;
  }
  // Read once per step, shared by every tensor: the controller's meta-parameters.
  const auto controller_parameters = model_->controller_parameters();
  // Fused tensors are gathered and stepped together, one parallel loop per step index (tensors
  // added later count their own steps), after every other tensor.
  struct Pending {
    MnemosyneParamState* st;
    float* controller;
    LearnedOptimizerModelImpl::TensorState tensor_state;
    size_t entry;
  };
  std::map<int64_t, std::vector<LearnedOptimizerModelImpl::FusedTensor>> fused_by_step;
  std::vector<std::pair<int64_t, Pending>> pending;
  std::set<std::string> refreshed;  // devices whose replica of the rule is current (model_on)
  for (auto& group : param_groups_) {
    const auto& options = static_cast<const MnemosyneOptions&>(group.options());
    check_options(options);  // a group's options can be edited between steps
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      const auto& grad = p.grad();
      TORCH_CHECK(!grad.is_sparse(),
                  "Mnemosyne: sparse gradients are not supported (parameter of shape ", p.sizes(),
                  ")");
      auto& st = state_of(p, refreshed);
      st.step(st.step() + 1);
      float* controller = st.controller().data_ptr<float>();
      LearnedOptimizerModelImpl::TensorState tensor_state{};
      std::copy(controller, controller + detail::kTensorState, tensor_state.begin());
      const double step_size =
          options.lr() * LearnedOptimizerModelImpl::tensor_step_size(
                             controller_parameters, tensor_state, st.step(), options.total_steps());
      st.last_step_size(step_size);
      const bool copied = !p.is_contiguous();
      auto flat_param = p.detach().reshape({-1});  // a view unless the parameter is non-contiguous
      const auto flat_grad = grad.detach().reshape({-1});
      if (options.fused() && !copied && p.scalar_type() == at::kFloat && p.device().is_cpu() &&
          model_->fused_supported()) {
        auto& entries = fused_by_step[st.step()];
        entries.push_back({flat_param, flat_grad, st.state(), step_size, {}});
        pending.push_back({st.step(), {&st, controller, tensor_state, entries.size() - 1}});
        continue;
      }
      auto model = model_on(p.device(), refreshed);
      const auto result = composite_step(model, flat_param, flat_grad, st.state(), st.step(),
                                         step_size, options.chunk_size());
      finish_tensor(controller_parameters, st, controller, tensor_state, result.skipped,
                    result.statistics, p.numel());
      if (copied) p.detach().copy_(flat_param.view(p.sizes()));
    }
  }
  // The fused batch: the weights prepared once per step index, every tensor of it in one loop.
  for (auto& [t, entries] : fused_by_step)
    model_->fused_steps_(*model_->prepare_fused_step(t), entries);
  for (const auto& [t, job] : pending) {
    const auto& entry = fused_by_step[t][job.entry];
    finish_tensor(controller_parameters, *job.st, job.controller, job.tensor_state,
                  entry.result.skipped, entry.result.statistics, entry.param.numel());
  }
  return loss;
}

void Mnemosyne::report_loss(double loss) {
  reported_loss_ = loss;
}

void Mnemosyne::report_validation(double metric) {
  reported_validation_ = metric;
}

void Mnemosyne::schedule_step(const torch::Tensor& loss) {
  ScheduleSignals signals;
  if (loss.defined() && loss.numel() == 1)
    signals.loss = loss.detach().item<double>();
  else
    signals.loss = reported_loss_;
  signals.validation = reported_validation_;
  reported_loss_.reset();
  reported_validation_.reset();
  // Tensors at the same step index and run length are decided together (tensors added later
  // count their own steps).
  struct Entry {
    torch::Tensor param;
    MnemosyneParamState* st;
    const MnemosyneOptions* options;
  };
  std::map<std::pair<int64_t, int64_t>, std::vector<Entry>> by_step;
  std::set<std::string> refreshed;
  for (auto& group : param_groups_) {
    const auto& options = static_cast<const MnemosyneOptions&>(group.options());
    check_options(options);  // a group's options can be edited between steps
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      TORCH_CHECK(!p.grad().is_sparse(),
                  "Mnemosyne: sparse gradients are not supported (parameter of shape ", p.sizes(),
                  ")");
      auto& st = state_of(p, refreshed);
      st.step(st.step() + 1);
      by_step[{st.step(), options.total_steps()}].push_back({p, &st, &options});
    }
  }
  for (auto& [key, entries] : by_step) {
    const auto [t, total_steps] = key;
    auto step_signals = signals;
    if (total_steps > 0)
      step_signals.fraction = static_cast<double>(t) / static_cast<double>(total_steps);
    std::vector<torch::Tensor> rows;
    for (const auto& e : entries) rows.push_back(e.st->controller());
    auto [decision, histories] = schedule_->decide(at::stack(rows), t, step_signals);
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
      const double step_size =
          e.options->lr() * step_sizes.data_ptr<double>()[i] * detail::anneal(t, total_steps);
      const double shrink = shrinks.data_ptr<double>()[i], gain = gains.data_ptr<double>()[i];
      e.st->last_step_size(step_size);
      const auto& p = e.param;
      auto flat_param = p.detach().reshape({-1});
      const auto flat_grad = p.grad().detach().reshape({-1});
      numels.data_ptr<double>()[i] = static_cast<double>(p.numel());
      if (e.options->fused() && p.is_contiguous() &&
          kernels::schedule_step_supported(flat_param, flat_grad, e.st->state())) {
        auto& batch = fused[p.device().str()];
        batch.params.push_back(flat_param);
        batch.grads.push_back(flat_grad);
        batch.moments.push_back(e.st->state());
        batch.decisions.push_back(LearnedScheduleImpl::tensor_decision(step_size, shrink, gain));
        batch.rows.push_back(i);
        continue;
      }
      schedule_composite_step(*e.st, flat_param, flat_grad, t, step_size, shrink, gain,
                              e.options->chunk_size(),
                              sums.data_ptr<double>() + i * LearnedScheduleImpl::kStatistics);
      if (!p.is_contiguous()) p.detach().copy_(flat_param.view(p.sizes()));
    }
    for (auto& [device, batch] : fused) {
      const auto pass = kernels::schedule_step_(batch.params, batch.grads, batch.moments,
                                                schedule_->rule_constants(t), batch.decisions);
      for (size_t k = 0; k < batch.rows.size(); ++k) {
        const double* row = pass.data_ptr<double>() + k * kernels::schedule::kSums;
        std::copy(row, row + LearnedScheduleImpl::kStatistics,
                  sums.data_ptr<double>() + batch.rows[k] * LearnedScheduleImpl::kStatistics);
        auto& st = *entries[batch.rows[k]].st;
        st.skipped(st.skipped() + static_cast<int64_t>(row[LearnedScheduleImpl::kStatistics]));
      }
    }
    histories = LearnedScheduleImpl::record(histories, sums, numels);
    for (int64_t i = 0; i < count; ++i) entries[i].st->controller().copy_(histories[i]);
  }
}

void Mnemosyne::schedule_composite_step(MnemosyneParamState& st, torch::Tensor flat_param,
                                        const torch::Tensor& flat_grad, int64_t t, double step_size,
                                        double shrink, double gain, int64_t chunk_size,
                                        double* sums) const {
  const int64_t n = flat_param.numel();
  for (int64_t start = 0; start < n; start += chunk_size) {
    const int64_t size = std::min(chunk_size, n - start);
    const auto g = flat_grad.narrow(0, start, size).to(at::kFloat);
    auto param = flat_param.narrow(0, start, size);
    auto moments = st.state().narrow(1, start, size).t();  // (size, 2) view
    const auto finite_grad = at::isfinite(g);
    const auto safe_grad = at::where(finite_grad, g, at::zeros_like(g));
    const auto result = schedule_->coordinate_step(param.to(at::kFloat), safe_grad, moments, t,
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

std::string design_name(MnemosyneDesign design) {
  return design == MnemosyneDesign::kTensorSchedule ? "tensor-schedule" : "coordinate-memory";
}

MnemosyneDesign design_from_name(const std::string& name) {
  if (name == "coordinate-memory") return MnemosyneDesign::kCoordinateMemory;
  if (name == "tensor-schedule") return MnemosyneDesign::kTensorSchedule;
  TORCH_CHECK(false, "unknown Mnemosyne design \"", name,
              "\" (expected coordinate-memory or tensor-schedule)");
}

LearnedOptimizerModel Mnemosyne::model_on(const torch::Device& device,
                                          std::set<std::string>& refreshed) {
  if (device.is_cpu()) return model_;
  const auto key = device.str();
  auto it = replicas_.find(key);
  if (it == replicas_.end()) {
    auto replica = std::dynamic_pointer_cast<LearnedOptimizerModelImpl>(model_->clone(device));
    it = replicas_.emplace(key, LearnedOptimizerModel(replica)).first;
  } else if (!refreshed.count(key)) {
    const auto source = model_->named_parameters(), target = it->second->named_parameters();
    for (const auto& item : source) target[item.key()].copy_(item.value());
    const auto source_buffers = model_->named_buffers(),
               target_buffers = it->second->named_buffers();
    for (const auto& item : source_buffers) target_buffers[item.key()].copy_(item.value());
  }
  refreshed.insert(key);
  return it->second;
}

std::vector<double> Mnemosyne::step_sizes() const {
  std::vector<double> sizes;
  for (const auto& group : param_groups_) {
    for (const auto& p : group.params()) {
      const auto it = state_.find(state_key(state_, p));
      sizes.push_back(it == state_.end()
                          ? 0.0
                          : static_cast<const MnemosyneParamState&>(*it->second).last_step_size());
    }
  }
  return sizes;
}

int64_t Mnemosyne::skipped() const {
  int64_t total = 0;
  for (const auto& entry : state_) {
    total += static_cast<const MnemosyneParamState&>(*entry.second).skipped();
  }
  return total;
}

void Mnemosyne::save(torch::serialize::OutputArchive& archive) const {
  torch::optim::serialize<MnemosyneParamState, MnemosyneOptions>(archive, *this);
  if (schedule_) {
    torch::serialize::OutputArchive schedule_archive(archive.compilation_unit());
    write_schedule(schedule_archive, *schedule_);
    archive.write("learned_schedule", schedule_archive);
    return;
  }
  torch::serialize::OutputArchive model_archive(archive.compilation_unit());
  write_model(model_archive, *model_);
  archive.write("learned_model", model_archive);
}

void Mnemosyne::load(torch::serialize::InputArchive& archive) {
  check_is_mnemosyne_state(archive);
  torch::optim::serialize<MnemosyneParamState, MnemosyneOptions>(archive, *this);
  torch::serialize::InputArchive schedule_archive;
  if (archive.try_read("learned_schedule", schedule_archive)) {
    schedule_ = read_schedule(schedule_archive, "the optimizer archive");
    model_ = nullptr;
    return;
  }
  torch::serialize::InputArchive model_archive;
  if (archive.try_read("learned_model", model_archive)) {
    model_ = read_model(model_archive, "the optimizer archive");
    schedule_ = nullptr;
    replicas_.clear();  // replicas of the old rule
  }
}

}  // namespace flt::optim
