#pragma once
// Internal to the attention library: the CPU passes of FAVOR+ attention over blocks of tokens and
// panels of heads (favor_blocks.cpp), which `favor_attention`'s forward without autograd and its
// fused autograd function (favor_attention.cpp) share.

#include <torch/types.h>

#include <cstdint>
#include <utility>

#include "flt/attention/feature_map.h"
#include "precomputed_input.h"

namespace flt::attention::detail {

// Whether q and k have one block 0: one tensor, or one maker of its rows (FLT's position block at
// shared positions).
bool same_leading_block(const PrecomputedInput& q, const PrecomputedInput& k);

bool shares_leading_block(const FeatureMapImpl& map, const PrecomputedInput& q,
                          const PrecomputedInput& k);

// Rows start .. start + n of q and k, a block 0 they have in common sliced or made once.
std::pair<PrecomputedInput, PrecomputedInput> rows_of_both(const PrecomputedInput& q,
                                                           const PrecomputedInput& k, int64_t start,
                                                           int64_t n);

// [v, 1]: the numerator and the denominator of the attention in one product.
torch::Tensor with_ones(const torch::Tensor& v);

// max(denominator, floor) from both = [numerator, denominator]: the normaliser. -> (B, H, n, 1)
torch::Tensor favor_normaliser(const torch::Tensor& both, const torch::Tensor& floor);

// out = numerator / max(denominator, floor) from both = [numerator, denominator], into `out`.
void normalize_into(torch::Tensor out, const torch::Tensor& both, const torch::Tensor& floor);

// Tokens per block of the CPU paths: kFavorBlockBytes of features (B H rows of M), at least 64.
int64_t favor_block_rows(const FeatureMapImpl& map, const torch::Tensor& v);

// The causal forward without autograd also takes at most this many tokens a block. Small maps'
// blocks were large (B H = 8, m = 64: 1024 tokens in 2 MB), and the call's temporaries of a block's
// size (features, projection, [v, 1], [num, den]) went back to the system by glibc's heap trimming
// at the end of every call and were faulted in again at the next: 250-2,243 minor faults a
// Performer forward at L = 1024-2048, 0-223 with this bound, in 0.66x-0.80x the time (two runs,
// docs/benchmarks.md). The fused autograd function keeps the larger blocks: its backward
// recomputes each block's features with a graph of their own, and in one run 256-token blocks made
// FLT m = 64's forward+backward 1.12-1.21x slower.
constexpr int64_t kInferenceBlockRows = 256;

// What the non-causal keys leave for the queries: S = sum_j phi_k_j [v_j, 1]^T (B, H, M, Dv + 1),
// the feature mass sum_j sum_m phi_k_jm (B, H, 1, 1) and the keys' shift (B, H, 1, 1) double
// (undefined for maps without shifts), both sums at that shift.
struct KeySummary {
  torch::Tensor summary, mass, shift;
};

// The keys' summary block by block (each block at its own shift, the running sums rescaled to the
// larger one), without autograd. A block adds phi_k^T v and the column sums of phi_k; [v, 1] and
// the mass are formed once at the end rather than per block (a copy of the block's values and a
// reduction per block saved).
KeySummary favor_key_summary(const FeatureMapImpl& map, const PrecomputedInput& k,
                             const torch::Tensor& v, int64_t rows);

// Each block of queries against the keys' summary, into `out` (B, H, Lq, Dv); where `den_floor`
// is defined (B, H, Lq, 2), each query's denominator and floor into it (what the backward reads
// with the output, rather than forming phi_q S again).
void favor_queries(const FeatureMapImpl& map, const PrecomputedInput& q, const KeySummary& keys,
                   double eps, int64_t rows, const torch::Tensor& out,
                   const torch::Tensor& den_floor = {});

// Non-causal FAVOR+ in panels: as many whole heads as fit detail::kFavorPanelBytes of features (one
// head with its tokens in blocks where one does not), each panel's keys summed, then its queries
// read. A panel's inputs, features and outputs are contiguous, so its products copy nothing (blocks
// of tokens across every head made matmul copy each block of q and k whole, and the output was
// written through strides), and the keys of a panel of whole heads are one block (no rescaled
// sums). Panels of 512 KB rather than 2 MB: temporaries of 2 MB were given back to the system by
// glibc at the end of every call and faulted in again at the next (docs/benchmarks.md, "Performer
// (non-causal) against plain ops"). The keys' per-token norms are computed once for the call.
// With `keys`, the keys' summary (B, H, M, Dv + 1), mass and shift of every head are kept there;
// with `den_floor`, every query's denominator and floor (B, H, Lq, 2). -> (B, H, Lq, Dv)
// The panels of the non-causal passes: heads a panel (`group`) and tokens a block within it.
struct Panels {
  int64_t group, rows;
};

Panels favor_panels(const FeatureMapImpl& map, int64_t lq, int64_t lk, const torch::Tensor& v);

torch::Tensor favor_non_causal(const FeatureMapImpl& map, const PrecomputedInput& q,
                               const PrecomputedInput& k, const torch::Tensor& v, double eps,
                               KeySummary* keys = nullptr, torch::Tensor* den_floor = nullptr);

// q and k with block 0 formed whole where a maker of its rows stood in for it (made once for
// both when they share the maker).
std::pair<PrecomputedInput, PrecomputedInput> formed_whole(PrecomputedInput q, PrecomputedInput k);

// The composite path: the features of the whole sequence and autograd through
// `kernels::normalized_linear_attention` (the reference of the fused backward).
torch::Tensor favor_composite(const FeatureMapImpl& map, PrecomputedInput q, PrecomputedInput k,
                              const torch::Tensor& v, bool causal, double eps);

// The running sums of a causal pass over blocks: the scan state S = sum_j phi_k_j [v_j, 1]^T of the
// keys so far (B, H, M, Dv + 1) and their feature mass (B, H, 1, 1).
struct CausalCarry {
  torch::Tensor state, mass;
};

// One causal block: both = [numerator, denominator] of the block's queries against the keys so far
// (the carry's, then the block's own up to each query; the carry then holds the block's keys too)
// and the queries' floor, from the keys' running mass. -> both (B, H, n, Dv + 1), floor to `floor`
torch::Tensor causal_block(const torch::Tensor& phi_q, const torch::Tensor& phi_k,
                           const torch::Tensor& values, CausalCarry& carry, double eps,
                           torch::Tensor& floor);

// Causal, blocked: each block's queries and keys together, the scan state and the keys' running
// mass carried from block to block; `shift` is the keys' (causal_key_shift of the first key).
// -> (B, H, L, Dv)
torch::Tensor favor_blocked_causal(const FeatureMapImpl& map, const PrecomputedInput& q,
                                   const PrecomputedInput& k, const torch::Tensor& v, double eps,
                                   int64_t rows, const torch::Tensor& shift);

}  // namespace flt::attention::detail
