#pragma once
// Kernel Explorer (GL-free): the FourierFormer kernel phi(s(R x)) in 1-D and
// K(x, y) = phi(s(R x)) phi(s(R y)) in 2-D, evaluated by the library's real module
// (attention::fourier_attention_weights). That function returns row-normalised weights, so each
// value is read as the ratio of the weight of key x to the weight of key 0 for a query at 0:
// K(x) / K(0) = phi(s(R x)) / phi(1) (exactly phi(s(R x)) for power, abs and ReLU, where phi(1) =
// 1).
//
// The estimators of FourierFormer Sec. 3 (library: attention::fourier_density_estimate,
// gaussian_kde, fourier_regression_estimate): the generalized Fourier density estimator and a
// Gaussian KDE on seeded samples of a correlated 2-D Gaussian next to the true density, each with
// its integrated squared error (the paper's MISE, eq. 13, for this draw); and the Fourier
// Nadaraya-Watson regression estimate of f(x) = sin(2x) from noisy samples.

#include <string>
#include <vector>

#include "logic/scenario.h"

namespace flt::kernels {
enum class FourierPhi;  // flt/kernels/fourier_attention.h
}

namespace flt::viz {

/// The phi choices the scene (and the Attention Lab's Fourier knobs) offer: power 2/4/6, |s|,
/// ReLU, sigmoid.
inline constexpr int kKernelPhiCount = 6;
const char* kernel_phi_label(int choice);
/// The library's phi and power for a choice.
void kernel_phi_choice(int choice, kernels::FourierPhi* phi, int64_t* power);

struct KernelCurves {
  std::vector<float> xs;         ///< 1-D grid in [-extent, extent]
  std::vector<float> kernel_1d;  ///< K(x) / K(0) at xs
  int grid = 0;                  ///< 2-D map is grid x grid over [-extent, extent]^2
  std::vector<float> kernel_2d;  ///< K(x, y) / K(0, 0), row-major, row = y (top = +extent)
  float lo = 0.0f, hi = 0.0f;    ///< range of kernel_2d
  std::string error;             ///< set when the library threw
};

struct KernelEstimates {
  // density: grid x grid maps over [-kDensityExtent, kDensityExtent]^2, top row = +extent
  int grid = 0;
  std::vector<float> truth, fourier, kde;
  float lo = 0.0f, hi = 0.0f;  ///< common colour range of the three maps
  double fourier_mise = 0.0, kde_mise = 0.0;
  std::vector<float> samples_xy;  ///< the 2-D samples, x0 y0 x1 y1 ...
  std::string density_error;      ///< the library's message when the estimator rejects phi
  std::string density_hint;       ///< the same in words a reader can act on (density_error_hint)
  // regression on [-kRegressionExtent, kRegressionExtent]
  std::vector<float> reg_x, reg_truth, reg_fourier;
  std::vector<float> reg_sample_x, reg_sample_y;
  double reg_mse = 0.0;  ///< mean squared error of the estimate vs f on the grid
  std::string error;     ///< set when the library threw elsewhere
  bool valid = false;
};

inline constexpr double kDensityExtent = 3.5;
inline constexpr double kRegressionExtent = 3.0;

/// The half-width of the kernel plots: 4 pi / |R| (the main lobe and three side lobes each way)
/// when the view follows R, else the extent knob.
double kernel_view_extent(const KernelSettings& settings);

/// Why the density estimator has no estimate for `phi` (a kernel_phi_label index), in words a
/// reader can act on; empty when it has one.
std::string density_error_hint(int phi);

/// The true density of the scene's correlated Gaussian N(0, [[1, rho], [rho, 1]]).
double correlated_gaussian_density(double x, double y, double rho);

/// Samples (seeded), both estimators and the regression estimate for the knobs; `grid` is the
/// density maps' side, `points` the regression curve's length.
KernelEstimates compute_kernel_estimates(const KernelSettings& settings, uint64_t seed,
                                         int grid = 64, int points = 241);

/// Evaluates both kernels for the scenario's knobs (points: 1-D samples, grid: 2-D side).
KernelCurves compute_kernel_curves(const KernelSettings& settings, int points = 241, int grid = 81);

}  // namespace flt::viz
