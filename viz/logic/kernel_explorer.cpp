#include "logic/kernel_explorer.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <exception>

#include "flt/attention/fourier.h"

namespace flt::viz {
namespace {

using attention::FourierPhi;

void phi_choice(int choice, FourierPhi* phi, int64_t* power) {
  switch (choice) {
    case 0: *phi = FourierPhi::kPower; *power = 2; break;
    case 1: *phi = FourierPhi::kPower; *power = 4; break;
    case 2: *phi = FourierPhi::kPower; *power = 6; break;
    case 3: *phi = FourierPhi::kAbs; *power = 1; break;
    case 4: *phi = FourierPhi::kRelu; *power = 1; break;
    default: *phi = FourierPhi::kSigmoid; *power = 1; break;
  }
}

// K(offset) / K(0) for a query at the origin, one (key 0, key offset) pair per batch entry.
// offsets: (N, D) -> (N)
at::Tensor kernel_ratio(const at::Tensor& offsets, double R, int choice) {
  FourierPhi phi;
  int64_t power;
  phi_choice(choice, &phi, &power);
  const int64_t n = offsets.size(0), d = offsets.size(1);
  const at::Tensor q = at::zeros({n, 1, 1, d}, offsets.options());
  const at::Tensor k = at::stack({at::zeros_like(offsets), offsets}, 1).unsqueeze(1);  // (N,1,2,D)
  const at::Tensor w = attention::fourier_attention_weights(
      q, k, at::full({}, R, offsets.options()), power, /*causal=*/false, phi);  // (N,1,1,2)
  // the weight of key 0 is phi(1)^D / sum > 0 for every phi offered, so the ratio is finite
  return (w.select(-1, 1) / w.select(-1, 0)).reshape({n});
}

std::vector<float> to_vector(const at::Tensor& t) {
  const at::Tensor f = t.to(at::kFloat).contiguous();
  return std::vector<float>(f.data_ptr<float>(), f.data_ptr<float>() + f.numel());
}

}  // namespace

const char* kernel_phi_label(int choice) {
  static const char* kLabels[kKernelPhiCount] = {"s^2", "s^4", "s^6", "|s|", "relu(s)", "sigmoid(s)"};
  return kLabels[std::clamp(choice, 0, kKernelPhiCount - 1)];
}

KernelCurves compute_kernel_curves(const KernelSettings& settings, int points, int grid) {
  KernelCurves out;
  try {
    const auto opts = at::TensorOptions().dtype(at::kDouble);
    const double e = settings.extent;
    const at::Tensor xs = at::linspace(-e, e, points, opts);
    out.xs = to_vector(xs);
    out.kernel_1d = to_vector(kernel_ratio(xs.unsqueeze(1), settings.R, settings.phi));
    const at::Tensor axis = at::linspace(-e, e, grid, opts);
    const at::Tensor y = axis.flip(0).view({grid, 1}).expand({grid, grid});  // top row = +extent
    const at::Tensor x = axis.view({1, grid}).expand({grid, grid});
    const at::Tensor offsets = at::stack({x.reshape({-1}), y.reshape({-1})}, 1);
    out.kernel_2d = to_vector(kernel_ratio(offsets, settings.R, settings.phi));
    out.grid = grid;
    const auto [lo, hi] = std::minmax_element(out.kernel_2d.begin(), out.kernel_2d.end());
    out.lo = *lo;
    out.hi = *hi;
  } catch (const std::exception& ex) {
    out.error = ex.what();
  }
  return out;
}

}  // namespace flt::viz
