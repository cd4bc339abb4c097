// FAVOR+ attention's CPU passes: features formed a block of tokens (or a panel of heads) at a time,
// never for the whole sequence; the causal scan carried from block to block.
#include "favor_blocks.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "flt/kernels/linear_attention.h"

namespace flt::attention::detail {

bool same_leading_block(const PrecomputedInput& q, const PrecomputedInput& k) {
  return q.blocks[0].defined() ? q.blocks[0].is_same(k.blocks[0])
                               : q.leading_rows && q.leading_rows == k.leading_rows;
}

bool shares_leading_block(const FeatureMapImpl& map, const PrecomputedInput& q,
                          const PrecomputedInput& k) {
  if (!map.projection.defined() || q.blocks.size() < 2 || k.blocks.size() < 2) return false;
  return same_leading_block(q, k) && q.scale(0).is_same(k.scale(0)) && !q.projection(0).defined() &&
         !k.projection(0).defined();
}

std::pair<PrecomputedInput, PrecomputedInput> rows_of_both(const PrecomputedInput& q,
                                                           const PrecomputedInput& k, int64_t start,
                                                           int64_t n) {
  auto k_rows = k.rows(start, n);
  auto q_rows = same_leading_block(q, k) ? q.rows(start, n, k_rows.blocks[0]) : q.rows(start, n);
  return {std::move(q_rows), std::move(k_rows)};
}

torch::Tensor with_ones(const torch::Tensor& v) {
  return at::cat({v, at::ones_like(v.narrow(-1, 0, 1))}, -1);
}

torch::Tensor favor_normaliser(const torch::Tensor& both, const torch::Tensor& floor) {
  return at::maximum(both.narrow(-1, both.size(-1) - 1, 1), floor.to(both.scalar_type()));
}

void normalize_into(torch::Tensor out, const torch::Tensor& both, const torch::Tensor& floor) {
  at::div_out(out, both.narrow(-1, 0, both.size(-1) - 1), favor_normaliser(both, floor));
}

int64_t favor_block_rows(const FeatureMapImpl& map, const torch::Tensor& v) {
  const int64_t row_bytes = v.size(0) * v.size(1) * map.output_dim() * v.element_size();
  return std::max<int64_t>(64, kFavorBlockBytes / std::max<int64_t>(1, row_bytes));
}

KeySummary favor_key_summary(const FeatureMapImpl& map, const PrecomputedInput& k,
                             const torch::Tensor& v, int64_t rows) {
  const int64_t lk = v.size(2);
  torch::Tensor kv, column_sums, shift;  // (B, H, M, Dv), (B, H, 1, M), (B, H, 1, 1) double
  for (int64_t start = 0; start < lk; start += rows) {
    const int64_t n = std::min(rows, lk - start);
    torch::Tensor block_shift;
    const auto phi_k = detail::block_key_features(map, k.rows(start, n), block_shift);
    auto part = at::matmul(phi_k.transpose(-2, -1), v.narrow(2, start, n));
    auto part_sums = phi_k.sum(-2, /*keepdim=*/true);
    if (!kv.defined()) {
      kv = std::move(part);
      column_sums = std::move(part_sums);
      shift = block_shift;
    } else if (!block_shift.defined()) {
      kv.add_(part);
      column_sums.add_(part_sums);
    } else {
      // Both sums to the larger shift: factors exp(shift - top) <= 1, so nothing overflows.
      const auto top = at::maximum(shift, block_shift);
      const auto old_factor = (shift - top).exp_().to(kv.scalar_type());
      const auto new_factor = (block_shift - top).exp_().to(kv.scalar_type());
      kv.mul_(old_factor).add_(part.mul_(new_factor));
      column_sums.mul_(old_factor).add_(part_sums.mul_(new_factor));
      shift = top;
    }
  }
  KeySummary s;
  s.mass = column_sums.sum(-1, /*keepdim=*/true);
  s.summary = at::cat({kv, column_sums.transpose(-2, -1)}, -1);
  s.shift = shift;
  return s;
}

void favor_queries(const FeatureMapImpl& map, const PrecomputedInput& q, const KeySummary& keys,
                   double eps, int64_t rows, const torch::Tensor& out,
                   const torch::Tensor& den_floor) {
  const int64_t lq = q.length();
  for (int64_t start = 0; start < lq; start += rows) {
    const int64_t n = std::min(rows, lq - start);
    const auto phi_q = detail::query_features(map, q.rows(start, n));
    const auto both = at::matmul(phi_q, keys.summary);
    const auto floor = favor_floor(phi_q, keys.mass, eps);
    normalize_into(out.narrow(2, start, n), both, floor);
    if (!den_floor.defined()) continue;
    const auto kept = den_floor.narrow(2, start, n);
    kept.narrow(-1, 0, 1).copy_(both.narrow(-1, both.size(-1) - 1, 1));
    kept.narrow(-1, 1, 1).copy_(floor);
  }
}

Panels favor_panels(const FeatureMapImpl& map, int64_t lq, int64_t lk, const torch::Tensor& v) {
  // A token's features, or its input where that is wider (FLT's position block: 2r columns).
  const int64_t row_bytes = std::max(map.output_dim(), map.options.input_dim()) * v.element_size();
  const int64_t group =
      std::clamp<int64_t>(detail::kFavorPanelBytes / (std::max(lq, lk) * row_bytes), 1, v.size(1));
  return {group, std::max<int64_t>(64, detail::kFavorPanelBytes / (group * row_bytes))};
}

torch::Tensor favor_non_causal(const FeatureMapImpl& map, const PrecomputedInput& q,
                               const PrecomputedInput& k, const torch::Tensor& v, double eps,
                               KeySummary* keys, torch::Tensor* den_floor) {
  const int64_t batch = v.size(0), heads = v.size(1);
  const auto [group, rows] = favor_panels(map, q.length(), v.size(2), v);
  const auto keys_normed = detail::with_half_squared_norms(k);
  auto out = at::empty({batch, heads, q.length(), v.size(3)}, v.options());
  if (den_floor != nullptr) *den_floor = at::empty({batch, heads, q.length(), 2}, v.options());
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < heads; h += group) {
      const int64_t n = std::min(group, heads - h);
      const auto panel = [&](const torch::Tensor& t) { return detail::heads_of(t, b, h, n); };
      const auto summary = favor_key_summary(map, keys_normed.heads(b, h, n), panel(v), rows);
      favor_queries(map, q.heads(b, h, n), summary, eps, rows, panel(out),
                    den_floor != nullptr ? panel(*den_floor) : torch::Tensor());
      if (keys == nullptr) continue;
      const auto keep = [&](torch::Tensor& whole, const torch::Tensor& part) {
        if (!part.defined()) return;
        if (!whole.defined()) {
          auto shape = part.sizes().vec();
          shape[0] = batch;
          shape[1] = heads;
          whole = at::empty(shape, part.options());
        }
        panel(whole).copy_(part);
      };
      keep(keys->summary, summary.summary);
      keep(keys->mass, summary.mass);
      keep(keys->shift, summary.shift);
    }
  }
  return out;
}

