// fltlab._C: the attention modules, TransformerLM and the functional forms for
// python/fltlab/nn. The modules are the library's own torch::nn modules; the Python side holds
// ordinary parameters, points the library's tensors at them before each call and routes the
// gradients back (python/fltlab/nn/modules.py).
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "bindings.h"
#include "flt/attention.h"

namespace flt::python {
namespace {

namespace fa = flt::attention;

// ---- options from Python keyword arguments ------------------------------------------------------

// Reads keyword arguments into an options struct, naming the function, the option and the value
// when one does not convert; finish() names any option the variant does not have. Each option is
// given with its value in a default-constructed options struct, which defaults() returns: the
// defaults the Python modules' signatures spell out (python_test_nn checks them against these).
class Options {
 public:
  Options(std::string fn, const py::dict& kwargs) : fn_(std::move(fn)) {
    for (const auto& item : kwargs) {
      TORCH_CHECK(py::isinstance<py::str>(item.first), fn_, ": option names must be strings");
      left_[item.first.cast<std::string>()] = py::reinterpret_borrow<py::object>(item.second);
    }
  }

  /// Calls set(value) when `name` was given; `current` is its value before (the default).
  template <typename T, typename Set>
  void take(const char* name, const T& current, Set set) {
    known_.insert(name);
    defaults_[name] = py::cast(current);
    const auto it = left_.find(name);
    if (it == left_.end()) return;
    const py::object value = it->second;
    left_.erase(it);
    T converted;
    try {
      if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        TORCH_CHECK(py::isinstance<py::int_>(value) && !py::isinstance<py::bool_>(value), fn_, ": ",
                    name, " must be an integer, got ", py::repr(value).cast<std::string>());
      }
      if constexpr (std::is_same_v<T, bool>) {
        TORCH_CHECK(py::isinstance<py::bool_>(value), fn_, ": ", name,
                    " must be True or False, got ", py::repr(value).cast<std::string>());
      }
      converted = value.cast<T>();
    } catch (const py::cast_error&) {
      TORCH_CHECK(false, fn_, ": ", name,
                  " has the wrong type: ", py::repr(value).cast<std::string>());
    }
    set(converted);
  }

  /// An option given by name (enums): parse(name) throws naming an unknown one.
  template <typename Parse, typename Set>
  void take_name(const char* name, const std::string& current, Parse parse, Set set) {
    take<std::string>(name, current, [&](const std::string& value) { set(parse(value)); });
  }

  /// Every option's default, by name.
  py::dict defaults() const {
    py::dict out;
    for (const auto& [name, value] : defaults_) out[py::str(name)] = value;
    return out;
  }

  /// An unknown keyword is a TypeError, as Python's own calls raise, naming the valid ones.
  void finish() const {
    if (left_.empty()) return;
    std::string names, valid;
    for (const auto& item : left_) names += (names.empty() ? "" : ", ") + item.first;
    for (const auto& name : known_) valid += (valid.empty() ? "" : ", ") + name;
    throw py::type_error(fn_ + ": unknown option(s) " + names + " (the options: " + valid + ")");
  }

