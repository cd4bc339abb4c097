#include "flt/optim/learned_optimizer.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "flt/detail/optimizer_state.h"
#include "flt/optim/coordinate_mnemosyne.h"
#include "flt/optim/schedule_mnemosyne.h"

namespace flt::optim {
namespace detail {
namespace {

// The archive's own keys, sorted, without the "training" flag every archive carries.
std::string key_list(torch::serialize::InputArchive& archive) {
  auto keys = archive.keys();
  keys.erase(std::remove(keys.begin(), keys.end(), "training"), keys.end());
  std::sort(keys.begin(), keys.end());
  std::string list;
  for (const auto& key : keys) list += (list.empty() ? "" : ", ") + key;
  return "{" + list + "}";
}

std::string class_of_design(const std::string& design) {
  return design == "tensor-schedule" ? "flt::optim::ScheduleMnemosyne"
                                     : "flt::optim::CoordinateMnemosyne";
}

}  // namespace

void check_parameter_groups(const std::vector<torch::optim::OptimizerParamGroup>& groups,
                            const char* name) {
  std::set<const void*> seen;
  int64_t count = 0;
  for (const auto& group : groups) {
    for (size_t i = 0; i < group.params().size(); ++i) {
      const auto& p = group.params()[i];
      TORCH_CHECK(p.defined(), name, ": parameter ", i, " is an undefined tensor");
      TORCH_CHECK(p.is_leaf(), name, ": parameter ", i, " of shape ", p.sizes(),
                  " is not a leaf tensor (it is computed from others); pass the leaves");
      TORCH_CHECK(p.is_floating_point(), name, ": parameter ", i, " has dtype ", p.scalar_type(),
                  "; only floating-point parameters can be optimised");
      TORCH_CHECK(seen.insert(p.unsafeGetTensorImpl()).second, name, ": parameter ", i,
                  " of shape ", p.sizes(), " appears more than once");
      ++count;
    }
  }
  TORCH_CHECK(count > 0, name, ": the parameter list is empty");
}

// LibTorch's optimizer loader meets another optimizer's archive (say Adam's) with an INTERNAL
// ASSERT that asks for a PyTorch bug report; recognise it first by the parameter-group options
// (those the options' serialize writes) and name what the archive holds instead.
void check_learned_state_archive(torch::serialize::InputArchive& archive, const char* name,
                                 const std::string& design) {
  torch::IValue version;
  torch::serialize::InputArchive groups, group, options;
  TORCH_CHECK(
      archive.try_read("pytorch_version", version) && archive.try_read("param_groups", groups),
      name, "::load: the archive is not an optimizer state (it holds ", key_list(archive), ")");
  // No parameter group to look at: LibTorch's loader reports the group count itself.
  if (!groups.try_read("param_groups/0", group) || !group.try_read("options", options)) return;
  torch::IValue value;
  if (options.try_read("memory", value) && options.try_read("chunk_size", value)) {
    const std::string saved =
        options.try_read("design", value) ? value.toStringRef() : "coordinate-memory";
    TORCH_CHECK(saved == design, name, "::load: the archive is the state of a ", saved,
                " learned optimizer; load it with ", class_of_design(saved));
    return;
  }
  const std::string found = key_list(options);
  const std::string origin =
      found == "{amsgrad, betas, eps, lr, weight_decay}" ? " (torch::optim::Adam or AdamW)"
      : found == "{dampening, lr, momentum, nesterov, weight_decay}" ? " (torch::optim::SGD)"
                                                                     : "";
  TORCH_CHECK(false, name,
              "::load: the archive is not a learned optimizer's state: its parameter groups have "
              "the options ",
              found, origin, ", a ", name,
              " state has {chunk_size, design, fused, lr, memory, total_steps, untrained, "
              "weights}");
}

}  // namespace detail

template <class ParamState, class Options>
int64_t LearnedOptimizer<ParamState, Options>::skipped() const {
  int64_t total = 0;
  for (const auto& entry : state_) total += static_cast<const ParamState&>(*entry.second).skipped();
  return total;
}

template <class ParamState, class Options>
std::vector<double> LearnedOptimizer<ParamState, Options>::step_sizes() const {
  std::vector<double> sizes;
  for (const auto& group : param_groups_) {
    for (const auto& p : group.params()) {
      const auto it = state_.find(flt::detail::state_key(state_, p));
      sizes.push_back(
          it == state_.end() ? 0.0 : static_cast<const ParamState&>(*it->second).last_step_size());
    }
  }
  return sizes;
}

template <class ParamState, class Options>
auto LearnedOptimizer<ParamState, Options>::steps_with_gradients() -> std::vector<Step> {
  std::vector<Step> steps;
  for (auto& group : param_groups_) {
    const auto& options = static_cast<const Options&>(group.options());
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      auto& st = state_[flt::detail::state_key(state_, p)];
      if (!st) st = std::make_unique<ParamState>();
      steps.push_back({p, static_cast<ParamState*>(st.get()), &options});
    }
  }
  return steps;
}

template class LearnedOptimizer<CoordinateMnemosyneParamState, CoordinateMnemosyneOptions>;
template class LearnedOptimizer<ScheduleMnemosyneParamState, ScheduleMnemosyneOptions>;

}  // namespace flt::optim
