#pragma once
// The learned optimizers' memory over the step index, shared by both designs: the first design runs
// it per coordinate (learned_model.cpp), the second per tensor (learned_schedule.cpp). Internal to
// the library.

#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/rnn.h>
#include <torch/types.h>

#include <utility>

#include "flt/attention/feature_map.h"
#include "flt/attention/flt.h"
#include "flt/optim/learned_model.h"

namespace flt::optim::detail {

/// What a memory of a given kind is made of (unused members are null for the other kinds).
struct StepMemory {
  Memory kind = Memory::kFLT;
  int64_t key_dim = 0, value_dim = 0, features = 0;
  torch::nn::Linear query{nullptr}, key{nullptr}, value{nullptr};  ///< attention memories
  attention::FLTAttention flt{nullptr};                            ///< FLT: RPE + FAVOR+ features
  attention::FeatureMap feature_map{nullptr};                      ///< Performer
  torch::Tensor discount_logit;                                    ///< gamma = sigmoid(.)
  torch::nn::LSTMCell lstm{nullptr};

  /// Floats of memory per row: S (m x Dv) and z (m) for the attention memories, h and c for the
  /// LSTM, none for kNone.
  int64_t size() const;
  /// Width of the read-out.
  int64_t read_size() const;
};

/// One step t >= 1 of N independent memories (rows), each seeing one token per step: the
/// attention memories decay their state by gamma, append this step's key and value and read with
/// its query (FLT: with the RPE features of the step index, so the learned spectrum weighs steps by
/// their distance); the LSTM steps its cell.
/// x: (N, F)  memory: (N, size()) -> read (N, read_size()), memory (N, size())
std::pair<torch::Tensor, torch::Tensor> attend_step(const StepMemory& memory,
                                                    const torch::Tensor& x,
                                                    const torch::Tensor& state, int64_t t,
                                                    double read_floor);

}  // namespace flt::optim::detail
