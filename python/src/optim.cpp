// fltlab._C: the optimizers (flt::optim::Mnemosyne and Swarm) for the Python classes of
// python/fltlab/optim.py. Thin: every step, check and decision is the library's; this file only
// moves options, tensors and state between the two languages.
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

fo::MnemosyneOptions& group_options(torch::optim::OptimizerParamGroup& group) {
  return static_cast<fo::MnemosyneOptions&>(group.options());
}

// The learned rule of an optimizer as the bytes of an archive: {"learned_model": ...} (the first
// design) or {"learned_schedule": ...} (the second), as Mnemosyne::save writes them.
py::bytes rule_bytes(const fo::Mnemosyne& optimizer) {
  torch::serialize::OutputArchive archive;
  torch::serialize::OutputArchive rule(archive.compilation_unit());
  if (optimizer.schedule()) {
    fo::write_schedule(rule, *optimizer.schedule());
    archive.write("learned_schedule", rule);
  } else {
    fo::write_model(rule, *optimizer.model());
    archive.write("learned_model", rule);
  }
  std::ostringstream out;
  archive.save_to(out);
  return py::bytes(out.str());
}

// The Mnemosyne behind fltlab.optim.Mnemosyne. The Python optimizer owns the parameter groups
// (their lr and total_steps are copied into the library's groups at every step, so schedulers
// work); the library owns the per-parameter state, which the Python side reads and writes for
// state_dict and load_state_dict.
class PyMnemosyne {
 public:
  /// A new optimizer; `rule` (bytes from `rule()`) replaces the rule that memory, weights and
  /// design select (load_state_dict continues with the saved rule).
  PyMnemosyne(const std::vector<std::vector<at::Tensor>>& groups, const std::vector<double>& lrs,
              const std::vector<int64_t>& total_steps, const std::string& memory,
              const std::string& weights, const std::string& design, const py::object& rule) {
    TORCH_CHECK(!groups.empty() && groups.size() == lrs.size() && lrs.size() == total_steps.size(),
                "Mnemosyne: ", groups.size(), " parameter groups with ", lrs.size(), " lr and ",
                total_steps.size(), " total_steps values");
    fo::MnemosyneOptions defaults(lrs[0]);
    defaults.total_steps(total_steps[0])
        .memory(fo::memory_from_name(memory))
        .weights(weights)
        .design(fo::design_from_name(design));
    if (rule.is_none()) {
      std::vector<torch::optim::OptimizerParamGroup> param_groups;
      for (size_t i = 0; i < groups.size(); ++i)
        param_groups.emplace_back(groups[i], std::make_unique<fo::MnemosyneOptions>(
                                                 options(defaults, lrs[i], total_steps[i])));
      optimizer_ = std::make_unique<fo::Mnemosyne>(std::move(param_groups), defaults);
      return;
    }
    const std::string data = rule.cast<std::string>();
    torch::serialize::InputArchive archive;
    archive.load_from(data.data(), data.size());
    torch::serialize::InputArchive part;
    if (archive.try_read("learned_schedule", part)) {
      optimizer_ = std::make_unique<fo::Mnemosyne>(
          groups[0], defaults, fo::read_schedule(part, "the state_dict's rule"));
    } else {
      TORCH_CHECK(archive.try_read("learned_model", part),
                  "Mnemosyne.load_state_dict: the state_dict's \"rule\" holds neither a learned "
                  "model nor a learned schedule");
      optimizer_ = std::make_unique<fo::Mnemosyne>(groups[0], defaults,
                                                   fo::read_model(part, "the state_dict's rule"));
    }
    for (size_t i = 1; i < groups.size(); ++i) add_group(groups[i], lrs[i], total_steps[i]);
  }

  /// A group added after construction, checked by the library's constructor as the first ones.
  void add_group(const std::vector<at::Tensor>& params, double lr, int64_t total_steps) {
    const auto& defaults = static_cast<const fo::MnemosyneOptions&>(optimizer_->defaults());
    const auto group_options = options(defaults, lr, total_steps);
    if (optimizer_->schedule())
      fo::Mnemosyne(params, group_options, optimizer_->schedule());
    else
      fo::Mnemosyne(params, group_options, optimizer_->model());
    optimizer_->add_param_group(torch::optim::OptimizerParamGroup(
        params, std::make_unique<fo::MnemosyneOptions>(group_options)));
  }

