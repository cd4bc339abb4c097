#pragma once
// Fourier attention (FourierFormer, Nguyen et al. 2022, eq. 15): the fused operator, its dispatch
// point, and the readable composite reference it is tested against.
//
//   K_ij = prod_d phi( s(R_d (q_id - k_jd)) ),  s(x) = sin(x) / x,  out_i = sum_j K_ij v_j / sum_j
//   K_ij
//
// Numerics (docs/design.md section 4): the product over d underflows for D >= 32, so weights are
// carried as mantissa * 2^exponent and every row is normalised by its largest exponent (the max
// shift of a softmax, in base 2); s and its log-derivative cot x - 1/x use series near 0
// (fourier_series.h).
// A row whose every weight is exactly zero (possible with ReLU, or when every key sits on a zero of
// sin) has no defined average: its output is 0 and it passes no gradient.
// Memory: never the (L, L, D) tensor. The CPU kernel keeps the normalised weights (B, H, Lq, Lk)
// from forward to backward (the size of one softmax attention matrix; the backward then skips
// the D-dimensional products); the CUDA kernel keeps two numbers per row and recomputes them.

#include <torch/types.h>

namespace flt::kernels {

/// The function phi applied to each factor s(R_d (q_d - k_d)) (Table 7 of the paper's supplement).
enum class FourierPhi {
  kPower,    ///< s^p (p even: the paper's choice, default p = 4; p odd: signed weights, warned)
  kAbs,      ///< |s|^p (p = 1 is the supplement's |x|)
  kRelu,     ///< max(s, 0)^p (p = 1 is the supplement's ReLU)
  kSigmoid,  ///< 1 / (1 + exp(-s)) (power ignored; composite path only: O(L^2 D) memory)
};

/// Name of phi for messages and pretty printing ("power", "abs", "relu", "sigmoid").
const char* fourier_phi_name(FourierPhi phi);

/// Fourier attention with autograd for q, k, v and r. `r` holds |R| already expanded per head and
/// dimension. The one dispatch point: fused CPU kernel (float, double), CUDA kernel (builds with
/// CUDA), composite fallback (other dtypes, sigmoid); a CUDA tensor in a build without CUDA is an
/// error that says so. Inputs are made contiguous.
/// q: (B, H, Lq, D)  k: (B, H, Lk, D)  v: (B, H, Lk, Dv)  r: (H, D) -> (B, H, Lq, Dv)
torch::Tensor fourier_attention_op(const torch::Tensor& q, const torch::Tensor& k,
                                   const torch::Tensor& v, const torch::Tensor& r, int64_t power,
                                   FourierPhi phi, bool causal);

/// The readable reference: builds the (B, H, Lq, Lk, D) tensor of R_d (q_id - k_jd), applies
/// s and phi, normalises with a max shift in the log domain; autograd does the backward.
/// q: (B, H, Lq, D)  k: (B, H, Lk, D)  v: (B, H, Lk, Dv)  r: (H, D) -> (B, H, Lq, Dv)
torch::Tensor fourier_attention_composite(const torch::Tensor& q, const torch::Tensor& k,
                                          const torch::Tensor& v, const torch::Tensor& r,
                                          int64_t power, FourierPhi phi, bool causal);

/// The fused CPU kernel alone (float or double, phi other than sigmoid), as an autograd function.
/// q: (B, H, Lq, D)  k: (B, H, Lk, D)  v: (B, H, Lk, Dv)  r: (H, D) -> (B, H, Lq, Dv)
torch::Tensor fourier_attention_fused_cpu(const torch::Tensor& q, const torch::Tensor& k,
                                          const torch::Tensor& v, const torch::Tensor& r,
                                          int64_t power, FourierPhi phi, bool causal);

/// Largest supported power: weights are held as r^p * 2^e with r in (1/2, 2), so r^p stays finite.
constexpr int64_t kMaxFourierPower = 32;

}  // namespace flt::kernels
