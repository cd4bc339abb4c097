#pragma once
// Internal to the attention library: the D^{-1/4} scale of queries and keys in the softmax-kernel
// feature maps (Performer, FLT), as a column scale.

#include <ATen/ATen.h>

#include <cmath>

namespace flt::attention::detail {

/// (D) filled with D^{-1/4}, for x of shape (..., D). As a `FeatureInput` column scale it is folded
/// into the feature map's projection, so x D^{-1/4} (a copy the size of x) is never built.
inline at::Tensor quarter_scale(const at::Tensor& x) {
  return at::full({x.size(-1)}, std::pow(static_cast<double>(x.size(-1)), -0.25), x.options());
}

}  // namespace flt::attention::detail
