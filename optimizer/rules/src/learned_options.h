#pragma once
// The options both learned optimizers take (CoordinateMnemosyneOptions, ScheduleMnemosyneOptions:
// the same fields, each struct its own type so that neither's options can reach the other),
// written, read and compared in one place. Internal to the library.

#include <torch/serialize/archive.h>

#include <string>

#include "flt/optim/learned_model.h"

namespace flt::optim::detail {

/// `design` ("coordinate-memory", "tensor-schedule") tells the two optimizers' saved states apart
/// (check_learned_state_archive).
template <class Options>
void write_learned_options(torch::serialize::OutputArchive& archive, const Options& o,
                           const char* design) {
  archive.write("lr", torch::IValue(o.lr()));
  archive.write("chunk_size", torch::IValue(o.chunk_size()));
  archive.write("weights", torch::IValue(o.weights()));
  archive.write("untrained", torch::IValue(o.untrained()));
  archive.write("fused", torch::IValue(o.fused()));
  archive.write("total_steps", torch::IValue(o.total_steps()));
  archive.write("memory", torch::IValue(memory_name(o.memory())));
  archive.write("design", torch::IValue(std::string(design)));
}

template <class Options>
void read_learned_options(torch::serialize::InputArchive& archive, Options& o) {
  torch::IValue value;
  archive.read("lr", value);
  o.lr(value.toDouble());
  archive.read("chunk_size", value);
  o.chunk_size(value.toInt());
  archive.read("weights", value);
  o.weights(value.toStringRef());
  archive.read("fused", value);
  o.fused(value.toBool());
  archive.read("total_steps", value);
  o.total_steps(value.toInt());
  archive.read("memory", value);
  o.memory(memory_from_name(value.toStringRef()));
  // States of version 0.1 (one Mnemosyne class with a design option) have no `untrained`.
  o.untrained(archive.try_read("untrained", value) && value.toBool());
}

template <class Options>
bool same_learned_options(const Options& lhs, const Options& rhs) {
  return lhs.lr() == rhs.lr() && lhs.memory() == rhs.memory() && lhs.weights() == rhs.weights() &&
         lhs.untrained() == rhs.untrained() && lhs.chunk_size() == rhs.chunk_size() &&
         lhs.fused() == rhs.fused() && lhs.total_steps() == rhs.total_steps();
}

}  // namespace flt::optim::detail
