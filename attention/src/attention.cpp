#include "flt/attention/attention.h"

#include <cmath>

namespace flt::attention {

void check_qkv(const char* fn, const torch::Tensor& q, const torch::Tensor& k,
               const torch::Tensor& v, bool causal) {
  TORCH_CHECK(q.defined() && k.defined(), fn, ": q and k must be defined tensors");
  TORCH_CHECK(q.dim() == 4, fn, ": q must have shape (B, H, L, D), got ", q.sizes());
  TORCH_CHECK(k.dim() == 4, fn, ": k must have shape (B, H, L, D), got ", k.sizes());
  TORCH_CHECK(q.is_floating_point(), fn, ": q must be a floating-point tensor, got ",
              q.scalar_type());
  TORCH_CHECK(k.scalar_type() == q.scalar_type(), fn, ": k has dtype ", k.scalar_type(),
              " but q has ", q.scalar_type());
  TORCH_CHECK(k.device() == q.device(), fn, ": k is on ", k.device(), " but q is on ", q.device());
  TORCH_CHECK(q.size(0) == k.size(0) && q.size(1) == k.size(1), fn,
              ": q and k must agree in batch and heads, got q ", q.sizes(), " and k ", k.sizes());
  TORCH_CHECK(q.size(3) == k.size(3), fn, ": q and k must have the same head dim D, got q ",
              q.sizes(), " and k ", k.sizes());
  TORCH_CHECK(q.size(3) > 0, fn, ": head dim D must be positive, got q ", q.sizes());
  TORCH_CHECK(q.size(2) > 0, fn, ": q has empty length L, got ", q.sizes());
  TORCH_CHECK(k.size(2) > 0, fn, ": k has empty length L, got ", k.sizes());
  TORCH_CHECK(!causal || q.size(2) == k.size(2), fn,
              ": causal attention needs equal query and key lengths, got q ", q.sizes(), " and k ",
              k.sizes());
  if (!v.defined()) return;
  TORCH_CHECK(v.dim() == 4, fn, ": v must have shape (B, H, L, Dv), got ", v.sizes());
  TORCH_CHECK(v.scalar_type() == q.scalar_type(), fn, ": v has dtype ", v.scalar_type(),
              " but q has ", q.scalar_type());
  TORCH_CHECK(v.device() == q.device(), fn, ": v is on ", v.device(), " but q is on ", q.device());
  TORCH_CHECK(v.size(0) == k.size(0) && v.size(1) == k.size(1) && v.size(2) == k.size(2), fn,
              ": v must agree with k in batch, heads and length, got k ", k.sizes(), " and v ",
              v.sizes());
}

torch::Tensor resolve_positions(const char* fn, const torch::Tensor& positions,
                                const torch::Tensor& q) {
  const int64_t length = q.size(2);
  if (!positions.defined()) {
    return torch::arange(length, q.options()).view({1, length, 1});
  }
  TORCH_CHECK(positions.dim() == 2 || positions.dim() == 3, fn,
              ": positions must have shape (L, l) or (B, L, l), got ", positions.sizes());
  auto pos = positions.dim() == 2 ? positions.unsqueeze(0) : positions;
  TORCH_CHECK(pos.size(1) == length, fn, ": positions have length ", pos.size(1),
              " but q has length ", length, " (positions ", positions.sizes(), ")");
  TORCH_CHECK(pos.size(0) == 1 || pos.size(0) == q.size(0), fn, ": positions have batch ",
              pos.size(0), " but q has batch ", q.size(0));
  TORCH_CHECK(pos.size(2) > 0, fn, ": positions need at least one coordinate, got ",
              positions.sizes());
  TORCH_CHECK(pos.device() == q.device(), fn, ": positions are on ", pos.device(), " but q is on ",
              q.device());
  return pos.to(q.scalar_type());
}

void check_positive_finite(const char* fn, const char* name, double value) {
  TORCH_CHECK(value > 0.0 && std::isfinite(value), fn, ": ", name,
              " must be positive and finite, got ", value);
}

void check_finite(const char* fn, const char* name, double value) {
  TORCH_CHECK(std::isfinite(value), fn, ": ", name, " must be finite, got ", value);
}

void check_positive(const char* fn, const char* name, int64_t value, const char* hint) {
  TORCH_CHECK(value > 0, fn, ": ", name, " must be positive, got ", value, hint);
}

void check_dims_options(const char* fn, int64_t heads, int64_t head_dim, bool need_heads,
                        bool need_head_dim) {
  constexpr const char* kSetIt =
      " (MultiheadAttention sets it; set it when using the module alone)";
  if (need_heads) {
    check_positive(fn, "heads", heads, kSetIt);
  } else {
    TORCH_CHECK(heads >= 0, fn, ": heads must be >= 0 (0: set by the container), got ", heads);
  }
  if (need_head_dim) {
    check_positive(fn, "head_dim", head_dim, kSetIt);
  } else {
    TORCH_CHECK(head_dim >= 0, fn, ": head_dim must be >= 0 (0: set by the container), got ",
                head_dim);
  }
}

void check_dims_against(const char* fn, int64_t heads, int64_t head_dim, const torch::Tensor& q) {
  TORCH_CHECK(heads == 0 || q.size(1) == heads, fn, ": q has ", q.size(1), " heads but heads is ",
              heads, " (q ", q.sizes(), ")");
  TORCH_CHECK(head_dim == 0 || q.size(3) == head_dim, fn, ": q has head dim ", q.size(3),
              " but head_dim is ", head_dim, " (q ", q.sizes(), ")");
}

}  // namespace flt::attention
