#pragma once
// Linear attention over feature maps: the one operator behind Linear, Performer, FLT and SchoenbAt.

#include <torch/types.h>

namespace flt::kernels {

/// Unnormalised linear attention: out_i = sum_j (phi_q_i . phi_k_j) v_j over all j (non-causal) or
/// j <= i (causal, a prefix sum of phi_k_j v_j^T). Never builds the (L, M, Dv) prefix tensor.
/// The one dispatch point: non-causal is two matmuls; causal on the CPU in float and double runs
/// the fused scan kernel, an autograd function whose backward is three more scans (O(M Dv) state
/// per thread, no (L, M, Dv) tensor in forward or backward); CUDA tensors and other dtypes take
/// `linear_attention_numerator_composite`, whose chunks all run at once.
/// phi_q: (B, H, Lq, M)  phi_k: (B, H, Lk, M)  v: (B, H, Lk, Dv) -> (B, H, Lq, Dv)
torch::Tensor linear_attention_numerator(const torch::Tensor& phi_q, const torch::Tensor& phi_k,
                                         const torch::Tensor& v, bool causal);

/// `linear_attention_numerator` in LibTorch ops (autograd does the backward): causal works in
/// chunks of `kCausalChunk` keys, the masked scores within a chunk and the (M, Dv) states of the
/// chunks before it by a cumulative sum, every chunk in one batched matmul (O(L M Dv / C) memory).
/// phi_q: (B, H, Lq, M)  phi_k: (B, H, Lk, M)  v: (B, H, Lk, Dv) -> (B, H, Lq, Dv)
torch::Tensor linear_attention_numerator_composite(const torch::Tensor& phi_q,
                                                   const torch::Tensor& phi_k,
                                                   const torch::Tensor& v, bool causal);

/// Normalised linear attention, the one formula of every feature-map variant (Linear, Performer,
/// FLT, SchoenbAt): out_i = numerator_i / max(denominator_i, floor_i), where the denominator
/// sum_j phi_q_i . phi_k_j is the numerator of a ones column (one call computes both). Positive
/// feature maps reach the floor only by underflow; signed ones (trigonometric, Maclaurin) can give
/// a denominator <= 0, which the floor replaces.
/// phi_q: (B, H, Lq, M)  phi_k: (B, H, Lk, M)  v: (B, H, Lk, Dv)  floor: broadcastable to
/// (B, H, Lq, 1) -> (B, H, Lq, Dv)
torch::Tensor normalized_linear_attention(const torch::Tensor& phi_q, const torch::Tensor& phi_k,
                                          const torch::Tensor& v, bool causal,
                                          const torch::Tensor& floor);
/// The same with one floor `eps` for every query.
torch::Tensor normalized_linear_attention(const torch::Tensor& phi_q, const torch::Tensor& phi_k,
                                          const torch::Tensor& v, bool causal, double eps);

/// One block of a longer causal sequence, without autograd: out_i = phi_q_i . (S + sum_{block keys
/// j <= i} phi_k_j v_j^T) with S the state of the keys before the block, which then holds them too
/// (+= sum_j phi_k_j v_j^T). On the CPU in float and double, the fused scan started from S: blocks
/// run in turn give the outputs of one `linear_attention_numerator` call, addition for addition,
/// while only a block's features exist at a time. With `reverse`, keys j >= i and S the state of
/// the keys after the block (blocks run from the last): the scans of the numerator's backward.
/// CPU float/double only.
/// phi_q: (B, H, T, M)  phi_k: (B, H, T, M)  v: (B, H, T, Dv)  state: (B, H, M, Dv), contiguous,
/// updated in place (zeros before the first block) -> (B, H, T, Dv)
torch::Tensor causal_linear_attention_block(const torch::Tensor& phi_q, const torch::Tensor& phi_k,
                                            const torch::Tensor& v, torch::Tensor& state,
                                            bool reverse = false);

/// Keys per block in the causal path: within a block the masked (C, C) scores, across blocks the
/// state.
constexpr int64_t kCausalChunk = 64;

}  // namespace flt::kernels
