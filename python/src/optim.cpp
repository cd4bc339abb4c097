// fltlab._C: the optimizers (flt::optim::CoordinateMnemosyne, ScheduleMnemosyne and Swarm) for the
// Python classes of python/fltlab/optim.py. Thin: every step, check and decision is the library's;
// this file only moves options, tensors and state between the two languages.
#include <pybind11/functional.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/serialize/archive.h>

#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "bindings.h"
#include "flt/detail/optimizer_state.h"
#include "flt/optim/mnemosyne.h"
#include "flt/optim/swarm.h"

namespace flt::python {
namespace {

namespace fo = flt::optim;

// What the binding needs to know of each learned optimizer: its rule (the archive key it is saved
// under and how), and the names of its per-parameter state's two tensors, the per-coordinate one
// and the per-tensor one (the keys of the Python state_dict).
struct CoordinateTraits {
  using Optimizer = fo::CoordinateMnemosyne;
  using Rule = fo::LearnedOptimizerModel;
  static constexpr const char* kName = "CoordinateMnemosyne";
  static constexpr const char* kRuleKey = "learned_model";
  static constexpr const char* kCoordinates = "state";
  static constexpr const char* kTensor = "controller";
  static Rule rule(const Optimizer& o) { return o.model(); }
  static void write_rule(torch::serialize::OutputArchive& a, const Rule& r) {
    fo::write_model(a, *r);
  }
  static Rule read_rule(torch::serialize::InputArchive& a) {
    return fo::read_model(a, "the state_dict's rule");
  }
  static torch::Tensor coordinates(const Optimizer::ParamState& st) { return st.state(); }
  static torch::Tensor tensor(const Optimizer::ParamState& st) { return st.controller(); }
  static void set(Optimizer::ParamState& st, const at::Tensor& coordinates,
                  const at::Tensor& tensor) {
    st.state(coordinates);
    st.controller(tensor);
  }
};

struct ScheduleTraits {
  using Optimizer = fo::ScheduleMnemosyne;
  using Rule = fo::LearnedSchedule;
  static constexpr const char* kName = "ScheduleMnemosyne";
  static constexpr const char* kRuleKey = "learned_schedule";
  static constexpr const char* kCoordinates = "moments";
  static constexpr const char* kTensor = "history";
  static Rule rule(const Optimizer& o) { return o.schedule(); }
  static void write_rule(torch::serialize::OutputArchive& a, const Rule& r) {
    fo::write_schedule(a, *r);
  }
  static Rule read_rule(torch::serialize::InputArchive& a) {
    return fo::read_schedule(a, "the state_dict's rule");
  }
  static torch::Tensor coordinates(const Optimizer::ParamState& st) { return st.moments(); }
  static torch::Tensor tensor(const Optimizer::ParamState& st) { return st.history(); }
  static void set(Optimizer::ParamState& st, const at::Tensor& coordinates,
                  const at::Tensor& tensor) {
    st.moments(coordinates);
    st.history(tensor);
  }
};

// The library optimizer behind fltlab.optim.CoordinateMnemosyne / ScheduleMnemosyne. The Python
// optimizer owns the parameter groups (their lr and total_steps are copied into the library's
// groups at every step, so schedulers work); the library owns the per-parameter state, which the
// Python side reads and writes for state_dict and load_state_dict.
template <class Traits>
class PyLearnedOptimizer {
 public:
  using Optimizer = typename Traits::Optimizer;
  using Options = typename Optimizer::Options;
  using ParamState = typename Optimizer::ParamState;

  /// A new optimizer; `rule` (bytes from `rule()`) replaces the rule that memory, weights and
  /// untrained select (load_state_dict continues with the saved rule).
  PyLearnedOptimizer(const std::vector<std::vector<at::Tensor>>& groups,
                     const std::vector<double>& lrs, const std::vector<int64_t>& total_steps,
                     const std::string& memory, const std::string& weights, bool untrained,
                     const py::object& rule) {
    TORCH_CHECK(!groups.empty() && groups.size() == lrs.size() && lrs.size() == total_steps.size(),
                Traits::kName, ": ", groups.size(), " parameter groups with ", lrs.size(),
                " lr and ", total_steps.size(), " total_steps values");
    Options defaults(lrs[0]);
    defaults.total_steps(total_steps[0])
        .memory(fo::memory_from_name(memory))
        .weights(weights)
        .untrained(untrained);
    if (rule.is_none()) {
      std::vector<torch::optim::OptimizerParamGroup> param_groups;
      for (size_t i = 0; i < groups.size(); ++i)
        param_groups.emplace_back(
            groups[i], std::make_unique<Options>(options(defaults, lrs[i], total_steps[i])));
      optimizer_ = std::make_unique<Optimizer>(std::move(param_groups), defaults);
      return;
    }
    const std::string data = rule.cast<std::string>();
    torch::serialize::InputArchive archive;
    archive.load_from(data.data(), data.size());
    torch::serialize::InputArchive part;
    TORCH_CHECK(archive.try_read(Traits::kRuleKey, part), Traits::kName,
                ".load_state_dict: the state_dict's \"rule\" is not a ", Traits::kName,
                "'s rule (it holds ", key_list(archive), "; a state_dict of ",
                std::string(Traits::kName) == "ScheduleMnemosyne" ? "CoordinateMnemosyne"
                                                                  : "ScheduleMnemosyne",
                "?)");
    optimizer_ = std::make_unique<Optimizer>(groups[0], defaults, Traits::read_rule(part));
    for (size_t i = 1; i < groups.size(); ++i) add_group(groups[i], lrs[i], total_steps[i]);
  }