 private:
  std::string fn_;
  std::map<std::string, py::object> left_;
  std::set<std::string> known_;  ///< every option take() was asked for, in sorted order
  std::map<std::string, py::object> defaults_;
};

template <typename Enum>
using NameTable = std::vector<std::pair<const char*, Enum>>;

template <typename Enum>
Enum parse_enum(const char* what, const std::string& name, const NameTable<Enum>& table) {
  std::string known;
  for (const auto& [text, value] : table) {
    if (name == text) return value;
    known += (known.empty() ? "" : ", ") + std::string(text);
  }
  TORCH_CHECK(false, "unknown ", what, " \"", name, "\" (expected one of ", known, ")");
}

template <typename Enum>
std::string enum_name(const NameTable<Enum>& table, Enum value) {
  for (const auto& [text, v] : table)
    if (v == value) return text;
  TORCH_INTERNAL_ASSERT(false, "an enum value without a name");
}

const NameTable<fa::FourierRShape>& r_shapes() {
  static const NameTable<fa::FourierRShape> table = {
      {"scalar", fa::FourierRShape::kScalar},
      {"per_dimension", fa::FourierRShape::kPerDimension},
      {"per_head", fa::FourierRShape::kPerHead},
      {"per_head_dimension", fa::FourierRShape::kPerHeadDimension}};
  return table;
}
fa::FourierRShape r_shape_from_name(const std::string& name) {
  return parse_enum("Fourier r_shape", name, r_shapes());
}
std::string r_shape_name(fa::FourierRShape shape) {
  return enum_name(r_shapes(), shape);
}

fa::FourierPhi phi_from_name(const std::string& name) {
  std::vector<std::pair<const char*, fa::FourierPhi>> table;
  for (auto phi : {fa::FourierPhi::kPower, fa::FourierPhi::kAbs, fa::FourierPhi::kRelu,
                   fa::FourierPhi::kSigmoid})
    table.emplace_back(kernels::fourier_phi_name(phi), phi);
  return parse_enum("Fourier phi", name, table);
}

const NameTable<fa::ProposalKind>& proposals() {
  static const NameTable<fa::ProposalKind> table = {{"gaussian", fa::ProposalKind::kGaussian},
                                                    {"cauchy", fa::ProposalKind::kCauchy}};
  return table;
}
fa::ProposalKind proposal_from_name(const std::string& name) {
  return parse_enum("FLT proposal", name, proposals());
}
std::string proposal_name(fa::ProposalKind proposal) {
  return enum_name(proposals(), proposal);
}

// Every variant's options have heads and head_dim.
template <typename O>
void take_dims(Options& in, O& o) {
  in.take<int64_t>("heads", o.heads(), [&](int64_t v) { o.heads(v); });
  in.take<int64_t>("head_dim", o.head_dim(), [&](int64_t v) { o.head_dim(v); });
}

/// The options of `variant` that `kwargs` give; `defaults`, when given, receives every option's
/// default.
fa::AttentionOptions attention_options(const std::string& variant, const py::dict& kwargs,
                                       py::dict* defaults = nullptr) {
  Options in(variant, kwargs);
  fa::AttentionOptions result;
  if (variant == "softmax") {
    fa::SoftmaxAttentionOptions o;
    in.take<double>("scale", o.scale(), [&](double v) { o.scale(v); });
    take_dims(in, o);
    result = o;
  } else if (variant == "linear") {
    fa::LinearAttentionOptions o;
    in.take<double>("eps", o.eps(), [&](double v) { o.eps(v); });
    take_dims(in, o);
    result = o;
  } else if (variant == "performer") {
    fa::PerformerAttentionOptions o;
    in.take<int64_t>("features", o.features(), [&](int64_t v) { o.features(v); });
    in.take_name("kind", fa::feature_kind_name(o.kind()), fa::feature_kind_from_name,
                 [&](fa::FeatureKind v) { o.kind(v); });
    in.take<bool>("orthogonal", o.orthogonal(), [&](bool v) { o.orthogonal(v); });
    in.take<uint64_t>("seed", o.seed(), [&](uint64_t v) { o.seed(v); });
    in.take<double>("eps", o.eps(), [&](double v) { o.eps(v); });
    take_dims(in, o);
    result = o;
  } else if (variant == "fourier") {
    fa::FourierAttentionOptions o;
    in.take<double>("r_init", o.r_init(), [&](double v) { o.r_init(v); });
    in.take_name("r_shape", r_shape_name(o.r_shape()), r_shape_from_name,
                 [&](fa::FourierRShape v) { o.r_shape(v); });
    in.take<bool>("learn_r", o.learn_r(), [&](bool v) { o.learn_r(v); });
    in.take<int64_t>("power", o.power(), [&](int64_t v) { o.power(v); });
    in.take_name("phi", kernels::fourier_phi_name(o.phi()), phi_from_name,
                 [&](fa::FourierPhi v) { o.phi(v); });
    take_dims(in, o);
    result = o;
  } else if (variant == "flt") {
    fa::FLTAttentionOptions o;
    in.take<int64_t>("features", o.features(), [&](int64_t v) { o.features(v); });
    in.take<int64_t>("rpe_features", o.rpe_features(), [&](int64_t v) { o.rpe_features(v); });
    in.take<int64_t>("position_dim", o.position_dim(), [&](int64_t v) { o.position_dim(v); });
    in.take_name("family", fa::spectrum_family_name(o.family()), fa::spectrum_family_from_name,
                 [&](fa::SpectrumFamily v) { o.family(v); });
    in.take<int64_t>("components", o.components(), [&](int64_t v) { o.components(v); });
    in.take<int64_t>("smoothness", o.smoothness(), [&](int64_t v) { o.smoothness(v); });
    in.take<double>("rpe_scale", o.rpe_scale(), [&](double v) { o.rpe_scale(v); });
    in.take<double>("rpe_weight", o.rpe_weight(), [&](double v) { o.rpe_weight(v); });
    in.take_name("proposal", proposal_name(o.proposal()), proposal_from_name,
                 [&](fa::ProposalKind v) { o.proposal(v); });
    in.take<double>("proposal_sigma", o.proposal_sigma(), [&](double v) { o.proposal_sigma(v); });
    in.take<bool>("learn_proposal", o.learn_proposal(), [&](bool v) { o.learn_proposal(v); });
    in.take_name("kind", fa::feature_kind_name(o.kind()), fa::feature_kind_from_name,
                 [&](fa::FeatureKind v) { o.kind(v); });
    in.take<uint64_t>("seed", o.seed(), [&](uint64_t v) { o.seed(v); });
    in.take<double>("eps", o.eps(), [&](double v) { o.eps(v); });
    take_dims(in, o);
    result = o;
  } else if (variant == "schoenbat") {
    fa::SchoenbAttentionOptions o;
    in.take<std::string>("kernel", o.kernel(), [&](const std::string& v) { o.kernel(v); });
    in.take<int64_t>("features", o.features(), [&](int64_t v) { o.features(v); });
    in.take<int64_t>("max_degree", o.max_degree(), [&](int64_t v) { o.max_degree(v); });
    in.take<bool>("ppsbn", o.ppsbn(), [&](bool v) { o.ppsbn(v); });
    in.take<double>("sbn_eps", o.sbn_eps(), [&](double v) { o.sbn_eps(v); });
    in.take<double>("normaliser_floor", o.normaliser_floor(),
                    [&](double v) { o.normaliser_floor(v); });
    in.take<double>("gamma", o.gamma(), [&](double v) { o.gamma(v); });
    in.take<double>("beta", o.beta(), [&](double v) { o.beta(v); });
    in.take<uint64_t>("seed", o.seed(), [&](uint64_t v) { o.seed(v); });
    take_dims(in, o);
    result = o;
  } else {
    TORCH_CHECK(false, "unknown attention variant \"", variant,
                "\" (expected softmax, linear, performer, fourier, flt or schoenbat)");
  }
  if (defaults != nullptr) *defaults = in.defaults();
  in.finish();
  return result;
}

// ---- the modules --------------------------------------------------------------------------------

template <typename Holder>
std::pair<std::shared_ptr<torch::nn::Module>, fa::Attention*> attention_module(Holder holder) {
  auto impl = holder.ptr();
  return {impl, impl.get()};
}

// Any library module the Python side wraps: an attention variant (with its common interface), a
// FeatureMap or TransformerLM.
struct Module {
  std::shared_ptr<torch::nn::Module> module;
  fa::Attention* attention = nullptr;

