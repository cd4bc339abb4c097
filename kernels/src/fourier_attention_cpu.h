#pragma once
// Raw-pointer entry points of the fused CPU Fourier-attention kernel (internal to kernels/src).

#include <cstdint>

#include "flt/kernels/fourier_series.h"

namespace flt::kernels::cpu {

/// Sizes and options of one call.
struct FourierProblem {
  int64_t batch = 0, heads = 0, lq = 0, lk = 0, dim = 0, dv = 0;
  int power = 4;
  fourier::FactorMode mode = fourier::FactorMode::kPowerEven;
  bool causal = false;
  int threads = 1;
};

/// The inputs, contiguous, with the per-token trigonometric values precomputed (O(L D) sin/cos
/// evaluations, so the O(L^2 D) pair loop needs none: sin(R(q-k)) = sin Rq cos Rk - cos Rq sin Rk).
template <typename T>
struct FourierOperands {
  const T* q = nullptr;        ///< (B, H, Lq, D)
  const T* q_sin = nullptr;    ///< (B, H, Lq, D) sin(r_d q_id)
  const T* q_cos = nullptr;    ///< (B, H, Lq, D) cos(r_d q_id)
  const T* k_t = nullptr;      ///< (B, H, D, Lk) k transposed: keys contiguous per dimension
  const T* k_sin_t = nullptr;  ///< (B, H, D, Lk) sin(r_d k_jd)
  const T* k_cos_t = nullptr;  ///< (B, H, D, Lk) cos(r_d k_jd)
  const T* v = nullptr;        ///< (B, H, Lk, Dv)
  const T* r = nullptr;        ///< (H, D) |R|
};

/// Forward: out (B, H, Lq, Dv) and the normalised weights A (B, H, Lq, Lk) the backward reuses
/// (0 for future keys and in rows whose every weight vanished; such rows output 0). Also each
/// row's largest weight exponent `row_max` (base 2) and the sum `row_sum` of the weights times
/// 2^-row_max (0 when every weight of the row vanished).
/// Scratch (in elements of T) that `fourier_forward` / `fourier_backward` need: per thread, the
/// exponent rows of one query tile (forward) or private dk, dv, dr accumulators (backward).
int64_t fourier_forward_workspace(const FourierProblem& p);
int64_t fourier_backward_workspace(const FourierProblem& p);

template <typename T>
void fourier_forward(const FourierProblem& p, const FourierOperands<T>& in, T* out, T* row_max,
                     T* row_sum, T* weights, T* workspace);

/// Backward from the forward's out, weights A and row_sum, and grad_out (B, H, Lq, Dv).
/// Writes dq (B, H, Lq, D), dk (B, H, Lk, D), dv (B, H, Lk, Dv) and dr (H, D), the gradient
/// with respect to |R|.
template <typename T>
void fourier_backward(const FourierProblem& p, const FourierOperands<T>& in, const T* out,
                      const T* weights, const T* row_sum, const T* grad_out, T* dq, T* dk, T* dv,
                      T* dr, T* workspace);

}  // namespace flt::kernels::cpu