  /// A group added after construction, checked by the library's constructor as the first ones.
  void add_group(const std::vector<at::Tensor>& params, double lr, int64_t total_steps) {
    const auto& defaults = static_cast<const Options&>(optimizer_->defaults());
    const auto group_options = options(defaults, lr, total_steps);
    Optimizer(params, group_options, Traits::rule(*optimizer_));
    optimizer_->add_param_group(
        torch::optim::OptimizerParamGroup(params, std::make_unique<Options>(group_options)));
  }

  /// One step with each group's lr and total_steps as the Python groups hold them now.
  void step(const std::vector<double>& lrs, const std::vector<int64_t>& total_steps) {
    auto& groups = optimizer_->param_groups();
    TORCH_CHECK(lrs.size() == groups.size() && total_steps.size() == groups.size(), Traits::kName,
                ".step: the optimizer has ", groups.size(), " parameter groups, got ", lrs.size(),
                " lr and ", total_steps.size(), " total_steps values");
    for (size_t i = 0; i < groups.size(); ++i)
      static_cast<Options&>(groups[i].options()).lr(lrs[i]).total_steps(total_steps[i]);
    py::gil_scoped_release release;
    optimizer_->step();
  }

  /// The state of every parameter, group by group: a dict, or None before its first step.
  py::list states() const {
    py::list out;
    const auto& state = optimizer_->state();
    for (const auto& group : optimizer_->param_groups()) {
      for (const auto& p : group.params()) {
        const auto it = state.find(detail::state_key(state, p));
        if (it == state.end()) {
          out.append(py::none());
          continue;
        }
        const auto& st = static_cast<const ParamState&>(*it->second);
        py::dict entry;
        entry["step"] = st.step();
        entry[Traits::kCoordinates] = Traits::coordinates(st);
        entry[Traits::kTensor] = Traits::tensor(st);
        entry["skipped"] = st.skipped();
        entry["last_step_size"] = st.last_step_size();
        out.append(entry);
      }
    }
    return out;
  }

  /// Sets the state of parameter `index` of group `group` (the library checks its shapes at the
  /// next step and names what does not fit).
  void set_state(int64_t group, int64_t index, int64_t step, const at::Tensor& coordinates,
                 const at::Tensor& tensor, int64_t skipped, double last_step_size) {
    auto& groups = optimizer_->param_groups();
    TORCH_CHECK(group >= 0 && group < static_cast<int64_t>(groups.size()), Traits::kName,
                ".load_state_dict: no parameter group ", group);
    const auto& params = groups[group].params();
    TORCH_CHECK(index >= 0 && index < static_cast<int64_t>(params.size()), Traits::kName,
                ".load_state_dict: group ", group, " has no parameter ", index);
    TORCH_CHECK(step >= 0, Traits::kName, ".load_state_dict: step must be >= 0, got ", step);
    auto st = std::make_unique<ParamState>();
    st->step(step);
    Traits::set(*st, coordinates, tensor);
    st->skipped(skipped);
    st->last_step_size(last_step_size);
    auto& map = optimizer_->state();
    map[detail::state_key(map, params[index])] = std::move(st);
  }

  void report_loss(double loss) { optimizer_->report_loss(loss); }
  void report_validation(double metric) { optimizer_->report_validation(metric); }
  int64_t skipped() const { return optimizer_->skipped(); }
  std::vector<double> step_sizes() const { return optimizer_->step_sizes(); }
  /// The rule as the bytes of an archive {kRuleKey: ...}, as the optimizer's save writes it.
  py::bytes rule() const {
    torch::serialize::OutputArchive archive;
    torch::serialize::OutputArchive part(archive.compilation_unit());
    Traits::write_rule(part, Traits::rule(*optimizer_));
    archive.write(Traits::kRuleKey, part);
    std::ostringstream out;
    archive.save_to(out);
    return py::bytes(out.str());
  }

