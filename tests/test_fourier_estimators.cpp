// The estimators behind Fourier attention (FourierFormer Sec. 3): the normaliser A in closed form
// vs quadrature, the generalized Fourier density estimator vs a double loop and a hand-computed
// value, its integral, its convergence (MISE) on a correlated Gaussian, the Gaussian KDE, the
// regression estimator vs a Nadaraya-Watson double loop, and input validation.
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <limits>
#include <vector>

#include "flt/attention/fourier.h"
#include "test_util.h"

namespace fa = flt::attention;
using fa::FourierPhi;
using namespace flt::testing;

namespace {

constexpr double kPi = 3.14159265358979323846;

class FourierEstimators : public flt::testing::SeededTest {};

double sinc(double x) {
  return x == 0.0 ? 1.0 : std::sin(x) / x;
}

// prod_d phi(s(R (x_d - k_d))) by hand, for phi = s^p.
double kernel_by_hand(const double* x, const double* k, int64_t d, double R, int64_t p) {
  double product = 1.0;
  for (int64_t j = 0; j < d; ++j) product *= std::pow(sinc(R * (x[j] - k[j])), p);
  return product;
}

// N(x; 0, [[1, rho], [rho, 1]]) on the rows of points (P, 2), in double.
torch::Tensor correlated_gaussian_density(const torch::Tensor& points, double rho) {
  const auto x = points.select(1, 0), y = points.select(1, 1);
  const double det = 1.0 - rho * rho;
  return torch::exp(-(x * x - 2 * rho * x * y + y * y) / (2 * det)) / (2 * kPi * std::sqrt(det));
}

torch::Tensor correlated_gaussian_samples(int64_t n, double rho, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const auto z = at::randn({n, 2}, gen, torch::kDouble);
  const auto cholesky =
      torch::tensor({{1.0, 0.0}, {rho, std::sqrt(1 - rho * rho)}}, torch::kDouble);
  return torch::matmul(z, cholesky.t());
}

// A square grid over [-e, e]^2: points (g*g, 2) and the cell area.
torch::Tensor grid_points(double e, int64_t g, double* cell) {
  const auto axis = torch::linspace(-e, e, g, torch::kDouble);
  const auto mesh = torch::meshgrid({axis, axis}, "ij");
  *cell = std::pow(2 * e / (g - 1), 2);
  return torch::stack({mesh[0].reshape(-1), mesh[1].reshape(-1)}, 1);
}

}  // namespace

TEST_F(FourierEstimators, KernelIntegral_ClosedFormsAndQuadrature) {
  // Known values: integral of sinc = integral of sinc^2 = pi, sinc^4 = 2 pi / 3, sinc^6 = 11 pi
  // / 20.
  EXPECT_NEAR(fa::fourier_kernel_integral(1), kPi, 1e-13);
  EXPECT_NEAR(fa::fourier_kernel_integral(2), kPi, 1e-13);
  EXPECT_NEAR(fa::fourier_kernel_integral(3), 3 * kPi / 4, 1e-13);
  EXPECT_NEAR(fa::fourier_kernel_integral(4), 2 * kPi / 3, 1e-13);
  EXPECT_NEAR(fa::fourier_kernel_integral(6), 11 * kPi / 20, 1e-13);
  EXPECT_EQ(fa::fourier_kernel_integral(4, FourierPhi::kAbs), fa::fourier_kernel_integral(4));
  // Simpson quadrature on [-Z, Z] for larger powers (tails below Z^{1-p} / (p-1) are negligible).
  for (int64_t p : {5, 8, 16, 32}) {
    const double Z = 400.0;
    const int64_t steps = 400000;
    const double h = 2 * Z / steps;
    double sum = 0.0;
    for (int64_t i = 0; i <= steps; ++i) {
      const double w = (i == 0 || i == steps) ? 1 : (i % 2 == 1 ? 4 : 2);
      sum += w * std::pow(sinc(-Z + i * h), p);
    }
    EXPECT_NEAR(fa::fourier_kernel_integral(p), sum * h / 3, 1e-9) << "p = " << p;
  }
}

TEST_F(FourierEstimators, Density_MatchesDoubleLoop) {
  for (int64_t d : {1, 2, 3}) {
    for (int64_t p : {1, 2, 3, 4}) {
      const double R = 1.7;
      const auto samples = torch::randn({23, d}, torch::kDouble);
      const auto points = torch::randn({11, d}, torch::kDouble) * 1.5;
      const auto got = fa::fourier_density_estimate(points, samples, R, p);
      const double A = fa::fourier_kernel_integral(p);
      auto want = torch::zeros({11}, torch::kDouble);
      for (int64_t i = 0; i < 11; ++i) {
        double sum = 0.0;
        for (int64_t j = 0; j < 23; ++j)
          sum +=
              kernel_by_hand(points[i].data_ptr<double>(), samples[j].data_ptr<double>(), d, R, p);
        want[i] = sum * std::pow(R / A, d) / 23;
      }
      // atol: odd powers give signed sums that can cancel to ~0
      EXPECT_TRUE(all_close(got, want, 1e-10, 1e-14)) << "D = " << d << " p = " << p;
    }
  }
}