std::pair<PrecomputedInput, PrecomputedInput> formed_whole(PrecomputedInput q, PrecomputedInput k) {
  if (q.blocks[0].defined() && k.blocks[0].defined()) return {std::move(q), std::move(k)};
  if (same_leading_block(q, k)) return rows_of_both(q, k, 0, k.length());
  if (!q.blocks[0].defined()) q = q.rows(0, q.length());
  if (!k.blocks[0].defined()) k = k.rows(0, k.length());
  return {std::move(q), std::move(k)};
}

torch::Tensor favor_composite(const FeatureMapImpl& map, PrecomputedInput q, PrecomputedInput k,
                              const torch::Tensor& v, bool causal, double eps) {
  torch::Tensor query, key;
  {  // the feature inputs (FLT's position block and its projection) are freed before the kernel
    auto [qs, ks] = formed_whole(std::move(q), std::move(k));
    detail::share_leading_projection(map, qs, ks);
    query = detail::query_features(map, qs);
    key = detail::key_features(map, ks, causal);
  }
  return kernels::normalized_linear_attention(query, key, v, causal,
                                              favor_floor(query, favor_key_mass(key, causal), eps));
}

torch::Tensor causal_block(const torch::Tensor& phi_q, const torch::Tensor& phi_k,
                           const torch::Tensor& values, CausalCarry& carry, double eps,
                           torch::Tensor& floor) {
  if (!carry.state.defined()) {
    carry.state =
        at::zeros({phi_k.size(0), phi_k.size(1), phi_k.size(3), values.size(3)}, values.options());
  }
  auto both = kernels::causal_linear_attention_block(phi_q, phi_k, values, carry.state);
  // The prefix sums of favor_key_mass, the previous blocks' total added to the first key first
  // (the order of one cumulative sum).
  auto per_key = phi_k.sum(-1, /*keepdim=*/true);
  if (carry.mass.defined()) per_key.narrow(-2, 0, 1).add_(carry.mass);
  const auto key_mass = per_key.cumsum(-2);
  carry.mass = key_mass.narrow(-2, key_mass.size(-2) - 1, 1);
  floor = favor_floor(phi_q, key_mass, eps);
  return both;
}

torch::Tensor favor_blocked_causal(const FeatureMapImpl& map, const PrecomputedInput& q,
                                   const PrecomputedInput& k, const torch::Tensor& v, double eps,
                                   int64_t rows, const torch::Tensor& shift) {
  const int64_t length = v.size(2);
  const bool shared = shares_leading_block(map, q, k);
  CausalCarry carry;
  torch::Tensor out;
  for (int64_t start = 0; start < length; start += rows) {
    const int64_t n = std::min(rows, length - start);
    auto [q_rows, k_rows] = rows_of_both(q, k, start, n);
    if (shared) {
      const auto projection = detail::project_block(map, k_rows, 0);
      q_rows.projections = {projection};
      k_rows.projections = {projection};
    }
    const auto phi_k = detail::key_features(map, k_rows, shift);
    const auto phi_q = detail::query_features(map, q_rows);
    if (!out.defined())
      out = at::empty({phi_q.size(0), phi_q.size(1), length, v.size(3)}, v.options());
    torch::Tensor floor;
    const auto both =
        causal_block(phi_q, phi_k, with_ones(v.narrow(2, start, n)), carry, eps, floor);
    normalize_into(out.narrow(2, start, n), both, floor);
  }
  return out;
}

}  // namespace flt::attention::detail
