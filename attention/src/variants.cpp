#include "flt/attention/variants.h"

namespace flt::attention {
namespace {

template <typename Holder>
AttentionHandle handle_of(Holder holder) {
  auto impl = holder.ptr();
  return {impl, impl.get()};
}

AttentionHandle build(const SoftmaxAttentionOptions& o) {
  return handle_of(SoftmaxAttention(o));
}
AttentionHandle build(const LinearAttentionOptions& o) {
  return handle_of(LinearAttention(o));
}
AttentionHandle build(const PerformerAttentionOptions& o) {
  return handle_of(PerformerAttention(o));
}
AttentionHandle build(const FourierAttentionOptions& o) {
  return handle_of(FourierAttention(o));
}
AttentionHandle build(const FLTAttentionOptions& o) {
  return handle_of(FLTAttention(o));
}
AttentionHandle build(const SchoenbAttentionOptions& o) {
  return handle_of(SchoenbAttention(o));
}

// The convention of attention.h, the same for every variant: 0 takes the container's value, a
// nonzero value must agree with it.
template <typename Options>
Options with_container_dims(Options o, int64_t heads, int64_t head_dim) {
  check_dims_options("make_attention", o.heads(), o.head_dim(), false, false);
  TORCH_CHECK(o.heads() == 0 || o.heads() == heads, "make_attention: ", Options::kName,
              " options have heads ", o.heads(), " but the container has ", heads,
              " heads (leave heads 0 to take the container's)");
  TORCH_CHECK(o.head_dim() == 0 || o.head_dim() == head_dim, "make_attention: ", Options::kName,
              " options have head_dim ", o.head_dim(), " but the container has head dim ", head_dim,
              " (leave head_dim 0 to take the container's)");
  return o.heads(heads).head_dim(head_dim);
}

}  // namespace

AttentionHandle make_attention(const AttentionOptions& options, int64_t heads, int64_t head_dim) {
  TORCH_CHECK(heads > 0, "make_attention: heads must be positive, got ", heads);
  TORCH_CHECK(head_dim > 0, "make_attention: head_dim must be positive, got ", head_dim);
  return std::visit([&](const auto& o) { return build(with_container_dims(o, heads, head_dim)); },
                    options);
}

std::string attention_name(const AttentionOptions& options) {
  return std::visit([](const auto& o) -> std::string { return std::decay_t<decltype(o)>::kName; },
                    options);
}

}  // namespace flt::attention