TEST_F(FourierEstimators, Density_TwoSamplesByHand) {
  // samples 0 and 1, x = 0.5, R = 2, phi = s^2, D = 1:
  // p = R / (2 A) * 2 s(1)^2 = (2 / pi) sin(1)^2, with A = pi.
  const auto samples = torch::tensor({{0.0}, {1.0}}, torch::kDouble);
  const auto x = torch::tensor({{0.5}}, torch::kDouble);
  const double got = fa::fourier_density_estimate(x, samples, 2.0, 2).item<double>();
  EXPECT_NEAR(got, 2.0 / kPi * std::pow(std::sin(1.0), 2), 1e-15);
  // float agrees with double
  const double got_float =
      fa::fourier_density_estimate(x.to(torch::kFloat), samples.to(torch::kFloat), 2.0, 2)
          .item<double>();
  EXPECT_NEAR(got_float, got, 1e-6);
}

TEST_F(FourierEstimators, Density_IntegratesToOne) {
  const auto samples = torch::tensor({{0.3}, {-1.1}, {2.0}}, torch::kDouble);
  // 1-D, phi = identity (the plain Fourier integral estimator), s^2 and s^4, R = 1.5, trapezoid
  // on [-L, L] with spacing 0.02. Far out the density is sin(R x)^p / (pi R^(p-1) x^p) (A = pi for
  // p = 1, 2), so the truncated integral misses: p = 1, an oscillating tail of at most
  // 2 / (pi R L) = 0.0053; p = 2, the mass 1 / (pi R L) = 0.00265 (checked as such); p = 4, < 1e-6.
  const double R = 1.5, L = 80.0;
  const auto x = torch::linspace(-L, L, 8001, torch::kDouble).unsqueeze(1);
  const auto integral = [&](int64_t p) {
    return torch::trapezoid(fa::fourier_density_estimate(x, samples, R, p), 0.02).item<double>();
  };
  EXPECT_NEAR(integral(1), 1.0, 2 / (kPi * R * L));
  EXPECT_NEAR(integral(2), 1.0 - 1 / (kPi * R * L), 2e-4);
  EXPECT_NEAR(integral(4), 1.0, 1e-5);
  // 2-D, s^4: the grid on [-12, 12]^2 holds all but a ~1e-4 tail.
  double cell = 0.0;
  const auto points = grid_points(12.0, 241, &cell);
  const auto samples_2d = torch::tensor({{0.0, 0.5}, {1.0, -1.0}}, torch::kDouble);
  const double integral_2d =
      (fa::fourier_density_estimate(points, samples_2d, 2.0, 4).sum() * cell).item<double>();
  EXPECT_NEAR(integral_2d, 1.0, 2e-3);
}

TEST_F(FourierEstimators, Density_MiseDecreasesWithSampleCount) {
  // Correlated 2-D Gaussian (rho = 0.7), phi = s^4, R = N^(1/4) (Theorem 1: R ~ N^(1/(D+2))
  // balances bias and variance; at a fixed R the bias floor stops the decrease near N = 400). Each
  // N is averaged over 3 seeded draws. Measured: 0.022, 0.0084, 0.0067, 0.0031.
  double cell = 0.0;
  const auto points = grid_points(5.0, 51, &cell);
  const auto truth = correlated_gaussian_density(points, 0.7);
  std::vector<double> mise;
  for (int64_t n : {25, 100, 400, 1600}) {
    double total = 0.0;
    for (uint64_t seed : {1, 2, 3}) {
      const auto samples = correlated_gaussian_samples(n, 0.7, seed * 7919 + n);
      const auto estimate =
          fa::fourier_density_estimate(points, samples, std::pow(double(n), 0.25), 4);
      total += ((estimate - truth).pow(2).sum() * cell).item<double>();
    }
    mise.push_back(total / 3);
  }
  for (size_t i = 1; i < mise.size(); ++i) {
    EXPECT_LT(mise[i], mise[i - 1]) << "N step " << i;
  }
  EXPECT_LT(mise.back(), 0.25 * mise.front());
}

TEST_F(FourierEstimators, GaussianKde_MatchesFormulaAndIntegratesToOne) {
  const auto samples = torch::randn({17, 2}, torch::kDouble);
  const auto points = torch::randn({9, 2}, torch::kDouble) * 2;
  const double h = 0.4;
  const auto got = fa::gaussian_kde(points, samples, h);
  auto want = torch::zeros({9}, torch::kDouble);
  for (int64_t i = 0; i < 9; ++i) {
    double sum = 0.0;
    for (int64_t j = 0; j < 17; ++j) {
      const double dx = points[i][0].item<double>() - samples[j][0].item<double>();
      const double dy = points[i][1].item<double>() - samples[j][1].item<double>();
      sum += std::exp(-(dx * dx + dy * dy) / (2 * h * h)) / (2 * kPi * h * h);
    }
    want[i] = sum / 17;
  }
  EXPECT_TRUE(all_close(got, want, 1e-12, 0));
  double cell = 0.0;
  const auto grid = grid_points(8.0, 161, &cell);
  EXPECT_NEAR((fa::gaussian_kde(grid, samples, h).sum() * cell).item<double>(), 1.0, 1e-3);
  // far from every sample: tiny but finite, no NaN
  const auto far = fa::gaussian_kde(torch::tensor({{40.0, 40.0}}, torch::kDouble), samples, h);
  EXPECT_TRUE(far.isfinite().all().item<bool>());
  EXPECT_GE(far.item<double>(), 0.0);
}