  /// One step with each group's lr and total_steps as the Python groups hold them now.
  void step(const std::vector<double>& lrs, const std::vector<int64_t>& total_steps) {
    auto& groups = optimizer_->param_groups();
    TORCH_CHECK(lrs.size() == groups.size() && total_steps.size() == groups.size(),
                "Mnemosyne.step: the optimizer has ", groups.size(), " parameter groups, got ",
                lrs.size(), " lr and ", total_steps.size(), " total_steps values");
    for (size_t i = 0; i < groups.size(); ++i)
      group_options(groups[i]).lr(lrs[i]).total_steps(total_steps[i]);
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
        const auto& st = static_cast<const fo::MnemosyneParamState&>(*it->second);
        py::dict entry;
        entry["step"] = st.step();
        entry["state"] = st.state();
        entry["controller"] = st.controller();
        entry["skipped"] = st.skipped();
        entry["last_step_size"] = st.last_step_size();
        out.append(entry);
      }
    }
    return out;
  }

  /// Sets the state of parameter `index` of group `group` (the library checks its shapes at the
  /// next step and names what does not fit).
  void set_state(int64_t group, int64_t index, int64_t step, const at::Tensor& state,
                 const at::Tensor& controller, int64_t skipped, double last_step_size) {
    auto& groups = optimizer_->param_groups();
    TORCH_CHECK(group >= 0 && group < static_cast<int64_t>(groups.size()),
                "Mnemosyne.load_state_dict: no parameter group ", group);
    const auto& params = groups[group].params();
    TORCH_CHECK(index >= 0 && index < static_cast<int64_t>(params.size()),
                "Mnemosyne.load_state_dict: group ", group, " has no parameter ", index);
    TORCH_CHECK(step >= 0, "Mnemosyne.load_state_dict: step must be >= 0, got ", step);
    auto st = std::make_unique<fo::MnemosyneParamState>();
    st->step(step);
    st->state(state);
    st->controller(controller);
    st->skipped(skipped);
    st->last_step_size(last_step_size);
    auto& map = optimizer_->state();
    map[detail::state_key(map, params[index])] = std::move(st);
  }

  void report_loss(double loss) { optimizer_->report_loss(loss); }
  void report_validation(double metric) { optimizer_->report_validation(metric); }
  int64_t skipped() const { return optimizer_->skipped(); }
  std::vector<double> step_sizes() const { return optimizer_->step_sizes(); }
  std::string design() const {
    return fo::design_name(optimizer_->schedule() ? fo::MnemosyneDesign::kTensorSchedule
                                                  : fo::MnemosyneDesign::kCoordinateMemory);
  }
  py::bytes rule() const { return rule_bytes(*optimizer_); }

 private:
  static fo::MnemosyneOptions options(const fo::MnemosyneOptions& defaults, double lr,
                                      int64_t total_steps) {
    return fo::MnemosyneOptions(defaults).lr(lr).total_steps(total_steps);
  }
  std::unique_ptr<fo::Mnemosyne> optimizer_;
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
  py::class_<PyMnemosyne>(m, "Mnemosyne")
      .def(py::init<const std::vector<std::vector<at::Tensor>>&, const std::vector<double>&,
                    const std::vector<int64_t>&, const std::string&, const std::string&,
                    const std::string&, const py::object&>(),
           py::arg("groups"), py::arg("lrs"), py::arg("total_steps"), py::arg("memory"),
           py::arg("weights"), py::arg("design"), py::arg("rule") = py::none())
      .def("add_group", &PyMnemosyne::add_group)
      .def("step", &PyMnemosyne::step)
      .def("states", &PyMnemosyne::states)
      .def("set_state", &PyMnemosyne::set_state)
      .def("report_loss", &PyMnemosyne::report_loss)
      .def("report_validation", &PyMnemosyne::report_validation)
      .def("skipped", &PyMnemosyne::skipped)
      .def("step_sizes", &PyMnemosyne::step_sizes)
      .def("design", &PyMnemosyne::design)
      .def("rule", &PyMnemosyne::rule);
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
