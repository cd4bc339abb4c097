// Landscapes: values at known points, gradients by finite differences, minima, Rastrigin's ring.

#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/autograd/autograd.h>

#include "flt/metatrain/landscapes.h"
#include "test_util.h"

using flt::metatrain::Landscape;
using namespace flt::testing;

namespace {

class Landscapes : public SeededTest {};

torch::Tensor point(std::vector<double> values) {
  return torch::tensor(values, torch::kDouble);
}

}  // namespace

TEST_F(Landscapes, ValuesAtKnownPoints) {
  EXPECT_DOUBLE_EQ(flt::metatrain::sphere(point({1, 2})).item<double>(), 5.0);
  // Rastrigin at integers: x^2 - 10 cos(2 pi x) + 10 = x^2.
  EXPECT_NEAR(flt::metatrain::rastrigin(point({1, -2})).item<double>(), 5.0, 1e-12);
  EXPECT_NEAR(flt::metatrain::rosenbrock(point({0, 0})).item<double>(), 1.0, 1e-12);
  EXPECT_NEAR(flt::metatrain::himmelblau(point({0, 0})).item<double>(), 170.0, 1e-12);
  // eigenvalues 1 and 100: 0.5 (1 * 1 + 100 * 1)
  EXPECT_NEAR(flt::metatrain::ill_conditioned_quadratic(point({1, 1})).item<double>(), 50.5, 1e-12);
  // Ackley at (1, 1): -20 exp(-0.2) - exp(1) + 20 + e = 20 (1 - exp(-0.2))
  EXPECT_NEAR(flt::metatrain::ackley(point({1, 1})).item<double>(), 20.0 * (1.0 - std::exp(-0.2)),
              1e-12);
}

TEST_F(Landscapes, BatchedShapes) {
  auto x = torch::randn({3, 4, 2}, torch::kDouble);
  for (auto landscape : flt::metatrain::all_landscapes()) {
    auto f = flt::metatrain::evaluate_landscape(landscape, x);
    EXPECT_EQ(f.sizes(), (std::vector<int64_t>{3, 4}));
    // batched evaluation equals pointwise evaluation
    EXPECT_NEAR(f[1][2].item<double>(),
                flt::metatrain::evaluate_landscape(landscape, x[1][2]).item<double>(), 1e-12);
  }
}

TEST_F(Landscapes, MinimaAreZeroWithZeroGradient) {
  for (auto landscape : flt::metatrain::all_landscapes()) {
    const auto info = flt::metatrain::landscape_info(landscape, 2);
    for (const auto& minimiser : info.minima) {
      auto x = point(minimiser).requires_grad_(true);
      auto f = flt::metatrain::evaluate_landscape(landscape, x);
      f.backward();
      // Himmelblau's minimisers are given to 6 decimals, so allow that much slack there.
      const double tol = landscape == Landscape::kHimmelblau ? 1e-4 : 1e-12;
      EXPECT_NEAR(f.item<double>(), info.minimum, tol) << info.name;
      EXPECT_TRUE(x.grad().isfinite().all().item<bool>()) << info.name;
      EXPECT_LT(x.grad().abs().max().item<double>(),
                landscape == Landscape::kHimmelblau ? 1e-3 : 1e-9)
          << info.name;
    }
  }
}

TEST_F(Landscapes, GradientsMatchFiniteDifferences) {
  for (auto landscape : flt::metatrain::all_landscapes()) {
    auto x = (torch::rand({5, 2}, torch::kDouble) * 4 - 2).requires_grad_(true);
    flt::testing::expect_gradients_match(
        [landscape](const std::vector<torch::Tensor>& in) {
          return flt::metatrain::evaluate_landscape(landscape, in[0]);
        },
        {x});
  }
}

TEST_F(Landscapes, RastriginLocalMinimaSitInsideTheIntegers) {
  // Minimise 1-D Rastrigin from 1.0 with plain gradient descent: it settles near 0.995, not 1.
  auto x = torch::full({1}, 1.0, torch::kDouble).requires_grad_(true);
  for (int i = 0; i < 200; ++i) {
    auto f = flt::metatrain::rastrigin(x);
    auto g = torch::autograd::grad({f}, {x})[0];
    x = (x - 1e-3 * g).detach().requires_grad_(true);
  }
  EXPECT_NEAR(x.item<double>(), 0.99496, 1e-4);
}

TEST_F(Landscapes, NoisyVariantIsUnbiasedAndSeeded) {
  auto x = point({0.5, -0.25});
  auto g1 = at::make_generator<at::CPUGeneratorImpl>(7);
  auto g2 = at::make_generator<at::CPUGeneratorImpl>(7);
  auto a = flt::metatrain::evaluate_noisy_landscape(Landscape::kSphere, x, 0.3, g1);
  auto b = flt::metatrain::evaluate_noisy_landscape(Landscape::kSphere, x, 0.3, g2);
  EXPECT_EQ(a.item<double>(), b.item<double>());
  // Mean of many noisy values approaches the clean value (std of the mean 0.3 * |x| / sqrt(4000)).
  auto many = x.expand({4000, 2}).contiguous();
  auto noisy = flt::metatrain::evaluate_noisy_landscape(Landscape::kSphere, many, 0.3, g1);
  EXPECT_NEAR(noisy.mean().item<double>(), 0.3125, 5 * 0.3 * std::sqrt(0.3125) / std::sqrt(4000.0));
  EXPECT_NE(noisy[0].item<double>(), noisy[1].item<double>());
}

TEST_F(Landscapes, DistanceToNearestMinimum) {
  EXPECT_NEAR(
      flt::metatrain::distance_to_minimum(Landscape::kRosenbrock, point({1, 0})).item<double>(),
      1.0, 1e-12);
  EXPECT_NEAR(
      flt::metatrain::distance_to_minimum(Landscape::kHimmelblau, point({3, 2.5})).item<double>(),
      0.5, 1e-12);
}

TEST_F(Landscapes, BadInputNamesTheProblem) {
  flt::testing::expect_error([] { flt::metatrain::himmelblau(torch::zeros({3}, torch::kDouble)); },
                             {"himmelblau", "n = 3"});
  flt::testing::expect_error([] { flt::metatrain::rosenbrock(torch::zeros({1}, torch::kDouble)); },
                             {"rosenbrock", "n = 1"});
  flt::testing::expect_error(
      [] { flt::metatrain::ill_conditioned_quadratic(torch::zeros({2}), 0.5); },
      {"condition", "0.5"});
}
