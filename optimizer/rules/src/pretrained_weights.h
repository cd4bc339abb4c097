#pragma once
// Pretrained learned-optimizer weights compiled into the library (generated at configure time by
// cmake/FLTPretrained.cmake from optimizer/pretrained/mnemosyne_<memory>.pt).

#include <cstddef>
#include <string>

namespace flt::optim::detail {

struct Blob {
  const unsigned char* data = nullptr;  ///< null when no file ships for that name
  size_t size = 0;
};

/// The embedded file optimizer/pretrained/mnemosyne_<name>.pt, or swarm_<variant>.pt for name
/// "swarm_<variant>".
Blob pretrained_blob(const std::string& name);

}  // namespace flt::optim::detail
