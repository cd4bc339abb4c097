#pragma once
// Pre-LN transformer blocks whose attention variant is chosen by options, and two small models on
// top: a causal language model and a sequence classifier.

#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/normalization.h>

#include <utility>
#include <vector>

#include "flt/attention/multihead.h"

namespace flt::attention {

struct TransformerLayerOptions {
  TransformerLayerOptions(int64_t embed_dim, int64_t heads)
      : embed_dim_(embed_dim), heads_(heads) {}
  /// Model width E.
  TORCH_ARG(int64_t, embed_dim);
  /// Attention heads H (E divisible by H).
  TORCH_ARG(int64_t, heads);
  /// Hidden width of the feed-forward block; 0 (default) means 4 E.
  TORCH_ARG(int64_t, ff_dim) = 0;
  /// Attention variant and its options.
  TORCH_ARG(AttentionOptions, attention) = SoftmaxAttentionOptions();
};

/// x + MHA(LN(x)), then x + FF(LN(x)) with FF = Linear -> GELU -> Linear.
class TransformerLayerImpl : public torch::nn::Cloneable<TransformerLayerImpl> {
 public:
  explicit TransformerLayerImpl(TransformerLayerOptions options);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;

  /// x: (B, L, E) -> (B, L, E)
  torch::Tensor forward(const torch::Tensor& x, const AttentionCall& call = {});

  TransformerLayerOptions options;
  torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr};
  MultiheadAttention attention{nullptr};
  torch::nn::Linear ff1{nullptr}, ff2{nullptr};
};
TORCH_MODULE(TransformerLayer);

/// Options of the two models below (fields marked "LM" or "classifier" apply to that model only).
struct TransformerOptions {
  TransformerOptions(int64_t vocab_size, int64_t embed_dim, int64_t heads, int64_t layers)
      : vocab_size_(vocab_size), embed_dim_(embed_dim), heads_(heads), layers_(layers) {}
  /// Token ids lie in [0, vocab_size).
  TORCH_ARG(int64_t, vocab_size);
  /// Model width E.
  TORCH_ARG(int64_t, embed_dim);
  /// Heads H per layer.
  TORCH_ARG(int64_t, heads);
  /// Number of layers.
  TORCH_ARG(int64_t, layers);
  /// Learned absolute position embeddings for up to this many tokens; 0 (default) means none, for
  /// position-free tasks or FLT's relative encoding alone. FLT's RPE works on top of them too, and
  /// trained the character LM of docs/reproductions.md (section 8) better with both.
  TORCH_ARG(int64_t, max_length) = 0;
  /// Feed-forward width; 0 means 4 E.
  TORCH_ARG(int64_t, ff_dim) = 0;
  /// Attention variant of every layer.
  TORCH_ARG(AttentionOptions, attention) = SoftmaxAttentionOptions();
  /// LM: tie the output head to the token embedding.
  TORCH_ARG(bool, tie_weights) = true;
  /// Classifier: number of classes C.
  TORCH_ARG(int64_t, classes) = 2;
  /// FLT attention only: one RPE spectrum per head shared by all layers (FLT paper: the RPE
  /// parameters are shared across layers), owned by the stack as `shared_rpe`. clone() of such a
  /// model is not supported (the copy's layers would share the original's spectrum).
  TORCH_ARG(bool, share_rpe) = false;
};

/// Shared body: embeddings, layers and final LayerNorm.
class TransformerStackImpl : public torch::nn::Cloneable<TransformerStackImpl> {
 public:
  explicit TransformerStackImpl(TransformerOptions options);
  void reset() override;

  /// tokens: (B, L) int64 -> (B, L, E)
  torch::Tensor forward(const torch::Tensor& tokens, const AttentionCall& call = {});

  /// The attention matrices of every layer for these tokens: one (B, H, L, L) tensor per layer.
  std::vector<torch::Tensor> attention_maps(const torch::Tensor& tokens,
                                            const AttentionCall& call = {});
  /// What layer `layer`'s attention computes with for these tokens: its heads' queries and keys,
  /// from the embeddings through the layers below. tokens: (B, L) int64 -> q, k (B, H, L, D)
  std::pair<torch::Tensor, torch::Tensor> queries_and_keys(const torch::Tensor& tokens,
                                                           int64_t layer,
                                                           const AttentionCall& call = {});

  TransformerOptions options;
  torch::nn::Embedding token_embedding{nullptr}, position_embedding{nullptr};
  std::vector<TransformerLayer> layers;
  torch::nn::LayerNorm final_norm{nullptr};
  RpeSpectrum shared_rpe{nullptr};  ///< set when options.share_rpe()

 private:
  torch::Tensor embed(const torch::Tensor& tokens);
};
TORCH_MODULE(TransformerStack);

/// Causal language model. tokens: (B, L) int64 -> logits (B, L, vocab_size)
class TransformerLMImpl : public torch::nn::Cloneable<TransformerLMImpl> {
 public:
  explicit TransformerLMImpl(TransformerOptions options);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;

  /// tokens: (B, L) int64 -> (B, L, vocab_size)
  torch::Tensor forward(const torch::Tensor& tokens);
  /// Per layer (B, H, L, L), causal.
  std::vector<torch::Tensor> attention_maps(const torch::Tensor& tokens);

  TransformerOptions options;
  TransformerStack stack{nullptr};
  torch::nn::Linear head{nullptr};  ///< null when tied
};
TORCH_MODULE(TransformerLM);

/// Non-causal encoder, mean pooling over tokens, linear head. tokens: (B, L) -> logits (B, C)
class SequenceClassifierImpl : public torch::nn::Cloneable<SequenceClassifierImpl> {
 public:
  explicit SequenceClassifierImpl(TransformerOptions options);
  void reset() override;
  void pretty_print(std::ostream& stream) const override;

  /// tokens: (B, L) int64 -> (B, C). positions: (L, l) or (B, L, l), the tokens' positions for
  /// variants with relative encodings (FLT with position_dim l, e.g. (row, column) of an image's
  /// pixels or patches); undefined (default) means token indices. Other variants ignore them.
  torch::Tensor forward(const torch::Tensor& tokens, const torch::Tensor& positions = {});
  /// Per layer (B, H, L, L).
  std::vector<torch::Tensor> attention_maps(const torch::Tensor& tokens,
                                            const torch::Tensor& positions = {});

  TransformerOptions options;
  TransformerStack stack{nullptr};
  torch::nn::Linear head{nullptr};
};
TORCH_MODULE(SequenceClassifier);

}  // namespace flt::attention
