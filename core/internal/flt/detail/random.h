#pragma once
// Random draws the task samplers share. Each takes the caller's generator, so that a task is a
// function of its seed. Internal: not installed.

#include <ATen/ATen.h>

#include <cmath>

namespace flt::detail {

/// One draw of U(lo, hi), in double.
inline double uniform(at::Generator& gen, double lo, double hi) {
  return lo + (hi - lo) * at::rand({1}, gen, at::kDouble).item<double>();
}

/// One draw whose log is uniform in [log lo, log hi] (lo, hi > 0).
inline double log_uniform(at::Generator& gen, double lo, double hi) {
  return std::exp(uniform(gen, std::log(lo), std::log(hi)));
}

/// Orthonormal columns uniformly (Haar) distributed: the Q of a Gaussian matrix's reduced QR, with
/// the signs of R's diagonal moved into Q (Householder QR alone leaves a sign pattern, and Q is
/// then not uniform). gaussian: (n, b), b <= n, i.i.d. N(0, 1) -> (n, b)
inline at::Tensor haar_columns(const at::Tensor& gaussian) {
  const auto [q, r] = at::linalg_qr(gaussian);
  return q * at::sign(at::diagonal(r)).unsqueeze(0);
}

/// A uniformly random rotation. -> (n, n) double
inline at::Tensor haar_rotation(int64_t n, at::Generator& gen) {
  return haar_columns(at::randn({n, n}, gen, at::kDouble));
}

}  // namespace flt::detail
