#pragma once
// The attention variants a container module can hold, chosen by options, and the one factory.
//
// Adding a variant: add its Options type to `AttentionOptions` and one branch to `make_attention`
// (attention/src/variants.cpp).

#include <torch/nn/module.h>

#include <memory>
#include <string>
#include <variant>

#include "flt/attention/flt.h"
#include "flt/attention/fourier.h"
#include "flt/attention/linear.h"
#include "flt/attention/performer.h"
#include "flt/attention/schoenbat.h"
#include "flt/attention/softmax.h"

namespace flt::attention {

/// Options of any attention variant; the alternative chosen selects the variant.
using AttentionOptions =
    std::variant<SoftmaxAttentionOptions, LinearAttentionOptions, PerformerAttentionOptions,
                 FourierAttentionOptions, FLTAttentionOptions, SchoenbAttentionOptions>;

/// A variant module built from its options, for `heads` heads of dimension `head_dim`: options'
/// heads and head_dim of 0 take these values, nonzero ones must equal them (attention.h).
struct AttentionHandle {
  std::shared_ptr<torch::nn::Module> module;  ///< register this as a submodule
  Attention* attention = nullptr;             ///< the same object through the common interface
};
AttentionHandle make_attention(const AttentionOptions& options, int64_t heads, int64_t head_dim);

/// The variant's short name ("softmax", "linear", ...).
std::string attention_name(const AttentionOptions& options);

}  // namespace flt::attention
