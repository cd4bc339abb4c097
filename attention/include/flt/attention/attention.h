#pragma once
// The interface every attention variant implements, the input checks they share, and the one
// convention of their options.
//
// Shapes (docs/design.md section 2): q, k: (B, H, L, D); v: (B, H, L, Dv); output (B, H, L, Dv);
// positions (L, l) or (B, L, l). Non-causal calls may give queries a length Lq != Lk.
//
// Options (SoftmaxAttentionOptions ... SchoenbAttentionOptions) all follow one convention:
//   heads, head_dim  H and D. 0 (the default) means "set by the container": make_attention (so
//                    MultiheadAttention and the transformer blocks) replaces a 0 with its H and
//                    E / H and rejects a nonzero value that differs. A module used alone needs them
//                    only where they size something (Performer: head_dim; FLT and SchoenbAt: both;
//                    Fourier: heads for a per-head R, head_dim for a per-dimension R) and throws at
//                    construction when such a one is 0. Nonzero values are checked against q at
//                    every call. Negative values are rejected.
//   eps              the floor of a normaliser (Linear, Performer, FLT) or of a variance
//                    (SchoenbAt's sbn_eps): positive and finite. A functional form takes the same
//                    default as its options (one named constant in the variant's header).
//   features, seed   random features (> 0) and the seed of their first draw; redraw(seed)
//                    draws again.
//   Every other real-valued option is finite, and bad values throw at construction with
//   "<Variant>: <option> must be <rule>, got <value>" (the check_* helpers below).

#include <torch/nn/cloneable.h>
#include <torch/types.h>

#include <string>
#include <utility>

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

/// Checks q, k, v for `fn` and throws a message naming the bad argument and its shape: ranks 4,
/// matching B and H, matching D of q and k, matching L of k and v, floating dtypes that agree, one
/// device, non-empty lengths, and Lq == Lk when causal. `v` may be undefined (for `materialize`).
void check_qkv(const char* fn, const torch::Tensor& q, const torch::Tensor& k,
               const torch::Tensor& v, bool causal);

// ---- The options convention's checks: each throws "<fn>: <name> must be <rule>, got <value>".

/// 0 < value < inf.
void check_positive_finite(const char* fn, const char* name, double value);
/// value finite.
void check_finite(const char* fn, const char* name, double value);
/// value > 0; `hint` is appended to the message.
void check_positive(const char* fn, const char* name, int64_t value, const char* hint = "");
/// heads and head_dim options: >= 0, or > 0 where the module needs them (`need_heads`,
/// `need_head_dim`: it sizes parameters or features by them).
void check_dims_options(const char* fn, int64_t heads, int64_t head_dim, bool need_heads,
                        bool need_head_dim);
/// q: (B, H, L, D) against nonzero heads and head_dim options.
void check_dims_against(const char* fn, int64_t heads, int64_t head_dim, const torch::Tensor& q);

/// Base of the attention modules: a `torch::nn::Cloneable` that also implements `Attention`, and
/// what every variant's module has the same: its options (`Options::kName` is the variant's name)
/// and the checks of a call against them. `Options` has `heads()` and `head_dim()`; `Derived`'s
/// constructor calls its `reset()`.
template <typename Derived, typename Options>
class AttentionModule : public torch::nn::Cloneable<Derived>, public Attention {
 public:
  explicit AttentionModule(Options options) : options(std::move(options)) {}

  std::string name() const override { return Options::kName; }

  int64_t parameter_count() const override {
    int64_t count = 0;
    for (const auto& p : this->parameters()) {
      if (p.requires_grad()) count += p.numel();
    }
    return count;
  }

  Options options;

 protected:
  /// check_qkv, then q against the options' nonzero heads and head_dim.
  void check_call(const char* fn, const torch::Tensor& q, const torch::Tensor& k,
                  const torch::Tensor& v, bool causal) const {
    check_qkv(fn, q, k, v, causal);
    check_dims_against(fn, options.heads(), options.head_dim(), q);
  }
};

/// The convention's heads and head_dim options (see the top of this file), one line in every
/// variant's options struct.
#define FLT_ATTENTION_DIMS_OPTIONS \
  TORCH_ARG(int64_t, heads) = 0;   \
  TORCH_ARG(int64_t, head_dim) = 0

/// The members every variant's module declares and defines in its source file: the constructor
/// from its options (it calls reset()), reset() (checks the options, makes the parameters and
/// buffers), pretty_print(), and the Attention interface above (forward and materialize, an empty
/// AttentionCall by default).
#define FLT_ATTENTION_MODULE_MEMBERS(Impl, Options)                                             \
 public:                                                                                        \
  explicit Impl(Options options = {});                                                          \
  void reset() override;                                                                        \
  void pretty_print(std::ostream& stream) const override;                                       \
  torch::Tensor forward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, \
                        const AttentionCall& call = {}) override;                               \
  torch::Tensor materialize(const torch::Tensor& q, const torch::Tensor& k,                     \
                            const AttentionCall& call = {}) override

/// Checks the positions of a call against q's batch and length; returns them as (B or 1, L, l)
/// in q's dtype, or token indices 0..L-1 as (1, L, 1) when undefined.
torch::Tensor resolve_positions(const char* fn, const torch::Tensor& positions,
                                const torch::Tensor& q);

}  // namespace flt::attention