  template <typename Impl>
  Impl& as(const char* what) const {
    auto* impl = dynamic_cast<Impl*>(module.get());
    TORCH_CHECK(impl != nullptr, what, " is not available on ", module->name());
    return *impl;
  }
  fa::Attention& variant() const {
    TORCH_CHECK(attention != nullptr, module->name(), " is not an attention variant");
    return *attention;
  }
};

Module make_attention_module(const std::string& variant, const py::dict& kwargs) {
  const auto options = attention_options(variant, kwargs);
  auto [module, attention] = std::visit(
      [](const auto& o) -> std::pair<std::shared_ptr<torch::nn::Module>, fa::Attention*> {
        using O = std::decay_t<decltype(o)>;
        if constexpr (std::is_same_v<O, fa::SoftmaxAttentionOptions>)
          return attention_module(fa::SoftmaxAttention(o));
        else if constexpr (std::is_same_v<O, fa::LinearAttentionOptions>)
          return attention_module(fa::LinearAttention(o));
        else if constexpr (std::is_same_v<O, fa::PerformerAttentionOptions>)
          return attention_module(fa::PerformerAttention(o));
        else if constexpr (std::is_same_v<O, fa::FourierAttentionOptions>)
          return attention_module(fa::FourierAttention(o));
        else if constexpr (std::is_same_v<O, fa::FLTAttentionOptions>)
          return attention_module(fa::FLTAttention(o));
        else
          return attention_module(fa::SchoenbAttention(o));
      },
      options);
  return {module, attention};
}

fa::AttentionCall call_of(bool causal, const c10::optional<at::Tensor>& positions) {
  fa::AttentionCall call;
  call.causal = causal;
  if (positions) call.positions = *positions;
  return call;
}

using Pairs = std::vector<std::pair<std::string, at::Tensor>>;

Pairs to_pairs(const torch::OrderedDict<std::string, at::Tensor>& items) {
  Pairs out;
  for (const auto& item : items) out.emplace_back(item.key(), item.value());
  return out;
}

using ModuleClass = py::class_<Module>;

void add_generic_methods(ModuleClass& module_class) {
  module_class
      .def("named_parameters",
           [](const Module& self) { return to_pairs(self.module->named_parameters()); })
      .def("named_buffers",
           [](const Module& self) { return to_pairs(self.module->named_buffers()); })
      .def("train", [](Module& self, bool mode) { self.module->train(mode); })
      .def("__repr__",
           [](const Module& self) {
             std::ostringstream out;
             self.module->pretty_print(out);
             return out.str();
           })
      .def("name", [](const Module& self) { return self.module->name(); });
}

void add_attention_methods(ModuleClass& module_class) {
  module_class
      // ---- attention variants
      .def(
          "forward",
          [](Module& self, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
             bool causal, const c10::optional<at::Tensor>& positions) {
            auto& attention = self.variant();
            const auto call = call_of(causal, positions);
            py::gil_scoped_release release;
            return attention.forward(q, k, v, call);
          },
          py::arg("q"), py::arg("k"), py::arg("v"), py::arg("causal"), py::arg("positions"))
      .def(
          "materialize",
          [](Module& self, const at::Tensor& q, const at::Tensor& k, bool causal,
             const c10::optional<at::Tensor>& positions) {
            auto& attention = self.variant();
            const auto call = call_of(causal, positions);
            py::gil_scoped_release release;
            return attention.materialize(q, k, call);
          },
          py::arg("q"), py::arg("k"), py::arg("causal"), py::arg("positions"))
      .def("variant_name", [](const Module& self) { return self.variant().name(); })
      .def("redraw",
           [](Module& self, uint64_t seed) {
             if (auto* p = dynamic_cast<fa::PerformerAttentionImpl*>(self.module.get()))
               p->redraw(seed);
             else if (auto* f = dynamic_cast<fa::FLTAttentionImpl*>(self.module.get()))
               f->redraw(seed);
             else if (auto* s = dynamic_cast<fa::SchoenbAttentionImpl*>(self.module.get()))
               s->redraw(seed);
             else if (auto* map = dynamic_cast<fa::FeatureMapImpl*>(self.module.get()))
               map->redraw(seed);
             else
               TORCH_CHECK(false, self.module->name(), " has no random features to redraw");
           })
      // ---- FLT: the RPE it learns
      .def("rpe_function",
           [](Module& self, const at::Tensor& delta) {
             return self.as<fa::FLTAttentionImpl>("rpe_function").rpe_function(delta);
           })
      .def("exact_mask", [](Module& self, const at::Tensor& positions) {
        return self.as<fa::FLTAttentionImpl>("exact_mask").exact_mask(positions);
      });
}

void add_model_methods(ModuleClass& module_class) {
  module_class
      // ---- TransformerLM
      .def("lm_forward",
           [](Module& self, const at::Tensor& tokens) {
             auto& lm = self.as<fa::TransformerLMImpl>("forward(tokens)");
             py::gil_scoped_release release;
             return lm.forward(tokens);
           })
      .def("lm_attention_maps",
           [](Module& self, const at::Tensor& tokens) {
             return self.as<fa::TransformerLMImpl>("attention_maps").attention_maps(tokens);
           })
      // ---- FeatureMap
      .def("query_features",
           [](Module& self, const at::Tensor& x) {
             return self.as<fa::FeatureMapImpl>("query_features").query_features(x);
           })
      .def("key_features",
           [](Module& self, const at::Tensor& x, bool causal) {
             return self.as<fa::FeatureMapImpl>("key_features").key_features(x, causal);
           })
      .def("unshifted_features", [](Module& self, const at::Tensor& x) {
        return self.as<fa::FeatureMapImpl>("unshifted_features").unshifted_features(x);
      });
}

void bind_constructors(py::module_& m) {
  m.def("attention", &make_attention_module, py::arg("variant"), py::arg("options"));
  m.def(
      "attention_defaults",
      [](const std::string& variant) {
        py::dict defaults;
        attention_options(variant, py::dict(), &defaults);
        return defaults;
      },
      py::arg("variant"));
  m.def(
      "transformer_lm",
      [](int64_t vocab_size, int64_t embed_dim, int64_t heads, int64_t layers, int64_t max_length,
         int64_t ff_dim, bool tie_weights, bool share_rpe, const std::string& variant,
         const py::dict& options) {
        fa::TransformerOptions o(vocab_size, embed_dim, heads, layers);
        o.max_length(max_length)
            .ff_dim(ff_dim)
            .tie_weights(tie_weights)
            .share_rpe(share_rpe)
            .attention(attention_options(variant, options));
        return Module{fa::TransformerLM(o).ptr(), nullptr};
      },
      py::arg("vocab_size"), py::arg("embed_dim"), py::arg("heads"), py::arg("layers"),
      py::arg("max_length"), py::arg("ff_dim"), py::arg("tie_weights"), py::arg("share_rpe"),
      py::arg("variant"), py::arg("options"));
  m.def(
      "feature_map",
      [](int64_t input_dim, int64_t features, const std::string& kind, bool orthogonal,
         uint64_t seed) {
        fa::FeatureMapOptions o(input_dim, features);
        o.kind(fa::feature_kind_from_name(kind)).orthogonal(orthogonal).seed(seed);
        return Module{fa::FeatureMap(o).ptr(), nullptr};
      },
      py::arg("input_dim"), py::arg("features"), py::arg("kind"), py::arg("orthogonal"),
      py::arg("seed"));
}

// The library's names, arguments and defaults.
void bind_functional(py::module_& m) {
  auto f = m.def_submodule("functional");
  f.def("softmax_attention", &fa::softmax_attention, py::arg("q"), py::arg("k"), py::arg("v"),
        py::arg("causal") = false, py::arg("scale") = 0.0);
  f.def(
      "softmax_attention_weights",
      [](const at::Tensor& q, const at::Tensor& k, bool causal, double scale,
         const c10::optional<at::Tensor>& bias) {
        return fa::softmax_attention_weights(q, k, causal, scale, bias.value_or(at::Tensor()));
      },
      py::arg("q"), py::arg("k"), py::arg("causal") = false, py::arg("scale") = 0.0,
      py::arg("bias") = py::none());
  f.def("linear_attention", &fa::linear_attention, py::arg("q"), py::arg("k"), py::arg("v"),
        py::arg("causal") = false, py::arg("eps") = fa::kLinearAttentionEps);
  f.def("elu_feature_map", &fa::elu_feature_map, py::arg("x"));
  f.def(
      "performer_attention",
      [](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const Module& feature_map,
         bool causal, double eps) {
        return fa::performer_attention(
            q, k, v, feature_map.as<fa::FeatureMapImpl>("performer_attention"), causal, eps);
      },
      py::arg("q"), py::arg("k"), py::arg("v"), py::arg("feature_map"), py::arg("causal") = false,
      py::arg("eps") = fa::kFavorEps);
  f.def(
      "fourier_attention",
      [](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& R,
         int64_t power, bool causal, const std::string& phi) {
        return fa::fourier_attention(q, k, v, R, power, causal, phi_from_name(phi));
      },
      py::arg("q"), py::arg("k"), py::arg("v"), py::arg("R"), py::arg("power") = fa::kFourierPower,
      py::arg("causal") = false, py::arg("phi") = "power");
  f.def(
      "fourier_attention_weights",
      [](const at::Tensor& q, const at::Tensor& k, const at::Tensor& R, int64_t power, bool causal,
         const std::string& phi) {
        return fa::fourier_attention_weights(q, k, R, power, causal, phi_from_name(phi));
      },
      py::arg("q"), py::arg("k"), py::arg("R"), py::arg("power") = fa::kFourierPower,
      py::arg("causal") = false, py::arg("phi") = "power");
  f.def("kernelized_attention", &fa::kernelized_attention, py::arg("q"), py::arg("k"), py::arg("v"),
        py::arg("kernel"), py::arg("causal") = false);
  f.def("schoenberg_kernel", &fa::schoenberg_kernel, py::arg("kernel"), py::arg("t"));
  f.def("ppsbn_pre", &fa::ppsbn_pre, py::arg("x"), py::arg("causal"), py::arg("eps") = fa::kSbnEps);
}

}  // namespace

void bind_nn(py::module_& m) {
  ModuleClass module_class(m, "Module");
  add_generic_methods(module_class);
  add_attention_methods(module_class);
  add_model_methods(module_class);
  bind_constructors(m);
  bind_functional(m);
}

}  // namespace flt::python