TEST_F(FourierEstimators, Regression_IsNadarayaWatsonWithTheFourierKernel) {
  const auto samples = torch::rand({31, 1}, torch::kDouble) * 6 - 3;
  const auto targets = torch::sin(samples * 2) + 0.1 * torch::randn({31, 1}, torch::kDouble);
  const auto points = torch::linspace(-3, 3, 13, torch::kDouble).unsqueeze(1);
  const double R = 2.5;
  const auto got = fa::fourier_regression_estimate(points, samples, targets, R, 4);
  auto want = torch::zeros({13, 1}, torch::kDouble);
  for (int64_t i = 0; i < 13; ++i) {
    double num = 0.0, den = 0.0;
    for (int64_t j = 0; j < 31; ++j) {
      const double w =
          kernel_by_hand(points[i].data_ptr<double>(), samples[j].data_ptr<double>(), 1, R, 4);
      num += w * targets[j][0].item<double>();
      den += w;
    }
    want[i][0] = num / den;
  }
  EXPECT_TRUE(all_close(got, want, 1e-10, 1e-13));
  // constant targets are reproduced exactly
  const auto constant = torch::full({31, 2}, 0.75, torch::kDouble);
  EXPECT_TRUE(all_close(fa::fourier_regression_estimate(points, samples, constant, R, 4),
                        torch::full({13, 2}, 0.75, torch::kDouble), 1e-12, 0));
}

TEST_F(FourierEstimators, Regression_ConvergesToTheFunction) {
  // MSE on a grid of the estimate of f(x) = sin(2x) from noisy samples (sigma 0.3) falls with N,
  // with R = 2 N^(1/5) (Theorem 2's rate for D = 1, m = 1). Measured: 0.043, 0.0026, 0.0009.
  const auto points = torch::linspace(-2.5, 2.5, 101, torch::kDouble).unsqueeze(1);
  const auto truth = torch::sin(points * 2);
  std::vector<double> mse;
  for (int64_t n : {30, 300, 3000}) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(100 + n);
    const auto x = at::rand({n, 1}, gen, torch::kDouble) * 6 - 3;
    const auto y = torch::sin(x * 2) + 0.3 * at::randn({n, 1}, gen, torch::kDouble);
    const double R = 2 * std::pow(double(n), 0.2);
    mse.push_back(
        (fa::fourier_regression_estimate(points, x, y, R, 4) - truth).pow(2).mean().item<double>());
  }
  EXPECT_LT(mse[1], mse[0]);
  EXPECT_LT(mse[2], mse[1]);
  EXPECT_LT(mse[2], 0.002);
}

TEST_F(FourierEstimators, InputValidationNamesTheBadValue) {
  const auto s = torch::randn({5, 2}, torch::kDouble);
  const auto x = torch::randn({3, 2}, torch::kDouble);
  expect_error([&] { fa::fourier_density_estimate(x, s, -1.0); },
               {"fourier_density_estimate", "R must be positive", "-1"});
  expect_error([&] { fa::fourier_density_estimate(x, s, std::nan("")); }, {"R must be", "nan"});
  expect_error(
      [&] {
        fa::fourier_density_estimate(x, torch::randn({5, 3}, torch::kDouble), 1.0);
      },
      {"samples have D = 3", "points have D = 2"});
  expect_error(
      [&] {
        fa::fourier_density_estimate(x, torch::randn({0, 2}, torch::kDouble), 1.0);
      },
      {"at least one sample"});
  expect_error([&] { fa::fourier_density_estimate(x.view(-1), s, 1.0); },
               {"points must be (P, D)"});
  expect_error([&] { fa::fourier_density_estimate(x, s, 1.0, 1, FourierPhi::kRelu); },
               {"phi relu", "power 1", "infinite"});
  expect_error([&] { fa::fourier_density_estimate(x, s, 1.0, 3, FourierPhi::kAbs); },
               {"phi abs", "power 3", "not known in closed form"});
  expect_error([&] { fa::fourier_kernel_integral(40); }, {"power must be in [1, 32]", "40"});
  expect_error([&] { fa::gaussian_kde(x, s, 0.0); }, {"gaussian_kde", "bandwidth", "0"});
  expect_error([&] { fa::gaussian_kde(x, s.to(torch::kFloat), 1.0); }, {"share a floating dtype"});
  expect_error(
      [&] {
        fa::fourier_regression_estimate(x, s, torch::randn({4, 1}, torch::kDouble), 1.0);
      },
      {"targets must be (N, Dv) with N = 5", "[4, 1]"});
}
