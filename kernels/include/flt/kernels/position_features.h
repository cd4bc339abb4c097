#pragma once
// FLT's position block in one pass: [cos, sin] of the phases 2 pi xi_t . x_i (FLT paper, Thm 4.1;
// attention/src/flt.cpp scales the columns). The composite form (a double matmul, whole turns
// removed, a float copy, cos, sin, concatenation) makes six passes over the block; at L = 4096 it
// takes as long as one of FLT's projections. CPU, no autograd: callers use the
// composite when the frequencies or the positions need gradients.
#include <ATen/ATen.h>

namespace flt::kernels {

/// positions (B', L, l) and frequencies (H, r, l), any floating dtype, CPU -> float32
/// (B', H, L, 2r): columns t < r hold cos(2 pi xi_t . x_i), columns r + t the sine. The phase is
/// formed in double and its whole turns removed before it becomes a float angle of at most pi / 4
/// (octant reduction), so the result is within a few float ulp for phases up to ~2^24 turns and
/// within ~1e-6 up to 2^30 turns (double's rounding of the phase). Throws naming the shapes when
/// they do not match, and for l = 0.
at::Tensor fourier_position_features(const at::Tensor& positions, const at::Tensor& frequencies);

}  // namespace flt::kernels
