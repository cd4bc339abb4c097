#pragma once
// The key of a parameter in torch::optim::Optimizer's state map, for optimizers written against
// LibTorch (internal to the library and the harness: not installed).

#include <ATen/core/Tensor.h>

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

}  // namespace flt::detail
