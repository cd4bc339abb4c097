// fltlab._C: the optimizers' rules and steps (flt::optim::CoordinateMnemosyne, ScheduleMnemosyne)
// and Swarm for the Python classes of python/fltlab/optim.py. Thin: every step, check and decision
// is the library's; this file only moves options, tensors and state between the two languages.
#include <pybind11/functional.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/serialize/archive.h>

#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "bindings.h"
#include "flt/optim/mnemosyne.h"
#include "flt/optim/swarm.h"

namespace flt::python {
namespace {

namespace fo = flt::optim;

// What the binding needs to know of each learned optimizer: its rule (how it is chosen, saved and
// stepped), and the names of its per-parameter state's two tensors, the per-coordinate one and the
// per-tensor one (the keys of a state in the Python optimizer's `state`).
struct CoordinateTraits {
  using Optimizer = fo::CoordinateMnemosyne;
  using Rule = fo::LearnedOptimizerModel;
  static constexpr const char* kName = "CoordinateMnemosyne";
  static constexpr const char* kRuleKey = "learned_model";
  static constexpr const char* kCoordinates = "state";
  static constexpr const char* kTensor = "controller";
  // The rule's copies on other devices live as long as the Python optimizer's rule.
  struct Cache {
    Optimizer::Replicas replicas;
  };
  static Rule rule_for(const Optimizer::Options& options) { return Optimizer::model_for(options); }
  static void step(Rule& rule, Cache& cache, const std::vector<Optimizer::Step>& parameters,
                   const fo::ReportedSignals&) {
    Optimizer::step_parameters(rule, cache.replicas, parameters);
  }
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
  struct Cache {};
  static Rule rule_for(const Optimizer::Options& options) {
    return Optimizer::schedule_for(options);
  }
  static void step(Rule& rule, Cache&, const std::vector<Optimizer::Step>& parameters,
                   const fo::ReportedSignals& signals) {
    Optimizer::step_parameters(rule, parameters, signals);
  }
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

// The learned rule behind fltlab.optim.CoordinateMnemosyne / ScheduleMnemosyne, and its step over
// states the Python optimizer keeps (in `optimizer.state`, as torch.optim's optimizers do): the
// pattern of PyTorch's fused optimizers. The step is the library's own (`step_parameters`, which
// the C++ optimizers' step() runs too), so a Python loop and a C++ loop take the same trajectory.
template <class Traits>
class PyLearnedRule {
 public:
  using Optimizer = typename Traits::Optimizer;
  using Options = typename Optimizer::Options;
  using ParamState = typename Optimizer::ParamState;

  /// The rule that memory, weights and untrained select, or `rule` (bytes from `to_bytes()`:
  /// load_state_dict continues with the saved rule).
  PyLearnedRule(const std::string& memory, const std::string& weights, bool untrained,
                const py::object& rule) {
    if (rule.is_none()) {
      rule_ = Traits::rule_for(
          Options().memory(fo::memory_from_name(memory)).weights(weights).untrained(untrained));
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
    rule_ = Traits::read_rule(part);
  }

  /// One step of `params` (each with a gradient) with their states: dicts, empty before a
  /// parameter's first step, updated in place; each parameter's lr and total_steps (0: unknown);
  /// the training loss and validation metric the loop reported (None: none).
  void step(const std::vector<at::Tensor>& params, const std::vector<py::dict>& states,
            const std::vector<double>& lrs, const std::vector<int64_t>& total_steps,
            c10::optional<double> loss, c10::optional<double> validation) {
    const size_t n = params.size();
    TORCH_CHECK(states.size() == n && lrs.size() == n && total_steps.size() == n, Traits::kName,
                ".step: ", n, " parameters with ", states.size(), " states, ", lrs.size(),
                " lr and ", total_steps.size(), " total_steps values");
    std::vector<ParamState> kept(n);
    std::vector<Options> options;
    options.reserve(n);
    std::vector<typename Optimizer::Step> parameters;
    for (size_t i = 0; i < n; ++i) {
      read_state(states[i], kept[i]);
      options.push_back(Options(lrs[i]).total_steps(total_steps[i]));
      parameters.push_back({params[i], &kept[i], &options.back()});
    }
    fo::ReportedSignals signals;
    if (loss) signals.loss = *loss;
    if (validation) signals.validation = *validation;
    {
      py::gil_scoped_release release;
      Traits::step(rule_, cache_, parameters, signals);
    }
    for (size_t i = 0; i < n; ++i) write_state(kept[i], states[i]);
  }

  /// The rule as the bytes of an archive {kRuleKey: ...}, as the optimizer's save writes it.
  py::bytes to_bytes() const {
    torch::serialize::OutputArchive archive;
    torch::serialize::OutputArchive part(archive.compilation_unit());
    Traits::write_rule(part, rule_);
    archive.write(Traits::kRuleKey, part);
    std::ostringstream out;
    archive.save_to(out);
    return py::bytes(out.str());
  }

  static void bind(py::module_& m) {
    using Self = PyLearnedRule;
    py::class_<Self>(m, (std::string(Traits::kName) + "Rule").c_str())
        .def(py::init<const std::string&, const std::string&, bool, const py::object&>(),
             py::arg("memory"), py::arg("weights"), py::arg("untrained"),
             py::arg("rule") = py::none())
        .def("step", &Self::step)
        .def("to_bytes", &Self::to_bytes);
  }

 private:
  // A state dict of the Python optimizer as the library's state (tensors shared); empty: none yet.
  static void read_state(const py::dict& d, ParamState& st) {
    if (d.size() == 0) return;
    for (const char* key :
         {"step", Traits::kCoordinates, Traits::kTensor, "skipped", "last_step_size"})
      TORCH_CHECK(d.contains(key), Traits::kName, ".step: a parameter's state has no \"", key,
                  "\" (its keys: ", py::str(d.attr("keys")()).template cast<std::string>(), ")");
    st.step(d["step"].cast<int64_t>());
    Traits::set(st, d[Traits::kCoordinates].template cast<at::Tensor>(),
                d[Traits::kTensor].template cast<at::Tensor>());
    st.skipped(d["skipped"].cast<int64_t>());
    st.last_step_size(d["last_step_size"].cast<double>());
  }
  static void write_state(const ParamState& st, py::dict d) {
    d["step"] = st.step();
    d[Traits::kCoordinates] = Traits::coordinates(st);
    d[Traits::kTensor] = Traits::tensor(st);
    d["skipped"] = st.skipped();
    d["last_step_size"] = st.last_step_size();
  }
  // The archive's keys, for errors.
  static std::string key_list(torch::serialize::InputArchive& archive) {
    std::string list;
    for (const auto& key : archive.keys()) list += (list.empty() ? "" : ", ") + key;
    return "{" + list + "}";
  }

  typename Traits::Rule rule_{nullptr};
  typename Traits::Cache cache_;
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
  PyLearnedRule<CoordinateTraits>::bind(m);
  PyLearnedRule<ScheduleTraits>::bind(m);
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
