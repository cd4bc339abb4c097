#pragma once
// Internal to the harness's baseline optimizers (Prodigy, Schedule-Free AdamW): the checks and the
// archive tag they share.

#include <torch/optim/optimizer.h>
#include <torch/serialize/archive.h>

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "flt/optim/learned_optimizer.h"  // detail::check_parameter_groups

namespace flt::harness::detail {

using torch::optim::OptimizerParamGroup;

inline void check_finite_at_least(const char* who, const char* name, double value, double least) {
  TORCH_CHECK(std::isfinite(value) && value >= least, who, ": ", name,
              " must be finite and >= ", least, ", got ", value);
}

inline void check_beta(const char* who, const char* name, double beta) {
  TORCH_CHECK(beta >= 0.0 && beta < 1.0, who, ": ", name, " must be in [0, 1), got ", beta);
}

/// The options every Adam-like baseline has: lr, betas (beta1, beta2), eps and weight decay.
template <typename Options>
void check_adam_options(const char* who, const Options& o) {
  check_finite_at_least(who, "lr", o.lr(), 0.0);
  check_beta(who, "beta1", std::get<0>(o.betas()));
  check_beta(who, "beta2", std::get<1>(o.betas()));
  check_finite_at_least(who, "eps", o.eps(), 0.0);
  check_finite_at_least(who, "weight_decay", o.weight_decay(), 0.0);
}

/// Parameters checked before the base class sees them, so an error names the parameter (the
/// learned optimizers' check: defined leaves, floating point, each once, at least one).
inline std::vector<OptimizerParamGroup> checked_parameters(
    const char* who, std::vector<OptimizerParamGroup> groups) {
  flt::optim::detail::check_parameter_groups(groups, who);
  return groups;
}

/// The gradient of `p`, undefined when it has none (skipped); sparse gradients are rejected.
inline torch::Tensor dense_grad(const char* who, const torch::Tensor& p) {
  if (!p.grad().defined()) return {};
  TORCH_CHECK(!p.grad().is_sparse(), who,
              ": sparse gradients are not supported (parameter of shape ", p.sizes(), ")");
  return p.grad().detach();
}

// LibTorch's optimizer loader meets another optimizer's archive with an internal assert; a name
// written by save() lets load() say what is wrong first.
constexpr const char* kKindKey = "flt_optimizer";

inline void write_kind(torch::serialize::OutputArchive& archive, const std::string& kind) {
  archive.write(kKindKey, torch::IValue(kind));
}

inline void check_kind(torch::serialize::InputArchive& archive, const std::string& kind) {
  torch::IValue value;
  const bool named = archive.try_read(kKindKey, value) && value.isString();
  TORCH_CHECK(named && value.toStringRef() == kind, kind, "::load: the archive is not a ", kind,
              " optimizer state",
              named ? " (it holds a " + value.toStringRef() + " state)"
                    : std::string(" (no optimizer of this harness saved it)"));
}

}  // namespace flt::harness::detail
