#include "flt/attention/variants.h"

#include <tuple>
#include <type_traits>
#include <variant>

namespace flt::attention {
namespace {

template <typename Holder>
AttentionHandle handle_of(Holder holder) {
  auto impl = holder.ptr();
  return {impl, impl.get()};
}

// The module each options type builds, at that type's position in AttentionOptions (a module
// given another's options does not compile).
using AttentionModules = std::tuple<SoftmaxAttention, LinearAttention, PerformerAttention,
                                    FourierAttention, FLTAttention, SchoenbAttention>;
static_assert(std::tuple_size_v<AttentionModules> == std::variant_size_v<AttentionOptions>);

template <typename Options, size_t I = 0>
constexpr size_t alternative_index() {
  if constexpr (std::is_same_v<std::variant_alternative_t<I, AttentionOptions>, Options>) {
    return I;
  } else {
    return alternative_index<Options, I + 1>();
  }
}

template <typename Options>
AttentionHandle build(const Options& o) {
  using Module = std::tuple_element_t<alternative_index<Options>(), AttentionModules>;
  return handle_of(Module(o));
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
