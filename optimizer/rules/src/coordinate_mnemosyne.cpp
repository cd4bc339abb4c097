#include "flt/optim/coordinate_mnemosyne.h"

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
#include "learned_rule.h"
#include "learned_step_fused.h"
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
  TORCH_CHECK(
      blob.data != nullptr, "no pretrained weights for memory \"", name,
      "\" ship with this build (optimizer/pretrained/mnemosyne_", name,
      ".pt); train them with flt-metatrain or pass CoordinateMnemosyneOptions().weights(path)");
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

void CoordinateMnemosyneParamState::serialize(torch::serialize::OutputArchive& archive) const {
  write_counters(archive);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(state);
  _TORCH_OPTIM_SERIALIZE_TORCH_ARG(controller);
}

void CoordinateMnemosyneParamState::serialize(torch::serialize::InputArchive& archive) {
  read_counters(archive);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(torch::Tensor, state);
  _TORCH_OPTIM_DESERIALIZE_TORCH_ARG(torch::Tensor, controller);
}

bool operator==(const CoordinateMnemosyneParamState& lhs,
                const CoordinateMnemosyneParamState& rhs) {
  return lhs.same_counters(rhs) && torch::equal(lhs.state(), rhs.state()) &&
         torch::equal(lhs.controller(), rhs.controller());
}

// ---- the optimizer ------------------------------------------------------------------------------

namespace {

constexpr const char* kName = "CoordinateMnemosyne";

// The controller's update once a tensor's step is done: its statistics become its next state.
void finish_tensor(const detail::ControllerParameters& parameters,
                   CoordinateMnemosyneParamState& st, float* controller,
                   const detail::TensorState& tensor_state, int64_t skipped,
                   const std::array<double, 4>& statistics, int64_t n) {
  st.skipped(st.skipped() + skipped);
  const auto next = detail::next_tensor_state(parameters, tensor_state, statistics, n);
  std::copy(next.begin(), next.end(), controller);  // rounded to float, as stored
}

}  // namespace

LearnedOptimizerModel CoordinateMnemosyne::model_for(const CoordinateMnemosyneOptions& options) {
  options.check(kName);
  if (!options.weights().empty()) return load_model(options.weights());
  if (options.untrained())
    return LearnedOptimizerModel(LearnedOptimizerModelOptions().memory(options.memory()));
  return load_pretrained_model(options.memory());
}

CoordinateMnemosyne::CoordinateMnemosyne(
    std::vector<torch::optim::OptimizerParamGroup> param_groups,
    CoordinateMnemosyneOptions defaults)
    : LearnedOptimizer(std::move(param_groups), defaults, kName), model_(model_for(defaults)) {}

CoordinateMnemosyne::CoordinateMnemosyne(std::vector<torch::Tensor> params,
                                         CoordinateMnemosyneOptions defaults,
                                         LearnedOptimizerModel model)
    : LearnedOptimizer({torch::optim::OptimizerParamGroup(std::move(params))}, defaults, kName),
      model_(std::move(model)) {
  TORCH_CHECK(!model_.is_empty(), kName, ": the model is empty");
}

namespace {

// The composite reference step of one tensor (any device, dtype or layout) in chunks of
// `chunk_size` coordinates: bounded scratch memory whatever the tensor's size.
// flat_param: (N), updated in place  flat_grad: (N)  state: (state_size, N), updated in place
detail::FusedResult composite_step(LearnedOptimizerModel& model, torch::Tensor flat_param,
                                   const torch::Tensor& flat_grad, torch::Tensor& state, int64_t t,
                                   double step_size, int64_t chunk_size) {
  detail::FusedResult out;
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

// The state of `p` made on its first step (no state yet) by the rule on p's device, else checked
// against the rule's shape (a loaded or caller-kept state) and brought to the form the step reads.
void prepare_state(const LearnedOptimizerModelImpl& model,
                   const LearnedOptimizerModelImpl& on_device, CoordinateMnemosyneParamState& st,
                   const torch::Tensor& p) {
  const int64_t n = p.numel();
  if (!st.state().defined() && !st.controller().defined()) {
    // Slot-major (state_size, n): each state slot of a run of coordinates is contiguous.
    st.state(on_device.initial_state(n, p.options().dtype(at::kFloat)).t().contiguous());
    st.controller(model.initial_tensor_state(p));
  }
  const int64_t slots = model.state_size();
  TORCH_CHECK(st.state().defined() && st.state().dim() == 2 && st.state().size(0) == slots &&
                  st.state().size(1) == n,
              kName, ": the state of a parameter of shape ", p.sizes(), " must be (", slots, ", ",
              n, "), got ", st.state().defined() ? st.state().sizes() : at::IntArrayRef{},
              " (saved with another memory kind, or by a version that stored it as "
              "(numel, state_size))");
  TORCH_CHECK(st.controller().defined() && st.controller().numel() == detail::kTensorState, kName,
              ": the state of a parameter of shape ", p.sizes(), " must have a ",
              detail::kTensorState, "-entry step-size controller, got ",
              st.controller().defined() ? st.controller().numel() : 0,
              " (saved by a version before it)");
  // The controller is read and written through its CPU storage: tensor operations on five values
  // cost more than a small tensor's whole step.
  if (st.controller().scalar_type() != at::kFloat || !st.controller().is_contiguous() ||
      !st.controller().device().is_cpu())
    st.controller(st.controller().to(at::kCPU, at::kFloat).contiguous());
}

// The rule on a parameter's device: the rule itself for CPU parameters; for others its replica,
// made on first use and refreshed from the rule once per step (`refreshed` holds the devices done).
LearnedOptimizerModel model_on(const LearnedOptimizerModel& model,
                               CoordinateMnemosyne::Replicas& replicas, const torch::Device& device,
                               std::set<std::string>& refreshed) {
  if (device.is_cpu()) return model;
  const auto key = device.str();
  auto it = replicas.find(key);
  if (it == replicas.end()) {
    auto replica = std::dynamic_pointer_cast<LearnedOptimizerModelImpl>(model->clone(device));
    it = replicas.emplace(key, LearnedOptimizerModel(replica)).first;
  } else if (!refreshed.count(key)) {
    const auto source = model->named_parameters(), target = it->second->named_parameters();
    for (const auto& item : source) target[item.key()].copy_(item.value());
    const auto source_buffers = model->named_buffers(),
               target_buffers = it->second->named_buffers();
    for (const auto& item : source_buffers) target_buffers[item.key()].copy_(item.value());
  }
  refreshed.insert(key);
  return it->second;
}

}  // namespace

torch::Tensor CoordinateMnemosyne::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  const torch::Tensor loss = flt::detail::closure_loss(closure);
  step_parameters(model_, replicas_, steps_with_gradients());
  return loss;
}

