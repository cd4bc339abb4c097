#pragma once
// What every optimizer written against LibTorch's torch::optim::Optimizer needs from it: the key of
// a parameter in its state map, and a step's closure evaluated as its own optimizers do (internal
// to the library and the harness: not installed).

#include <ATen/core/Tensor.h>
#include <c10/core/GradMode.h>

#include <functional>
#include <sstream>
#include <string>
#include <type_traits>

namespace flt::detail {

// The optimizer state map is keyed by a string of the TensorImpl address up to LibTorch 2.1 and by
// the address itself from 2.2 (docs/design.md section 1): derive the key from the map's own type.
template <typename Map>
typename Map::key_type state_key(const Map&, const at::Tensor& p) {
  using Key = typename Map::key_type;
  if constexpr (std::is_same_v<Key, std::string>) {
    // As LibTorch 1.13's own c10::guts::to_string (an ostream of the pointer); that helper is gone
    // in 2.2, and the dead branch must still compile there.
    std::ostringstream key;
    key << p.unsafeGetTensorImpl();
    return key.str();
  } else {
    return static_cast<Key>(p.unsafeGetTensorImpl());
  }
}

/// The loss of a step's closure, run with gradients on (step() itself runs without), as
/// torch::optim's optimizers do; undefined without a closure.
inline at::Tensor closure_loss(const std::function<at::Tensor()>& closure) {
  if (!closure) return {};
  c10::AutoGradMode enable_grad(true);
  return closure();
}

}  // namespace flt::detail
