#include "flt/metatrain/landscapes.h"

#include <c10/util/Exception.h>

#include <cmath>

#include "flt/detail/random.h"

namespace flt::metatrain {

namespace {

using flt::detail::haar_rotation;
using flt::detail::log_uniform;
using flt::detail::uniform;

constexpr double kPi = 3.14159265358979323846;

void check_points(const char* fn, const torch::Tensor& x, int64_t min_dims) {
  TORCH_CHECK(x.defined() && x.dim() >= 1, fn,
              ": x must have shape (..., n), got an undefined or 0-d tensor");
  TORCH_CHECK(x.is_floating_point(), fn, ": x must be floating point, got ", x.scalar_type());
  TORCH_CHECK(x.size(-1) >= min_dims, fn, ": needs n >= ", min_dims,
              " coordinates, got n = ", x.size(-1));
}

}  // namespace

torch::Tensor sphere(const torch::Tensor& x) {
  check_points("sphere", x, 1);
  return x.pow(2).sum(-1);
}

torch::Tensor ill_conditioned_quadratic(const torch::Tensor& x, double condition) {
  check_points("ill_conditioned_quadratic", x, 1);
  TORCH_CHECK(condition >= 1.0, "ill_conditioned_quadratic: condition must be >= 1, got ",
              condition);
  const int64_t n = x.size(-1);
  // Eigenvalues condition^(i / (n - 1)), i = 0..n-1: geometric spread from 1 to `condition`.
  auto exponents = n > 1 ? torch::arange(n, x.options()) / static_cast<double>(n - 1)
                         : torch::zeros({1}, x.options());
  auto eigenvalues = torch::pow(torch::full({n}, condition, x.options()), exponents);
  return 0.5 * (eigenvalues * x.pow(2)).sum(-1);
}

torch::Tensor rosenbrock(const torch::Tensor& x) {
  check_points("rosenbrock", x, 2);
  const int64_t n = x.size(-1);
  auto head = x.narrow(-1, 0, n - 1);
  auto tail = x.narrow(-1, 1, n - 1);
  return (100.0 * (tail - head.pow(2)).pow(2) + (1.0 - head).pow(2)).sum(-1);
}

torch::Tensor rastrigin(const torch::Tensor& x) {
  check_points("rastrigin", x, 1);
  const double n = static_cast<double>(x.size(-1));
  return 10.0 * n + (x.pow(2) - 10.0 * torch::cos(2.0 * kPi * x)).sum(-1);
}

torch::Tensor ackley(const torch::Tensor& x) {
  check_points("ackley", x, 1);
  auto mean_square = x.pow(2).mean(-1);
  // sqrt has an infinite derivative at 0; evaluate it only where mean_square > 0 (the `where` on
  // the input keeps the unused branch's gradient finite), so the gradient at the minimum is 0, not
  // NaN.
  auto positive = mean_square > 0;
  auto safe = torch::where(positive, mean_square, torch::ones_like(mean_square));
  auto radius = torch::where(positive, torch::sqrt(safe), torch::zeros_like(mean_square));
  return -20.0 * torch::exp(-0.2 * radius) - torch::exp(torch::cos(2.0 * kPi * x).mean(-1)) + 20.0 +
         std::exp(1.0);
}

torch::Tensor schwefel(const torch::Tensor& x) {
  check_points("schwefel", x, 1);
  const double n = static_cast<double>(x.size(-1));
  return 418.9828872724338 * n - (x * torch::sin(torch::sqrt(x.abs()))).sum(-1);
}

torch::Tensor griewank(const torch::Tensor& x) {
  check_points("griewank", x, 1);
  const auto index = torch::arange(1, x.size(-1) + 1, x.options());
  return 1.0 + x.pow(2).sum(-1) / 4000.0 - torch::cos(x / index.sqrt()).prod(-1);
}

torch::Tensor himmelblau(const torch::Tensor& x) {
  check_points("himmelblau", x, 2);
  TORCH_CHECK(x.size(-1) == 2, "himmelblau: defined for n = 2 only, got n = ", x.size(-1));
  auto a = x.select(-1, 0);
  auto b = x.select(-1, 1);
  return (a.pow(2) + b - 11.0).pow(2) + (a + b.pow(2) - 7.0).pow(2);
}

std::vector<Landscape> all_landscapes() {
  return {Landscape::kSphere,     Landscape::kIllConditioned, Landscape::kRosenbrock,
          Landscape::kHimmelblau, Landscape::kRastrigin,      Landscape::kAckley};
}

LandscapeInfo landscape_info(Landscape landscape, int64_t dims) {
  TORCH_CHECK(dims >= 1, "landscape_info: dims must be >= 1, got ", dims);
  const std::vector<double> zeros(static_cast<size_t>(dims), 0.0);
  switch (landscape) {
    case Landscape::kSphere: return {"sphere", -5.12, 5.12, {zeros}, 0.0};
    case Landscape::kIllConditioned:
      return {"ill-conditioned quadratic", -5.12, 5.12, {zeros}, 0.0};
    case Landscape::kRosenbrock:
      TORCH_CHECK(dims >= 2, "landscape_info: rosenbrock needs dims >= 2, got ", dims);
      return {
          "rosenbrock", -2.048, 2.048, {std::vector<double>(static_cast<size_t>(dims), 1.0)}, 0.0};
    case Landscape::kRastrigin: return {"rastrigin", -5.12, 5.12, {zeros}, 0.0};
    case Landscape::kAckley: return {"ackley", -32.768, 32.768, {zeros}, 0.0};
    case Landscape::kHimmelblau:
      TORCH_CHECK(dims == 2, "landscape_info: himmelblau needs dims == 2, got ", dims);
      // The four minimisers (3, 2) and three irrational ones, to 6 decimals.
      return {"himmelblau",
              -5.0,
              5.0,
              {{3.0, 2.0}, {-2.805118, 3.131312}, {-3.779310, -3.283186}, {3.584428, -1.848126}},
              0.0};
  }
  TORCH_CHECK(false, "landscape_info: unknown landscape ", static_cast<int>(landscape));
}

torch::Tensor evaluate_landscape(Landscape landscape, const torch::Tensor& x) {
  switch (landscape) {
    case Landscape::kSphere: return sphere(x);
    case Landscape::kIllConditioned: return ill_conditioned_quadratic(x);
    case Landscape::kRosenbrock: return rosenbrock(x);
    case Landscape::kRastrigin: return rastrigin(x);
    case Landscape::kAckley: return ackley(x);
    case Landscape::kHimmelblau: return himmelblau(x);
  }
  TORCH_CHECK(false, "evaluate_landscape: unknown landscape ", static_cast<int>(landscape));
}

torch::Tensor evaluate_noisy_landscape(Landscape landscape, const torch::Tensor& x,
                                       double noise_std, at::Generator generator) {
  TORCH_CHECK(noise_std >= 0.0 && std::isfinite(noise_std),
              "evaluate_noisy_landscape: noise_std must be finite and >= 0, got ", noise_std);
  auto value = evaluate_landscape(landscape, x);
  if (noise_std == 0.0) return value;
  auto direction = at::normal(0.0, 1.0, x.sizes(), generator, x.options().requires_grad(false));
  return value + noise_std * (direction * x).sum(-1);
}

torch::Tensor distance_to_minimum(Landscape landscape, const torch::Tensor& x) {
  TORCH_CHECK(x.defined() && x.dim() >= 1, "distance_to_minimum: x must have shape (..., n)");
  const auto info = landscape_info(landscape, x.size(-1));
  torch::Tensor best;
  for (const auto& minimiser : info.minima) {
    auto m = torch::tensor(minimiser, x.options().requires_grad(false));
    auto d = (x - m).pow(2).sum(-1).sqrt();
    best = best.defined() ? torch::minimum(best, d) : d;
  }
  return best;
}

torch::Tensor RastriginTask::clean(const torch::Tensor& x) const {
  const auto first = rastrigin(torch::matmul(x - shift, rotation.t()) * scale);
  if (!second_shift.defined()) return first;
  return torch::minimum(
      first, rastrigin(torch::matmul(x - second_shift, rotation.t()) * scale) + second_offset);
}

RastriginTask sample_rastrigin_task(const RastriginFamily& family, int64_t n, at::Generator& gen) {
  RastriginTask task;
  task.shift = (at::rand({n}, gen, torch::kDouble) * 2.0 - 1.0) * family.max_shift;
  task.rotation = torch::eye(n, torch::kDouble);
  if (uniform(gen, 0, 1) < family.rotate_probability) task.rotation = haar_rotation(n, gen);
  task.scale = log_uniform(gen, family.min_scale, family.max_scale);
  task.noise =
      uniform(gen, 0, 1) < family.noise_probability ? uniform(gen, 0, family.max_noise) : 0.0;
  // Drawn last and only when possible, so families without second funnels draw as before.
  if (family.two_funnel_probability > 0 && uniform(gen, 0, 1) < family.two_funnel_probability) {
    task.second_shift = (at::rand({n}, gen, torch::kDouble) * 2.0 - 1.0) * family.max_shift;
    task.second_offset = uniform(gen, 0, static_cast<double>(n));
  }
  return task;
}

}  // namespace flt::metatrain
