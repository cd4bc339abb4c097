#include "flt/attention/transformer.h"

#include <ATen/ATen.h>
#include <torch/nn/functional/activation.h>

#include <cmath>
#include <string>

namespace flt::attention {

// ---- TransformerLayer --------------------------------------------------------------------------

TransformerLayerImpl::TransformerLayerImpl(TransformerLayerOptions options_)
    : options(std::move(options_)) {
  reset();
}

void TransformerLayerImpl::reset() {
  const int64_t e = options.embed_dim();
  TORCH_CHECK(options.ff_dim() >= 0, "TransformerLayer: ff_dim must be >= 0, got ",
              options.ff_dim());
  const int64_t ff = options.ff_dim() > 0 ? options.ff_dim() : 4 * e;
  attention = register_module(
      "attention",
      MultiheadAttention(
          MultiheadAttentionOptions(e, options.heads()).attention(options.attention())));
  norm1 = register_module("norm1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({e})));
  norm2 = register_module("norm2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({e})));
  ff1 = register_module("ff1", torch::nn::Linear(e, ff));
  ff2 = register_module("ff2", torch::nn::Linear(ff, e));
}

void TransformerLayerImpl::pretty_print(std::ostream& stream) const {
  stream << "flt::attention::TransformerLayer(embed_dim=" << options.embed_dim()
         << ", heads=" << options.heads() << ", attention=" << attention_name(options.attention())
         << ")";
}

torch::Tensor TransformerLayerImpl::forward(const torch::Tensor& x, const AttentionCall& call) {
  const auto h = x + attention(norm1(x), call);
  return h + ff2(torch::nn::functional::gelu(ff1(norm2(h))));
}

// ---- TransformerStack
// ----------------------------------------------------------------------------

TransformerStackImpl::TransformerStackImpl(TransformerOptions options_)
    : options(std::move(options_)) {
  reset();
}

void TransformerStackImpl::reset() {
  TORCH_CHECK(options.vocab_size() > 0, "Transformer: vocab_size must be positive, got ",
              options.vocab_size());
  TORCH_CHECK(options.embed_dim() > 0, "Transformer: embed_dim must be positive, got ",
              options.embed_dim());
  TORCH_CHECK(options.layers() > 0, "Transformer: layers must be positive, got ", options.layers());
  TORCH_CHECK(options.max_length() >= 0, "Transformer: max_length must be >= 0, got ",
              options.max_length());
  const int64_t e = options.embed_dim();
  token_embedding =
      register_module("token_embedding", torch::nn::Embedding(options.vocab_size(), e));
  if (options.max_length() > 0) {
    position_embedding =
        register_module("position_embedding", torch::nn::Embedding(options.max_length(), e));
  } else {
    position_embedding = nullptr;
  }
  auto attention = options.attention();
  shared_rpe = nullptr;
  if (options.share_rpe()) {
    auto* flt = std::get_if<FLTAttentionOptions>(&attention);
    TORCH_CHECK(flt != nullptr, "Transformer: share_rpe needs FLT attention, got ",
                attention_name(attention));
    shared_rpe =
        register_module("shared_rpe", RpeSpectrum(rpe_spectrum_options(*flt, options.heads())));
    flt->shared_spectrum(shared_rpe);
  }
  layers.clear();
  for (int64_t i = 0; i < options.layers(); ++i) {
    layers.push_back(register_module("layer" + std::to_string(i),
                                     TransformerLayer(TransformerLayerOptions(e, options.heads())
                                                          .ff_dim(options.ff_dim())
                                                          .attention(attention))));
  }
  final_norm =
      register_module("final_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({e})));
}

torch::Tensor TransformerStackImpl::embed(const torch::Tensor& tokens) {
  TORCH_CHECK(tokens.defined() && tokens.dim() == 2,
              "Transformer: tokens must have shape (B, L), got ",
              tokens.defined() ? tokens.sizes() : c10::IntArrayRef{});
  TORCH_CHECK(tokens.scalar_type() == at::kLong, "Transformer: tokens must be int64, got ",
              tokens.scalar_type());
  TORCH_CHECK(tokens.size(1) > 0, "Transformer: tokens have empty length L, got ", tokens.sizes());
  if (tokens.numel() > 0) {
    const int64_t lo = tokens.min().item<int64_t>();
    const int64_t hi = tokens.max().item<int64_t>();
    TORCH_CHECK(lo >= 0 && hi < options.vocab_size(), "Transformer: token ids must lie in [0, ",
                options.vocab_size(), "), got values in [", lo, ", ", hi, "]");
  }
  auto x = token_embedding(tokens);
  if (!position_embedding.is_empty()) {
    const int64_t length = tokens.size(1);
    TORCH_CHECK(length <= options.max_length(), "Transformer: sequence length ", length,
                " exceeds max_length ", options.max_length());
    x = x + position_embedding(at::arange(length, tokens.options())).unsqueeze(0);
  }
  return x;
}

torch::Tensor TransformerStackImpl::forward(const torch::Tensor& tokens,
                                            const AttentionCall& call) {
  auto x = embed(tokens);
  for (auto& layer : layers) x = layer(x, call);
  return final_norm(x);
}

std::vector<torch::Tensor> TransformerStackImpl::attention_maps(const torch::Tensor& tokens,
                                                                const AttentionCall& call) {
  std::vector<torch::Tensor> maps;
  auto x = embed(tokens);
  for (auto& layer : layers) {
    maps.push_back(layer->attention->attention_weights(layer->norm1(x), call));
    x = layer(x, call);
  }
  return maps;
}

std::pair<torch::Tensor, torch::Tensor> TransformerStackImpl::queries_and_keys(
    const torch::Tensor& tokens, int64_t layer, const AttentionCall& call) {
  const auto count = static_cast<int64_t>(layers.size());
  TORCH_CHECK(layer >= 0 && layer < count,
              "TransformerStack::queries_and_keys: layer must be in [0, ", count, "), got ", layer);
  auto x = embed(tokens);
  for (int64_t i = 0; i < layer; ++i) x = layers[i](x, call);
  return layers[layer]->attention->queries_and_keys(layers[layer]->norm1(x));
}

// ---- TransformerLM
// ---------------------------------------------------------------------------------

TransformerLMImpl::TransformerLMImpl(TransformerOptions options_) : options(std::move(options_)) {
  reset();
}

void TransformerLMImpl::reset() {
  stack = register_module("stack", TransformerStack(options));
  if (options.tie_weights()) {
    head = nullptr;
  } else {
    head = register_module("head", torch::nn::Linear(options.embed_dim(), options.vocab_size()));
  }
}

void TransformerLMImpl::pretty_print(std::ostream& stream) const {
  stream << "flt::attention::TransformerLM(vocab=" << options.vocab_size()
         << ", embed_dim=" << options.embed_dim() << ", heads=" << options.heads()
         << ", layers=" << options.layers() << ", attention=" << attention_name(options.attention())
         << ", tied=" << (options.tie_weights() ? "true" : "false") << ")";
}

torch::Tensor TransformerLMImpl::forward(const torch::Tensor& tokens) {
  AttentionCall call;
  call.causal = true;
  const auto h = stack(tokens, call);
  // Tied head: the embedding rows have norm ~sqrt(E) and so does the LayerNorm output, so the raw
  // product has logits of size sqrt(E) and a first loss far above log(vocab); 1/sqrt(E) fixes it.
  if (options.tie_weights()) {
    return at::matmul(h, stack->token_embedding->weight.t()) /
           std::sqrt(static_cast<double>(options.embed_dim()));
  }
  return head(h);
}

std::vector<torch::Tensor> TransformerLMImpl::attention_maps(const torch::Tensor& tokens) {
  AttentionCall call;
  call.causal = true;
  return stack->attention_maps(tokens, call);
}

// ---- SequenceClassifier
// ------------------------------------------------------------------------------

SequenceClassifierImpl::SequenceClassifierImpl(TransformerOptions options_)
    : options(std::move(options_)) {
  reset();
}

void SequenceClassifierImpl::reset() {
  TORCH_CHECK(options.classes() > 1, "SequenceClassifier: classes must be >= 2, got ",
              options.classes());
  stack = register_module("stack", TransformerStack(options));
  head = register_module("head", torch::nn::Linear(options.embed_dim(), options.classes()));
}

void SequenceClassifierImpl::pretty_print(std::ostream& stream) const {
  stream << "flt::attention::SequenceClassifier(vocab=" << options.vocab_size()
         << ", classes=" << options.classes() << ", embed_dim=" << options.embed_dim()
         << ", heads=" << options.heads() << ", layers=" << options.layers()
         << ", attention=" << attention_name(options.attention()) << ")";
}

torch::Tensor SequenceClassifierImpl::forward(const torch::Tensor& tokens,
                                              const torch::Tensor& positions) {
  AttentionCall call;
  call.positions = positions;
  return head(stack(tokens, call).mean(1));
}

std::vector<torch::Tensor> SequenceClassifierImpl::attention_maps(const torch::Tensor& tokens,
                                                                  const torch::Tensor& positions) {
  AttentionCall call;
  call.positions = positions;
  return stack->attention_maps(tokens, call);
}

}  // namespace flt::attention