  static void bind(py::module_& m) {
    using Self = PyLearnedOptimizer;
    py::class_<Self>(m, Traits::kName)
        .def(py::init<const std::vector<std::vector<at::Tensor>>&, const std::vector<double>&,
                      const std::vector<int64_t>&, const std::string&, const std::string&, bool,
                      const py::object&>(),
             py::arg("groups"), py::arg("lrs"), py::arg("total_steps"), py::arg("memory"),
             py::arg("weights"), py::arg("untrained"), py::arg("rule") = py::none())
        .def("add_group", &Self::add_group)
        .def("step", &Self::step)
        .def("states", &Self::states)
        .def("set_state", &Self::set_state)
        .def("report_loss", &Self::report_loss)
        .def("report_validation", &Self::report_validation)
        .def("skipped", &Self::skipped)
        .def("step_sizes", &Self::step_sizes)
        .def("rule", &Self::rule);
  }

 private:
  static Options options(const Options& defaults, double lr, int64_t total_steps) {
    return Options(defaults).lr(lr).total_steps(total_steps);
  }
  // The archive's keys, for errors.
  static std::string key_list(torch::serialize::InputArchive& archive) {
    std::string list;
    for (const auto& key : archive.keys()) list += (list.empty() ? "" : ", ") + key;
    return "{" + list + "}";
  }
  std::unique_ptr<Optimizer> optimizer_;
};

fo::SearchBox search_box(const at::Tensor& lower, const at::Tensor& upper) {
  fo::SearchBox box{lower.to(at::kDouble), upper.to(at::kDouble)};
  box.check("Swarm");
  return box;
}

py::dict search_result(const fo::SearchResult& result) {
  py::dict out;
  out["best_x"] = result.best_x;
  out["best_value"] = result.best_value;
  out["evaluations"] = result.evaluations;
  out["best_history"] = result.best_history;
  out["evaluation_history"] = result.evaluation_history;
  return out;
}

}  // namespace

void bind_optim(py::module_& m) {
  PyLearnedOptimizer<CoordinateTraits>::bind(m);
  PyLearnedOptimizer<ScheduleTraits>::bind(m);
  m.def("pretrained_memories", [] {
    std::vector<std::string> names;
    for (auto memory : fo::pretrained_memories()) names.push_back(fo::memory_name(memory));
    return names;
  });

  py::class_<fo::Swarm>(m, "Swarm")
      .def(py::init([](int64_t particles, const std::string& variant, double initial_sigma,
                       bool use_gradients, int64_t budget, uint64_t seed,
                       const std::string& weights) {
             return std::make_unique<fo::Swarm>(fo::SwarmOptions()
                                                    .particles(particles)
                                                    .variant(fo::swarm_variant_from_name(variant))
                                                    .initial_sigma(initial_sigma)
                                                    .use_gradients(use_gradients)
                                                    .budget(budget)
                                                    .seed(seed)
                                                    .weights(weights));
           }),
           py::arg("particles"), py::arg("variant"), py::arg("initial_sigma"),
           py::arg("use_gradients"), py::arg("budget"), py::arg("seed"), py::arg("weights"))
      .def("reset", [](fo::Swarm& swarm, const at::Tensor& lower,
                       const at::Tensor& upper) { swarm.reset(search_box(lower, upper)); })
      .def("ask", &fo::Swarm::ask)
      .def("tell",
           [](fo::Swarm& swarm, const at::Tensor& values, const c10::optional<at::Tensor>& grads) {
             swarm.tell(values, grads.value_or(at::Tensor()));
           })
      .def("minimize",
           [](fo::Swarm& swarm, const fo::BatchObjective& f, const at::Tensor& lower,
              const at::Tensor& upper, int64_t budget) {
             return search_result(swarm.minimize(f, search_box(lower, upper), budget));
           })
      .def("minimize_around",
           [](fo::Swarm& swarm, const fo::BatchObjective& f, const at::Tensor& x0, int64_t budget) {
             return search_result(swarm.minimize(f, x0.to(at::kDouble), budget));
           })
      .def("set_budget", &fo::Swarm::set_budget)
      .def("best_x", &fo::Swarm::best_x)
      .def("best_value", &fo::Swarm::best_value)
      .def("name", &fo::Swarm::name)
      .def("needs_gradients", &fo::Swarm::needs_gradients)
      .def("attention_weights", &fo::Swarm::attention_weights);
  m.attr("swarm_default_budget_per_dim") = fo::kSwarmDefaultBudgetPerDim;
}

}  // namespace flt::python
