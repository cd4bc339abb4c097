#pragma once
// Multi-head attention around any variant: projections, heads, output projection.

#include <torch/nn/modules/linear.h>

#include <utility>

#include "flt/attention/variants.h"

namespace flt::attention {

struct MultiheadAttentionOptions {
  MultiheadAttentionOptions(int64_t embed_dim, int64_t heads)
      : embed_dim_(embed_dim), heads_(heads) {}
  /// Model width E; must be divisible by `heads`.
  TORCH_ARG(int64_t, embed_dim);
  /// Number of heads H; head dim D = E / H.
  TORCH_ARG(int64_t, heads);
  /// Which attention variant each head uses, with its options (default: exact softmax).
  TORCH_ARG(AttentionOptions, attention) = SoftmaxAttentionOptions();
  /// Biases in the q, k, v and output projections.
  TORCH_ARG(bool, bias) = true;
};

class MultiheadAttentionImpl : public torch::nn::Cloneable<MultiheadAttentionImpl> {
 public:
  MultiheadAttentionImpl(int64_t embed_dim, int64_t heads)
      : MultiheadAttentionImpl(MultiheadAttentionOptions(embed_dim, heads)) {}
  explicit MultiheadAttentionImpl(MultiheadAttentionOptions options);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;

  /// x: (B, L, E) -> (B, L, E)
  torch::Tensor forward(const torch::Tensor& x, const AttentionCall& call = {});

  /// The attention matrix of every head. x: (B, L, E) -> (B, H, L, L)
  torch::Tensor attention_weights(const torch::Tensor& x, const AttentionCall& call = {});

  /// The heads' queries and keys, as the attention sees them. x: (B, L, E) -> q, k (B, H, L, D)
  std::pair<torch::Tensor, torch::Tensor> queries_and_keys(const torch::Tensor& x);

  /// The variant inside, through the common interface.
  Attention& attention() { return *attention_; }

  MultiheadAttentionOptions options;
  torch::nn::Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, out_proj{nullptr};

 private:
  /// x: (B, L, E) -> (B, H, L, D)
  torch::Tensor split_heads(const torch::Tensor& x) const;
  void check_input(const torch::Tensor& x) const;

  std::shared_ptr<torch::nn::Module> attention_module_;
  Attention* attention_ = nullptr;
};
TORCH_MODULE(MultiheadAttention);

}  // namespace flt::attention
