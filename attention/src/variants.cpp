#include "flt/attention/variants.h"

namespace flt::attention {
namespace {

template <typename Holder>
AttentionHandle handle_of(Holder holder) {
  auto impl = holder.ptr();
  return {impl, impl.get()};
}

struct Factory {
  int64_t heads;
  int64_t head_dim;
  AttentionHandle operator()(const SoftmaxAttentionOptions& o) const {
    return handle_of(SoftmaxAttention(o));
  }
  AttentionHandle operator()(const LinearAttentionOptions& o) const {
    return handle_of(LinearAttention(o));
  }
  // The random-feature variants take the container's head dim (and heads, for per-head parameters).
  AttentionHandle operator()(PerformerAttentionOptions o) const {
    return handle_of(PerformerAttention(o.head_dim(head_dim)));
  }
  AttentionHandle operator()(FLTAttentionOptions o) const {
    return handle_of(FLTAttention(o.heads(heads).head_dim(head_dim)));
  }
  AttentionHandle operator()(SchoenbAttentionOptions o) const {
    return handle_of(SchoenbAttention(o.heads(heads).head_dim(head_dim)));
  }
  AttentionHandle operator()(FourierAttentionOptions o) const {
    return handle_of(FourierAttention(o.heads(heads).head_dim(head_dim)));
  }
};

}  // namespace

AttentionHandle make_attention(const AttentionOptions& options, int64_t heads, int64_t head_dim) {
  TORCH_CHECK(heads > 0, "make_attention: heads must be positive, got ", heads);
  TORCH_CHECK(head_dim > 0, "make_attention: head_dim must be positive, got ", head_dim);
  return std::visit(Factory{heads, head_dim}, options);
}

std::string attention_name(const AttentionOptions& options) {
  return std::visit([](const auto& o) -> std::string { return std::decay_t<decltype(o)>::kName; },
                    options);
}

}  // namespace flt::attention
