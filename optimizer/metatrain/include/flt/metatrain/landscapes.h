#pragma once
// Standard optimisation test functions ("landscapes") as plain differentiable LibTorch functions.
//
// Used by the Optimizer Arena in flt-lab and by meta-training of the learned optimizers. Every
// function evaluates a batch of points: x: (..., n) -> (...), and is differentiable everywhere
// autograd reaches it (Ackley's sqrt is guarded at the origin so its gradient there is 0, not NaN).
// Domains and minima follow docs/design.md section 5.

#include <torch/types.h>

#include <string>
#include <vector>

namespace flt::metatrain {

/// f(x) = sum_i x_i^2; minimum 0 at 0. x: (..., n) -> (...)
torch::Tensor sphere(const torch::Tensor& x);

/// f(x) = 1/2 sum_i condition^(i / (n - 1)) x_i^2: eigenvalues spread from 1 to `condition`;
/// minimum 0 at 0. x: (..., n) -> (...)
torch::Tensor ill_conditioned_quadratic(const torch::Tensor& x, double condition = 100.0);

/// f(x) = sum_i 100 (x_{i+1} - x_i^2)^2 + (1 - x_i)^2 (n >= 2); minimum 0 at (1, ..., 1).
/// x: (..., n) -> (...)
torch::Tensor rosenbrock(const torch::Tensor& x);

/// f(x) = 10 n + sum_i x_i^2 - 10 cos(2 pi x_i); minimum 0 at 0; local minima near the integers,
/// pulled inwards (about +-0.995 for the first ring). x: (..., n) -> (...)
torch::Tensor rastrigin(const torch::Tensor& x);

/// f(x) = -20 exp(-0.2 sqrt(mean x_i^2)) - exp(mean cos(2 pi x_i)) + 20 + e; minimum 0 at 0.
/// x: (..., n) -> (...)
torch::Tensor ackley(const torch::Tensor& x);

/// Schwefel 2.26: f(x) = 418.9829 n - sum_i x_i sin(sqrt|x_i|) on [-500, 500]^n; minimum about 0
/// (1.3e-5 n) at 420.9687 (1, ..., 1), far from the next best minima. x: (..., n) -> (...)
torch::Tensor schwefel(const torch::Tensor& x);

/// Griewank: f(x) = 1 + sum_i x_i^2 / 4000 - prod_i cos(x_i / sqrt(i)) (i from 1) on
/// [-600, 600]^n; minimum 0 at 0. x: (..., n) -> (...)
torch::Tensor griewank(const torch::Tensor& x);

/// f(x, y) = (x^2 + y - 11)^2 + (x + y^2 - 7)^2 (n = 2 only); four minima of value 0.
/// x: (..., 2) -> (...)
torch::Tensor himmelblau(const torch::Tensor& x);

/// The landscapes by name, for menus, levels and task families.
enum class Landscape { kSphere, kIllConditioned, kRosenbrock, kRastrigin, kAckley, kHimmelblau };

/// Everything a caller needs to use a landscape without knowing its formula.
struct LandscapeInfo {
  std::string name;                         ///< "sphere", "rastrigin", ...
  double lower = 0.0, upper = 0.0;          ///< the usual search box [lower, upper]^n
  std::vector<std::vector<double>> minima;  ///< global minimisers (each of length n)
  double minimum = 0.0;                     ///< f at the global minimisers
};

/// Facts about `landscape` in `dims` dimensions (Himmelblau needs dims == 2, Rosenbrock dims >= 2).
LandscapeInfo landscape_info(Landscape landscape, int64_t dims);

/// Every landscape, in order of rising difficulty for a first-order optimiser.
std::vector<Landscape> all_landscapes();

/// Evaluates `landscape` at x: (..., n) -> (...).
torch::Tensor evaluate_landscape(Landscape landscape, const torch::Tensor& x);

/// A noisy version of any landscape: f(x) + noise_std * (e . x) with e ~ N(0, I) drawn from
/// `generator` (detached). E[e] = 0, so value and gradient stay unbiased while each gradient
/// carries N(0, noise_std^2 I) noise, like a mini-batch gradient. x: (..., n) -> (...)
torch::Tensor evaluate_noisy_landscape(Landscape landscape, const torch::Tensor& x,
                                       double noise_std, at::Generator generator = {});

/// Euclidean distance from x to the nearest global minimiser. x: (..., n) -> (...)
torch::Tensor distance_to_minimum(Landscape landscape, const torch::Tensor& x);

/// Rastrigin's usual search box is [-kRastriginBound, kRastriginBound]^n.
constexpr double kRastriginBound = 5.12;

// Rastrigin-like task families: one sampler serves the swarm's meta-training and comparison
// (RastriginFamily's defaults) and Mnemosyne's Rastrigin tasks (tasks.h, a family set to their own
// distribution).

/// f(x) = rastrigin(scale R (x - shift)) + noise N(0, 1) on [-5.12, 5.12]^n (the noise is drawn
/// per evaluation; `clean` leaves it out). Minimum 0 at `shift`. With a second funnel,
/// f = min(that, rastrigin(scale R (x - second_shift)) + second_offset): two bowls of local minima,
/// the second one's floor `second_offset` >= 0 higher, so a swarm that averages across them lands
/// between the two.
struct RastriginTask {
  torch::Tensor shift;     ///< (n)
  torch::Tensor rotation;  ///< (n, n) orthogonal (identity when not rotated)
  double scale = 1.0, noise = 0.0;
  torch::Tensor second_shift;  ///< (n), or undefined: one funnel
  double second_offset = 0.0;
  /// x: (..., n) -> (...), without noise.
  torch::Tensor clean(const torch::Tensor& x) const;
};

struct RastriginFamily {
  int64_t min_dims = 2, max_dims = 30;  ///< n log-uniform in [min, max]
  double max_shift = 2.5;               ///< shift ~ U(-max_shift, max_shift)^n
  double rotate_probability = 0.5;
  double min_scale = 0.6, max_scale = 1.5;          ///< log-uniform
  double noise_probability = 0.3, max_noise = 2.0;  ///< noise std ~ U(0, max) with that probability
  /// Probability of a second funnel (shift drawn as the first, offset ~ U(0, n)).
  double two_funnel_probability = 0.5;
};
/// Draws a task of dimension n from `gen`.
RastriginTask sample_rastrigin_task(const RastriginFamily& family, int64_t n, at::Generator& gen);

}  // namespace flt::metatrain
