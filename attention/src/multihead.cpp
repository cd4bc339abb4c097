#include "flt/attention/multihead.h"

namespace flt::attention {

MultiheadAttentionImpl::MultiheadAttentionImpl(MultiheadAttentionOptions options_)
    : options(std::move(options_)) {
  reset();
}

void MultiheadAttentionImpl::reset() {
  TORCH_CHECK(options.embed_dim() > 0, "MultiheadAttention: embed_dim must be positive, got ",
              options.embed_dim());
  TORCH_CHECK(options.heads() > 0, "MultiheadAttention: heads must be positive, got ",
              options.heads());
  TORCH_CHECK(options.embed_dim() % options.heads() == 0, "MultiheadAttention: embed_dim ",
              options.embed_dim(), " is not divisible by heads ", options.heads());
  const int64_t e = options.embed_dim();
  const auto linear = [&](const char* name) {
    return register_module(name,
                           torch::nn::Linear(torch::nn::LinearOptions(e, e).bias(options.bias())));
  };
  q_proj = linear("q_proj");
  k_proj = linear("k_proj");
  v_proj = linear("v_proj");
  out_proj = linear("out_proj");
  auto handle = make_attention(options.attention(), options.heads(), e / options.heads());
  attention_module_ = register_module("attention", handle.module);
  attention_ = handle.attention;
}

void MultiheadAttentionImpl::pretty_print(std::ostream& stream) const {
  stream << "flt::attention::MultiheadAttention(embed_dim=" << options.embed_dim()
         << ", heads=" << options.heads() << ", attention=" << attention_->name() << ")";
}

void MultiheadAttentionImpl::check_input(const torch::Tensor& x) const {
  TORCH_CHECK(x.defined() && x.dim() == 3, "MultiheadAttention: x must have shape (B, L, E), got ",
              x.defined() ? x.sizes() : c10::IntArrayRef{});
  TORCH_CHECK(x.size(2) == options.embed_dim(), "MultiheadAttention: x has width ", x.size(2),
              " but embed_dim is ", options.embed_dim(), " (x ", x.sizes(), ")");
}

torch::Tensor MultiheadAttentionImpl::split_heads(const torch::Tensor& x) const {
  const int64_t h = options.heads();
  return x.view({x.size(0), x.size(1), h, options.embed_dim() / h}).transpose(1, 2);
}

torch::Tensor MultiheadAttentionImpl::forward(const torch::Tensor& x, const AttentionCall& call) {
  const auto [q, k] = queries_and_keys(x);
  const auto out = attention_->forward(q, k, split_heads(v_proj(x)), call);  // (B, H, L, D)
  return out_proj(out.transpose(1, 2).reshape({x.size(0), x.size(1), options.embed_dim()}));
}

torch::Tensor MultiheadAttentionImpl::attention_weights(const torch::Tensor& x,
                                                        const AttentionCall& call) {
  const auto [q, k] = queries_and_keys(x);
  return attention_->materialize(q, k, call);
}

std::pair<torch::Tensor, torch::Tensor> MultiheadAttentionImpl::queries_and_keys(
    const torch::Tensor& x) {
  check_input(x);
  return {split_heads(q_proj(x)), split_heads(k_proj(x))};
}

}  // namespace flt::attention
