#pragma once
// Internal to the attention library and its tests (not installed): feature-map inputs that carry
// terms their caller computed already, and the feature functions that read them. Only the
// library's own callers (FLT, favor_attention) know when such a term is right: the map trusts it
// without checking it against W.

#include <torch/types.h>

#include <functional>
#include <memory>
#include <vector>

#include "flt/attention/feature_map.h"

namespace flt::attention::detail {

/// Makes rows start .. start + length of heads first .. first + count (dim -3; count < 0: every
/// head) of a block that is never formed whole. -> (..., count, length, Din_b)
using BlockRows =
    std::function<torch::Tensor(int64_t start, int64_t length, int64_t first, int64_t count)>;

/// A `FeatureInput` with optional terms computed by its caller.
struct PrecomputedInput : FeatureInput {
  using FeatureInput::FeatureInput;
  PrecomputedInput(FeatureInput x) : FeatureInput(std::move(x)) {}  // NOLINT: implicit on purpose

  /// Makes block 0's rows where `blocks[0]` is left undefined, so that a block as long as the
  /// sequence is never formed whole. Only `rows` reads it: `favor_attention` on the CPU, whose
  /// blocked forward and fused backward form their inputs a block of tokens at a time (its
  /// composite path forms the block whole first; the feature map itself needs block 0 formed).
  /// The rows it makes are constants: a block that needs a gradient must be formed. Two inputs
  /// with the same maker (one pointer) have the same block 0. FLT's [cos, sin] position block
  /// comes this way on the CPU: whole, it is 8 MB at L = 4096, H = 8, r = 32, allocated per call
  /// (and, with autograd, kept until the backward).
  std::shared_ptr<const BlockRows> leading_rows;
  /// What `leading_rows` makes for this input: batch `batch` (dim -4, where the rows have more
  /// than one; -1: all) and heads first_head .. first_head + head_count (-1: all).
  int64_t batch = -1, first_head = 0, head_count = -1;
  /// Projections, one per block (none, or an undefined tensor: computed): block b's share of W x,
  /// W_b (blocks[b] * scales[b]) -> (..., L, m), made by `project_block` with the same map for the
  /// same input. A block that enters two inputs alike is projected once this way: FLT's position
  /// block, shared by its queries and keys when every a_t >= 0 (N1 = N2).
  std::vector<torch::Tensor> projections;
  /// Half squared norms, one per block (none, or an undefined tensor: computed):
  /// |blocks[b] * scales[b]|^2 / 2 per token, broadcastable to (..., L, 1), for a block whose norm
  /// has a closed form. FLT's [cos, sin] block has the same norm at every position (cos^2 + sin^2 =
  /// 1): a constant per head, so its scaled copy is never built, nor kept for the backward.
  std::vector<torch::Tensor> half_squared_norms;

  /// Block b's given projection, or an undefined tensor.
  torch::Tensor projection(size_t b) const {
    return b < projections.size() ? projections[b] : torch::Tensor();
  }
  /// Block b's given half squared norm, or an undefined tensor.
  torch::Tensor half_squared_norm(size_t b) const {
    return b < half_squared_norms.size() ? half_squared_norms[b] : torch::Tensor();
  }
  /// Each block's first token (dim -2), with the same terms. -> (..., 1, Din_b)
  PrecomputedInput first_token() const { return rows(0, 1); }
  /// Tokens start .. start + length of every block and of the per-token terms (a constant norm
  /// stays whole); block 0's rows made by `leading_rows` where it has them, or `leading` when given
  /// (those rows made already, by the same maker for another input). -> (..., length, Din_b)
  PrecomputedInput rows(int64_t start, int64_t length, const torch::Tensor& leading = {}) const;
  /// Batch b, heads h .. h + n of every block and term (dims -4 and -3 where they are not
  /// broadcast), block 0's maker told the same. -> (..., 1, n, L, Din_b)
  PrecomputedInput heads(int64_t b, int64_t h, int64_t n) const;
};

/// Block b's share of W x: W_b (x.blocks[b] * x.scales[b]), the scale folded into W's columns.
/// -> (..., L, m); for `PrecomputedInput::projections` (the map must project, not kElu).
torch::Tensor project_block(const FeatureMapImpl& map, const FeatureInput& x, size_t b);

/// Batch b, heads h .. h + n of a tensor broadcast against (B, H, ...): dims -4 and -3 where they
/// are not 1 (undefined stays undefined; tensors of fewer than 3 dims are whole).
torch::Tensor heads_of(const torch::Tensor& t, int64_t b, int64_t h, int64_t n);

/// `x` with the half squared norm of every formed block that has none given, computed once in
/// double as the feature map would (`PrecomputedInput::rows` then slices them for each block of
/// tokens).
PrecomputedInput with_half_squared_norms(const PrecomputedInput& x);

/// The feature map's methods of the same names, reading the given terms.
torch::Tensor query_features(const FeatureMapImpl& map, const PrecomputedInput& x);
torch::Tensor key_features(const FeatureMapImpl& map, const PrecomputedInput& x, bool causal);
torch::Tensor key_features(const FeatureMapImpl& map, const PrecomputedInput& x,
                           const torch::Tensor& shift);
torch::Tensor causal_key_shift(const FeatureMapImpl& map, const PrecomputedInput& first_key);
torch::Tensor block_key_features(const FeatureMapImpl& map, const PrecomputedInput& x,
                                 torch::Tensor& shift);
torch::Tensor unshifted_features(const FeatureMapImpl& map, const PrecomputedInput& x);

/// Where queries and keys begin with the same block under the same scale (FLT's position block at
/// shared positions while N1 = N2), gives both the projection of that block, computed once (two
/// products would cost as much as the q and k projections together). Does nothing otherwise.
void share_leading_projection(const FeatureMapImpl& map, PrecomputedInput& q, PrecomputedInput& k);

/// Bytes of features (or of inputs, where wider) a panel of the non-causal CPU passes of
/// `favor_attention` holds: whole heads where one head's tokens fit, else one head's tokens in
/// blocks of this size.
constexpr int64_t kFavorPanelBytes = int64_t{512} << 10;

/// `flt::attention::favor_attention`, reading the given terms.
torch::Tensor favor_attention(const FeatureMapImpl& map, PrecomputedInput q, PrecomputedInput k,
                              const torch::Tensor& v, bool causal, double eps);

}  // namespace flt::attention::detail
