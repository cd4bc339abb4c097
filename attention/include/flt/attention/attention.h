#pragma once
// The interface every attention variant implements, and the input checks they share.
//
// Shapes (DESIGN.md section 2): q, k: (B, H, L, D); v: (B, H, L, Dv); output (B, H, L, Dv);
// positions (L, l) or (B, L, l). Non-causal calls may give queries a length Lq != Lk.

#include <torch/nn/cloneable.h>
#include <torch/types.h>

#include <string>

namespace flt::attention {

/// Per-call inputs beyond q, k, v.
struct AttentionCall {
  /// Query i attends only to keys j <= i (needs Lq == Lk).
  bool causal = false;
  /// Token positions for relative positional encodings: (L, l) or (B, L, l). Undefined means token
  /// indices 0..L-1 as 1-D positions. Variants without positional encodings ignore it.
  torch::Tensor positions = {};
};

/// What every attention variant offers, whatever its math.
class Attention {
 public:
  virtual ~Attention() = default;

  /// q: (B, H, Lq, D)  k: (B, H, Lk, D)  v: (B, H, Lk, Dv) -> (B, H, Lq, Dv)
  virtual torch::Tensor forward(const torch::Tensor& q, const torch::Tensor& k,
                                const torch::Tensor& v, const AttentionCall& call = {}) = 0;

  /// q: (B, H, Lq, D)  k: (B, H, Lk, D) -> (B, H, Lq, Lk): the (approximate) attention matrix whose
  /// product with v is `forward`'s output; rows sum to 1 for normalised variants.
  virtual torch::Tensor materialize(const torch::Tensor& q, const torch::Tensor& k,
                                    const AttentionCall& call = {}) = 0;

  /// Short name of the variant, e.g. "softmax".
  virtual std::string name() const = 0;

  /// Number of trainable scalars (0 for parameter-free variants).
  virtual int64_t parameter_count() const = 0;
};

/// Base of the attention modules: a `torch::nn::Cloneable` that also implements `Attention`.
template <typename Derived>
class AttentionModule : public torch::nn::Cloneable<Derived>, public Attention {
 public:
  using torch::nn::Cloneable<Derived>::Cloneable;

  int64_t parameter_count() const override {
    int64_t count = 0;
    for (const auto& p : this->parameters()) {
      if (p.requires_grad()) count += p.numel();
    }
    return count;
  }
};

/// Checks q, k, v for `fn` and throws a message naming the bad argument and its shape: ranks 4,
/// matching B and H, matching D of q and k, matching L of k and v, floating dtypes that agree, one
/// device, non-empty lengths, and Lq == Lk when causal. `v` may be undefined (for `materialize`).
void check_qkv(const char* fn, const torch::Tensor& q, const torch::Tensor& k,
               const torch::Tensor& v, bool causal);

/// Checks the positions of a call against q's batch and length; returns them as (B or 1, L, l)
/// in q's dtype, or token indices 0..L-1 as (1, L, 1) when undefined.
torch::Tensor resolve_positions(const char* fn, const torch::Tensor& positions,
                                const torch::Tensor& q);

}  // namespace flt::attention
