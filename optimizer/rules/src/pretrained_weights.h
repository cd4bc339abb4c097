#pragma once
// Pretrained learned-optimizer weights compiled into the library (generated at configure time by
// cmake/FLTPretrained.cmake from optimizer/pretrained/mnemosyne_<memory>.pt), and weights files
// read from disk.

#include <c10/util/Exception.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <cstddef>
#include <fstream>
#include <string>

#include "flt/optim/learned_model.h"

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

/// A module's parameters and buffers as the sub-archive "weights" (how both designs' files and the
/// optimizer's own archive hold them), and back.
inline void write_module_weights(torch::serialize::OutputArchive& archive,
                                 const torch::nn::Module& module) {
  torch::serialize::OutputArchive weights(archive.compilation_unit());
  module.save(weights);
  archive.write("weights", weights);
}
inline void read_module_weights(torch::serialize::InputArchive& archive,
                                torch::nn::Module& module) {
  torch::serialize::InputArchive weights;
  archive.read("weights", weights);
  module.load(weights);
}

/// Saves the archive `write(archive)` fills to `path`.
template <typename Write>
void save_weights_file(const std::string& path, const Write& write) {
  torch::serialize::OutputArchive archive;
  write(archive);
  archive.save_to(path);
}

/// What `read(archive)` makes of the weights file at `path` (read_weights_file's checks, `what` in
/// their messages).
template <typename Read>
auto load_weights_file(const std::string& path, const char* what, const Read& read) {
  torch::serialize::InputArchive archive;
  read_weights_file(archive, path, what);
  return read(archive);
}

/// The shape options both learned designs' weights files hold, by name: the memory kind, its key,
/// value and feature dims, the RPE features, the hidden width and the seed
/// (LearnedOptimizerModelOptions and LearnedScheduleOptions have them all).
template <typename Options>
void write_shape_options(torch::serialize::OutputArchive& archive, const Options& o) {
  archive.write("memory", torch::IValue(memory_name(o.memory())));
  archive.write("key_dim", torch::IValue(o.key_dim()));
  archive.write("value_dim", torch::IValue(o.value_dim()));
  archive.write("features", torch::IValue(o.features()));
  archive.write("rpe_features", torch::IValue(o.rpe_features()));
  archive.write("hidden", torch::IValue(o.hidden()));
  archive.write("seed", torch::IValue(static_cast<int64_t>(o.seed())));
}

/// Reads what write_shape_options wrote into `o`.
template <typename Options>
void read_shape_options(torch::serialize::InputArchive& archive, Options& o) {
  torch::IValue value;
  const auto read_int = [&](const char* name) {
    archive.read(name, value);
    return value.toInt();
  };
  archive.read("memory", value);
  o.memory(memory_from_name(value.toStringRef()));
  o.key_dim(read_int("key_dim"));
  o.value_dim(read_int("value_dim"));
  o.features(read_int("features"));
  o.rpe_features(read_int("rpe_features"));
  o.hidden(read_int("hidden"));
  o.seed(static_cast<uint64_t>(read_int("seed")));
}

}  // namespace flt::optim::detail
