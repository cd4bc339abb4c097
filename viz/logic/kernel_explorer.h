#pragma once
// Kernel Explorer (GL-free): the FourierFormer kernel phi(s(R x)) in 1-D and
// K(x, y) = phi(s(R x)) phi(s(R y)) in 2-D, evaluated by the library's real module
// (attention::fourier_attention_weights). That function returns row-normalised weights, so each
// value is read as the ratio of the weight of key x to the weight of key 0 for a query at 0:
// K(x) / K(0) = phi(s(R x)) / phi(1) (exactly phi(s(R x)) for power, abs and ReLU, where phi(1) = 1).

#include <string>
#include <vector>

#include "logic/scenario.h"

namespace flt::viz {

/// The phi choices the scene offers (power 2/4/6, |s|, ReLU, sigmoid).
inline constexpr int kKernelPhiCount = 6;
const char* kernel_phi_label(int choice);

struct KernelCurves {
  std::vector<float> xs;        ///< 1-D grid in [-extent, extent]
  std::vector<float> kernel_1d; ///< K(x) / K(0) at xs
  int grid = 0;                 ///< 2-D map is grid x grid over [-extent, extent]^2
  std::vector<float> kernel_2d; ///< K(x, y) / K(0, 0), row-major, row = y (top = +extent)
  float lo = 0.0f, hi = 0.0f;   ///< range of kernel_2d
  std::string error;            ///< set when the library threw
};

/// Evaluates both kernels for the scenario's knobs (points: 1-D samples, grid: 2-D side).
KernelCurves compute_kernel_curves(const KernelSettings& settings, int points = 241, int grid = 81);

}  // namespace flt::viz
