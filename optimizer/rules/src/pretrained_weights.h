#pragma once
// Pretrained learned-optimizer weights compiled into the library (generated at configure time by
// cmake/FLTPretrained.cmake from optimizer/pretrained/mnemosyne_<memory>.pt), and weights files
// read from disk.

#include <c10/util/Exception.h>
#include <torch/serialize/input-archive.h>

#include <cstddef>
#include <fstream>
#include <string>

namespace flt::optim::detail {

struct Blob {
  const unsigned char* data = nullptr;  ///< null when no file ships for that name
  size_t size = 0;
};

/// The embedded file optimizer/pretrained/mnemosyne_<name>.pt, or swarm_<variant>.pt for name
/// "swarm_<variant>".
Blob pretrained_blob(const std::string& name);

/// Reads the weights file at `path` into `archive`; a missing file, or one that is not a weights
/// file, throws naming `what` (e.g. "swarm weights") and the path.
inline void read_weights_file(torch::serialize::InputArchive& archive, const std::string& path,
                              const char* what) {
  TORCH_CHECK(std::ifstream(path).good(), what, ": cannot open ", path);
  try {
    archive.load_from(path);
  } catch (const c10::Error& e) {
    TORCH_CHECK(false, what, ": ", path, " is corrupt or not a weights file (",
                e.what_without_backtrace(), ")");
  }
}

}  // namespace flt::optim::detail
