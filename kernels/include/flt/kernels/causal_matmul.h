#pragma once
// Products under a causal mask that never read the masked entries. A plain matmul of a masked
// (L, L) matrix with x multiplies every masked zero by a row of x, so one NaN or inf in x_j turns
// the rows i < j, which do not depend on it, into NaN (0 * NaN = NaN); the backward of q k^T does
// the same with the masked zeros of its incoming gradient. Here a non-finite entry reaches exactly
// the outputs and gradients that depend on it. Used by the composite causal paths: exact softmax,
// kernelised attention, Fourier attention's composite and the chunked linear-attention reference.

#include <torch/types.h>

namespace flt::kernels {

/// out_i = sum_{j <= i} a_ij x_j. Entries of a above the diagonal must be 0, or NaN in a row that
/// is NaN anyway (a softmax row that saw a NaN); they meet x's finite entries only, receive no
/// gradient and never reach dx. A non-finite x_j reaches the rows i >= j of its column, as NaN or
/// as x_j's inf (unweighted). Autograd: da = g x^T below the diagonal, dx_j = sum_{i>=j} a_ij g_i.
/// a: (..., L, L)  x: (..., L, E) with the same leading dims -> (..., L, E)
torch::Tensor causal_matmul(const torch::Tensor& a, const torch::Tensor& x);

/// The causal scores s_ij = q_i . k_j for j <= i, `fill` above the diagonal (-inf before a
/// softmax, 0 before a kernel that is then masked). Autograd reads the incoming gradient below the
/// diagonal only: dq_i = sum_{j <= i} ds_ij k_j, dk_j = sum_{i >= j} ds_ij q_i, so a NaN in q_i or
/// k_j reaches only the gradients of the positions that share an output with it.
/// q: (..., L, D)  k: (..., L, D) with the same leading dims -> (..., L, L)
torch::Tensor causal_scores(const torch::Tensor& q, const torch::Tensor& k, double fill);

}  // namespace flt::kernels