void CoordinateMnemosyne::step_parameters(LearnedOptimizerModel model, Replicas& replicas,
                                          const std::vector<Step>& parameters) {
  torch::NoGradGuard no_grad;
  // Read once per step, shared by every tensor: the controller's meta-parameters.
  const auto controller_parameters = detail::LearnedModelInternals::controller_parameters(*model);
  // Fused tensors are gathered and stepped together, one parallel loop per step index (tensors
  // added later count their own steps), after every other tensor.
  struct Pending {
    CoordinateMnemosyneParamState* st;
    float* controller;
    detail::TensorState tensor_state;
    size_t entry;
  };
  std::map<int64_t, std::vector<detail::FusedTensor>> fused_by_step;
  std::vector<std::pair<int64_t, Pending>> pending;
  std::set<std::string> refreshed;  // devices whose replica of the rule is current (model_on)
  for (const auto& parameter : parameters) {
    const auto& p = parameter.param;
    if (!p.grad().defined()) continue;
    const auto& options = *parameter.options;
    options.check(kName);  // a group's options can be edited between steps
    const auto& grad = p.grad();
    TORCH_CHECK(!grad.is_sparse(), kName,
                ": sparse gradients are not supported (parameter of shape ", p.sizes(), ")");
    auto& st = *parameter.state;
    auto on_device = model_on(model, replicas, p.device(), refreshed);
    prepare_state(*model, *on_device, st, p);
    st.step(st.step() + 1);
    float* controller = st.controller().data_ptr<float>();
    detail::TensorState tensor_state{};
    std::copy(controller, controller + detail::kTensorState, tensor_state.begin());
    const double step_size =
        options.lr() * detail::tensor_step_size(controller_parameters, tensor_state, st.step(),
                                                options.total_steps());
    st.last_step_size(step_size);
    const bool copied = !p.is_contiguous();
    auto flat_param = p.detach().reshape({-1});  // a view unless the parameter is non-contiguous
    const auto flat_grad = grad.detach().reshape({-1});
    if (options.fused() && !copied && p.scalar_type() == at::kFloat && p.device().is_cpu() &&
        detail::LearnedModelInternals::fused_supported(*model)) {
      auto& entries = fused_by_step[st.step()];
      entries.push_back({flat_param, flat_grad, st.state(), step_size, {}});
      pending.push_back({st.step(), {&st, controller, tensor_state, entries.size() - 1}});
      continue;
    }
    const auto result = composite_step(on_device, flat_param, flat_grad, st.state(), st.step(),
                                       step_size, options.chunk_size());
    finish_tensor(controller_parameters, st, controller, tensor_state, result.skipped,
                  result.statistics, p.numel());
    if (copied) p.detach().copy_(flat_param.view(p.sizes()));
  }
  // The fused batch: the weights prepared once per step index, every tensor of it in one loop.
  for (auto& [t, entries] : fused_by_step)
    detail::LearnedModelInternals::fused_steps_(
        *model, *detail::LearnedModelInternals::prepare_fused_step(*model, t), entries);
  for (const auto& [t, job] : pending) {
    const auto& entry = fused_by_step[t][job.entry];
    finish_tensor(controller_parameters, *job.st, job.controller, job.tensor_state,
                  entry.result.skipped, entry.result.statistics, entry.param.numel());
  }
}

void CoordinateMnemosyne::save(torch::serialize::OutputArchive& archive) const {
  torch::optim::serialize<CoordinateMnemosyneParamState, CoordinateMnemosyneOptions>(archive,
                                                                                     *this);
  torch::serialize::OutputArchive model_archive(archive.compilation_unit());
  write_model(model_archive, *model_);
  archive.write("learned_model", model_archive);
}

void CoordinateMnemosyne::load(torch::serialize::InputArchive& archive) {
  detail::check_learned_state_archive(archive, kName, "coordinate-memory");
  torch::optim::serialize<CoordinateMnemosyneParamState, CoordinateMnemosyneOptions>(archive,
                                                                                     *this);
  restore_group_options(archive);
  torch::serialize::InputArchive model_archive;
  if (archive.try_read("learned_model", model_archive)) {
    model_ = read_model(model_archive, "the optimizer archive");
    replicas_.clear();  // replicas of the old rule
  }
}

}  // namespace flt::optim
