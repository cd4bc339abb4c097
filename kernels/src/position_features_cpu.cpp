// The fused position block (position_features.h): one pass, vectorised over the frequencies.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "flt/detail/cpu_clones.h"  // FLT_CLONES: one AVX2/FMA clone and the baseline
#include "flt/kernels/position_features.h"

namespace flt::kernels {
namespace {

constexpr double kTwoPi = 6.283185307179586476925286766559;

// One row (b, h, i): the r phases in turns, in double; the nearest quarter turn q removed leaves
// |f| <= 1/8 turn, an angle a = 2 pi f with |a| <= pi / 4 where the Taylor polynomials of sin (to
// a^9, truncation < 2e-9) and cos (to a^10, < 2e-10) are below float's rounding; then
// (cos, sin)(q pi/2 + a) by the quadrant.
FLT_CLONES void position_row(const double* x, const double* xi, int64_t r, int64_t l, float* out) {
  constexpr int64_t kChunk = 64;  // frequencies per pass: the phases stay in registers / L1
  alignas(64) double turns[kChunk];
  for (int64_t t0 = 0; t0 < r; t0 += kChunk) {
    const int64_t n = std::min(kChunk, r - t0);
    // The phases first, one loop per position coordinate, so the loop below has no inner loop
    // and vectorises.
#pragma omp simd
    for (int64_t t = 0; t < n; ++t) turns[t] = x[0] * xi[(t0 + t) * l];
    for (int64_t j = 1; j < l; ++j) {
#pragma omp simd
      for (int64_t t = 0; t < n; ++t) turns[t] += x[j] * xi[(t0 + t) * l + j];
    }
#pragma omp simd
    for (int64_t t = 0; t < n; ++t) {
      const double whole = turns[t] - std::floor(turns[t]);  // [0, 1)
      // Round half up by floor, not nearbyint: independent of the thread's rounding mode.
      const double quarter = std::floor(4.0 * whole + 0.5);  // 0 .. 4 (4 is a whole turn: q = 0)
      const float a = static_cast<float>(kTwoPi * (whole - 0.25 * quarter));
      const float a2 = a * a;
      const float s =
          a + a * a2 *
                  (-1.0f / 6.0f +
                   a2 * (1.0f / 120.0f + a2 * (-1.0f / 5040.0f + a2 * (1.0f / 362880.0f))));
      const float c =
          1.0f + a2 * (-0.5f + a2 * (1.0f / 24.0f +
                                     a2 * (-1.0f / 720.0f +
                                           a2 * (1.0f / 40320.0f + a2 * (-1.0f / 3628800.0f)))));
      // cos(q pi/2 + a), sin(q pi/2 + a): q = 0 (c, s), 1 (-s, c), 2 (-c, -s), 3 (s, -c), 4 as
      // 0. quarter is 0 .. 4 for any finite phase; a NaN phase (whose angle stays NaN) reads as 0,
      // so the conversion to int is always defined.
      const int q = static_cast<int>(quarter == quarter ? quarter : 0.0) & 3;
      const float swap_c = (q & 1) ? s : c, swap_s = (q & 1) ? c : s;
      out[t0 + t] = (q == 1 || q == 2) ? -swap_c : swap_c;
      out[r + t0 + t] = (q >= 2) ? -swap_s : swap_s;
    }
  }
}

}  // namespace

at::Tensor fourier_position_features(const at::Tensor& positions, const at::Tensor& frequencies) {
  TORCH_CHECK(
      positions.dim() == 3 && frequencies.dim() == 3 && positions.size(2) == frequencies.size(2),
      "fourier_position_features: expected positions (B', L, l) and frequencies (H, r, l) "
      "with the same l, got ",
      positions.sizes(), " and ", frequencies.sizes());
  TORCH_CHECK(positions.device().is_cpu() && frequencies.device().is_cpu(),
              "fourier_position_features: CPU tensors only, got ", positions.device(), " and ",
              frequencies.device());
  TORCH_CHECK(
      at::isFloatingType(positions.scalar_type()) && at::isFloatingType(frequencies.scalar_type()),
      "fourier_position_features: floating-point positions and frequencies, got ",
      positions.scalar_type(), " and ", frequencies.scalar_type());
  TORCH_CHECK(positions.size(2) > 0, "fourier_position_features: positions of dimension l = 0 (",
              positions.sizes(), ")");
  const auto x = positions.to(at::kDouble).contiguous();
  const auto xi = frequencies.to(at::kDouble).contiguous();
  const int64_t batches = x.size(0), length = x.size(1), l = x.size(2);
  const int64_t heads = xi.size(0), r = xi.size(1);
  auto out = at::empty({batches, heads, length, 2 * r}, positions.options().dtype(at::kFloat));
  const double* xp = x.data_ptr<double>();
  const double* fp = xi.data_ptr<double>();
  float* op = out.data_ptr<float>();
  const int64_t rows = batches * heads * length;
  at::parallel_for(0, rows, 256, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t i = row % length, h = (row / length) % heads, b = row / (length * heads);
      position_row(xp + (b * length + i) * l, fp + h * r * l, r, l, op + row * 2 * r);
    }
  });
  return out;
}

}  // namespace flt::kernels
