#include "logic/kernel_explorer.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <stdexcept>
#include <tuple>

#include "flt/attention/fourier.h"
#include "logic/tensors.h"

namespace flt::viz {
namespace {

using attention::FourierPhi;

// K(offset) / K(0) for a query at the origin, one (key 0, key offset) pair per batch entry.
// offsets: (N, D) -> (N)
at::Tensor kernel_ratio(const at::Tensor& offsets, double R, int choice) {
  FourierPhi phi;
  int64_t power;
  kernel_phi_choice(choice, &phi, &power);
  const int64_t n = offsets.size(0), d = offsets.size(1);
  const at::Tensor q = at::zeros({n, 1, 1, d}, offsets.options());
  const at::Tensor k = at::stack({at::zeros_like(offsets), offsets}, 1).unsqueeze(1);  // (N,1,2,D)
  const at::Tensor w = attention::fourier_attention_weights(
      q, k, at::full({}, R, offsets.options()), power, /*causal=*/false, phi);  // (N,1,1,2)
  // the weight of key 0 is phi(1)^D / sum > 0 for every phi offered, so the ratio is finite
  return (w.select(-1, 1) / w.select(-1, 0)).reshape({n});
}

// The regression target of the scene (the function the estimator recovers).
at::Tensor regression_truth(const at::Tensor& x) {
  return at::sin(2.0 * x);
}

}  // namespace

double correlated_gaussian_density(double x, double y, double rho) {
  const double det = 1.0 - rho * rho;
  return std::exp(-(x * x - 2.0 * rho * x * y + y * y) / (2.0 * det)) /
         (2.0 * 3.14159265358979323846 * std::sqrt(det));
}

KernelEstimates compute_kernel_estimates(const KernelSettings& settings, uint64_t seed, int grid,
                                         int points) {
  return computed_or_error<KernelEstimates>([&](KernelEstimates& out) {
    if (!(std::abs(settings.rho) < 1.0))
      throw std::invalid_argument("the correlation rho must lie in (-1, 1), got " +
                                  std::to_string(settings.rho));
    if (settings.samples < 1)
      throw std::invalid_argument("the sample count must be >= 1, got " +
                                  std::to_string(settings.samples));
    at::NoGradGuard no_grad;
    FourierPhi phi;
    int64_t power;
    kernel_phi_choice(settings.phi, &phi, &power);
    const auto opts = at::TensorOptions().dtype(at::kDouble);
    auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    const int64_t n = settings.samples;
    // correlated Gaussian samples: z (N, 2) times the Cholesky factor of [[1, rho], [rho, 1]]
    const double rho = settings.rho;
    const at::Tensor z = at::randn({n, 2}, gen, opts);
    const at::Tensor samples = at::stack(
        {z.select(1, 0), rho * z.select(1, 0) + std::sqrt(1 - rho * rho) * z.select(1, 1)}, 1);
    out.samples_xy = to_vector(samples);
    const at::Tensor pts = map_points(kDensityExtent, grid, opts);
    const double cell = std::pow(2.0 * kDensityExtent / (grid - 1), 2);
    std::vector<double> truth(static_cast<size_t>(grid) * grid);
    const auto acc = pts.accessor<double, 2>();
    for (int64_t i = 0; i < pts.size(0); ++i)
      truth[i] = correlated_gaussian_density(acc[i][0], acc[i][1], rho);
    const at::Tensor truth_t = at::tensor(truth, opts);
    out.truth = to_vector(truth_t);
    const at::Tensor kde = attention::gaussian_kde(pts, samples, settings.bandwidth);
    out.kde = to_vector(kde);
    out.kde_mise = ((kde - truth_t).pow(2).sum() * cell).item<double>();
    float lo = 0.0f, hi = *std::max_element(out.truth.begin(), out.truth.end());
    for (float v : out.kde) hi = std::max(hi, v);
    try {
      const at::Tensor fourier =
          attention::fourier_density_estimate(pts, samples, settings.R, power, phi);
      out.fourier = to_vector(fourier);
      out.fourier_mise = ((fourier - truth_t).pow(2).sum() * cell).item<double>();
      for (float v : out.fourier) {
        lo = std::min(lo, v);  // odd powers can go negative
        hi = std::max(hi, v);
      }
    } catch (const std::exception& ex) {
      out.density_error = first_line(ex);
      out.density_hint = density_error_hint(settings.phi);
      if (out.density_hint.empty()) out.density_hint = out.density_error;
    }
    out.lo = lo;
    out.hi = hi;
    out.grid = grid;

    // regression: x uniform on the extent, y = f(x) + noise
    const double e = kRegressionExtent;
    const at::Tensor x = at::rand({n, 1}, gen, opts) * (2 * e) - e;
    const at::Tensor y = regression_truth(x) + settings.noise * at::randn({n, 1}, gen, opts);
    const at::Tensor grid_x = at::linspace(-e, e, points, opts).unsqueeze(1);
    const at::Tensor estimate =
        attention::fourier_regression_estimate(grid_x, x, y, settings.R, power, phi);
    out.reg_x = to_vector(grid_x);
    out.reg_truth = to_vector(regression_truth(grid_x));
    out.reg_fourier = to_vector(estimate);
    out.reg_sample_x = to_vector(x);
    out.reg_sample_y = to_vector(y);
    out.reg_mse = (estimate - regression_truth(grid_x)).pow(2).mean().item<double>();
    out.valid = true;
  });
}

void kernel_phi_choice(int choice, FourierPhi* phi, int64_t* power) {
  switch (choice) {
    case 0:
      *phi = FourierPhi::kPower;
      *power = 2;
      break;
    case 1:
      *phi = FourierPhi::kPower;
      *power = 4;
      break;
    case 2:
      *phi = FourierPhi::kPower;
      *power = 6;
      break;
    case 3:
      *phi = FourierPhi::kAbs;
      *power = 1;
      break;
    case 4:
      *phi = FourierPhi::kRelu;
      *power = 1;
      break;
    default:
      *phi = FourierPhi::kSigmoid;
      *power = 1;
      break;
  }
}

const char* kernel_phi_label(int choice) {
  static const char* kLabels[kKernelPhiCount] = {"s^2", "s^4",     "s^6",
                                                 "|s|", "relu(s)", "sigmoid(s)"};
  return kLabels[std::clamp(choice, 0, kKernelPhiCount - 1)];
}

double kernel_view_extent(const KernelSettings& settings) {
  if (!settings.follow_r) return settings.extent;
  const double r = std::max(std::abs(settings.R), 1e-3);
  return std::clamp(4.0 * 3.14159265358979323846 / r, 0.05, 200.0);
}

std::string density_error_hint(int phi) {
  FourierPhi kind;
  int64_t power;
  kernel_phi_choice(phi, &kind, &power);
  if (kind == FourierPhi::kPower) return {};  // s^p: A is finite for every power offered
  const char* why = kind == FourierPhi::kSigmoid ? "sigmoid(sin z / z) tends to 1/2"
                                                 : "it falls off only like 1/|z|";
  return std::string("No density estimate for phi = ") + kernel_phi_label(phi) +
         ": the estimator divides by A = integral of phi(sin z / z) dz, which is infinite here (" +
         why +
         "). Choose s^2, s^4 or s^6 for a density; the kernel and the regression work with every "
         "phi.";
}

KernelCurves compute_kernel_curves(const KernelSettings& settings, int points, int grid) {
  return computed_or_error<KernelCurves>([&](KernelCurves& out) {
    const auto opts = at::TensorOptions().dtype(at::kDouble);
    const double e = kernel_view_extent(settings);
    const at::Tensor xs = at::linspace(-e, e, points, opts);
    out.xs = to_vector(xs);
    out.kernel_1d = to_vector(kernel_ratio(xs.unsqueeze(1), settings.R, settings.phi));
    out.kernel_2d = to_vector(kernel_ratio(map_points(e, grid, opts), settings.R, settings.phi));
    out.grid = grid;
    std::tie(out.lo, out.hi) = value_range(out.kernel_2d);
  });
}

}  // namespace flt::viz
