#pragma once
// Operations batched over K task instances, each instance with its own weights and data (the
// batched task families, batched_tasks.cpp): where ATen's general operators loop over groups or
// along a short dimension, these run as one pass or one batched matrix product. Internal to
// flt_metatrain.

#include <torch/types.h>

#include <cstdint>

namespace flt::metatrain::detail {

/// Rows `idx` (K, B) of each instance's data (K, N, ...). -> (K, B, ...)
torch::Tensor gather_rows(const torch::Tensor& data, const torch::Tensor& idx);

/// Each instance's affine map x w + b. ATen's batched product takes one select and one BLAS call
/// per instance (three with the backward), which dominates where an instance's product is tiny
/// (a recurrent step of a hidden width of 8-16); there plain loops run it, elsewhere `baddbmm`.
/// x: (K, B, In)  weight: (K, In, Out)  bias: (K, Out) -> (K, B, Out)
torch::Tensor affine(const torch::Tensor& x, const torch::Tensor& weight,
                     const torch::Tensor& bias);

/// Mean cross-entropy per instance, fused: one pass over the logits forward, one backward. ATen's
/// log_softmax + gather over a short class dimension costs ~30 ns an entry here (its vector loop
/// runs along the classes) and its backward scatters: most of a small classifier's step.
/// logits: (K, B, C) float32  labels: (K, B) int64 -> (K)
torch::Tensor cross_entropy(const torch::Tensor& logits, const torch::Tensor& labels);

/// A 3x3 convolution (padding 1) of each instance's images by its own filters, as one batched
/// matrix product over the nine shifted copies of the input (ATen's grouped convolution loops
/// over groups and images: ~100x slower at these sizes). Channels last throughout.
/// x: (K, B, H, W, C)  weight: (K, C_out, C, 3, 3)  bias: (K, C_out) -> (K, B, H', W', C_out)
torch::Tensor conv3x3(const torch::Tensor& x, const torch::Tensor& weight,
                      const torch::Tensor& bias, int64_t stride);

}  // namespace flt::metatrain::detail
