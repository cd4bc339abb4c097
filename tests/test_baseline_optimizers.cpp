// The harness's baselines, Prodigy and Schedule-Free AdamW: each against a double-precision
// reference of its paper's equations written plainly here, the invariants the papers state and
// the torch::optim contract (after LibTorch's own optimizer tests). Their wiring into the harness's
// loops: test_baseline_optimizers_harness.cpp.
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>
#include <torch/serialize.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "flt/harness/baseline_optimizers.h"
#include "harness_test_util.h"

namespace fh = flt::harness;
using namespace flt::testing;
using torch::optim::OptimizerParamGroup;

namespace {

/// f = sum_i (p_i - c_i)^T A_i (p_i - c_i) / 2 over tensors p_i of several sizes, A_i symmetric
/// positive definite (eigenvalues from 0.5 up): gradient A_i (p_i - c_i).
struct Quadratic {
  std::vector<torch::Tensor> a, c;  // (n, n) and (n), double

  explicit Quadratic(const std::vector<int64_t>& sizes) {
    for (int64_t n : sizes) {
      const auto q = torch::randn({n, n}, torch::kDouble);
      a.push_back(q.matmul(q.t()) / static_cast<double>(n) + 0.5 * torch::eye(n, torch::kDouble));
      c.push_back(torch::randn({n}, torch::kDouble));
    }
  }
  /// The gradient of tensor i at p (n), in p's dtype.
  torch::Tensor gradient(size_t i, const torch::Tensor& p) const {
    return a[i].matmul(p.detach().to(torch::kDouble) - c[i]).to(p.scalar_type());
  }
  void set_gradients(const std::vector<torch::Tensor>& params) const {
    for (size_t i = 0; i < params.size(); ++i) params[i].mutable_grad() = gradient(i, params[i]);
  }
  /// f at the parameters, differentiable (for closures).
  torch::Tensor loss(const std::vector<torch::Tensor>& params) const {
    auto total = torch::zeros({}, params[0].options());
    for (size_t i = 0; i < params.size(); ++i) {
      const auto e = params[i] - c[i].to(params[i].scalar_type());
      total = total + 0.5 * (e * a[i].to(params[i].scalar_type()).matmul(e)).sum();
    }
    return total;
  }
  /// Random starting points, one leaf per tensor.
  std::vector<torch::Tensor> start(torch::Dtype dtype = torch::kFloat) const {
    std::vector<torch::Tensor> params;
    for (const auto& center : c) {
      params.push_back(torch::randn(center.sizes(), dtype).requires_grad_(true));
    }
    return params;
  }
};

std::vector<torch::Tensor> as_double(const std::vector<torch::Tensor>& params) {
  std::vector<torch::Tensor> out;
  for (const auto& p : params) {
    out.push_back(p.detach().to(torch::kDouble, /*non_blocking=*/false, /*copy=*/true));
  }
  return out;
}

/// Two groups over four tensors: {0, 1} with `first`, {2, 3} with `second`.
template <typename Options>
std::vector<OptimizerParamGroup> two_groups(const std::vector<torch::Tensor>& p,
                                            const Options& first, const Options& second) {
  std::vector<OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<torch::Tensor>{p[0], p[1]}, std::make_unique<Options>(first));
  groups.emplace_back(std::vector<torch::Tensor>{p[2], p[3]}, std::make_unique<Options>(second));
  return groups;
}
constexpr int kGroupOf[] = {0, 0, 1, 1};

// ---- the references: the papers' equations, plainly, in double --------------------------------

/// Prodigy, Adam version (Mishchenko & Defazio 2023, Sec. 5), one estimate d for every tensor.
struct ProdigyReference {
  std::vector<torch::Tensor> x, x0, m, v, s;
  double d = 0.0, r = 0.0;
  int64_t k = 0;

  ProdigyReference(std::vector<torch::Tensor> start, double d0) : x(start), x0(start), d(d0) {
    for (const auto& xi : x) {
      m.push_back(torch::zeros_like(xi));
      v.push_back(torch::zeros_like(xi));
      s.push_back(torch::zeros_like(xi));
    }
  }
  void step(const Quadratic& f, const std::vector<fh::ProdigyOptions>& group_options) {
    k += 1;
    const double beta3 =
        group_options[0].beta3().value_or(std::sqrt(std::get<1>(group_options[0].betas())));
    r *= beta3;
    double s_norm = 0.0;
    for (size_t i = 0; i < x.size(); ++i) {
      const auto& o = group_options[kGroupOf[i]];
      const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas());
      double lr = o.lr();
      if (o.use_bias_correction()) {
        lr *= std::sqrt(1.0 - std::pow(beta2, k)) / (1.0 - std::pow(beta1, k));
      }
      const auto g = f.gradient(i, x[i]);
      r += (1.0 - beta3) * lr * d * d * (g * (x0[i] - x[i])).sum().item<double>();
      m[i] = beta1 * m[i] + (1.0 - beta1) * d * g;
      v[i] = beta2 * v[i] + (1.0 - beta2) * d * d * g * g;
      s[i] = beta3 * s[i] + (1.0 - beta3) * (o.safeguard_warmup() ? 1.0 : lr) * d * d * g;
      s_norm += s[i].abs().sum().item<double>();
      x[i] = x[i] - lr * d * o.weight_decay() * x[i] - lr * d * m[i] / (v[i].sqrt() + d * o.eps());
    }
    if (s_norm > 0.0) {
      d = std::max(d, std::min(r / s_norm, group_options[0].growth_rate() * d));
    }
  }
};

/// Schedule-Free AdamW (Defazio et al. 2024, Algorithm 1), with the weights w_t = t^r gamma_t^p.
struct ScheduleFreeReference {
  std::vector<torch::Tensor> y, z, x, v;
  std::vector<double> weight_sum;
  int64_t t = 0;

  explicit ScheduleFreeReference(std::vector<torch::Tensor> start)
      : y(start), z(start), x(start), weight_sum(start.size(), 0.0) {
    for (const auto& yi : y) v.push_back(torch::zeros_like(yi));
  }
  void step(const Quadratic& f, const std::vector<fh::ScheduleFreeAdamWOptions>& group_options) {
    t += 1;
    for (size_t i = 0; i < y.size(); ++i) {
      const auto& o = group_options[kGroupOf[i]];
      const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas());
      const auto g = f.gradient(i, y[i]);
      v[i] = beta2 * v[i] + (1.0 - beta2) * g * g;
      double gamma = o.lr() * std::sqrt(1.0 - std::pow(beta2, t));
      if (o.warmup_steps() > 0) gamma *= std::min(1.0, double(t) / double(o.warmup_steps()));
      z[i] = z[i] - gamma * g / (v[i].sqrt() + o.eps()) - gamma * o.weight_decay() * y[i];
      const double w = std::pow(double(t), o.r()) * std::pow(gamma, o.weight_lr_power());
      weight_sum[i] += w;
      const double c = w / weight_sum[i];
      x[i] = (1.0 - c) * x[i] + c * z[i];
      y[i] = (1.0 - beta1) * z[i] + beta1 * x[i];
    }
  }
};

const fh::ScheduleFreeAdamWParamState& sf_state(const fh::ScheduleFreeAdamW& opt,
                                                const torch::Tensor& p) {
  std::ostringstream key;  // LibTorch 1.13 keys the state by the TensorImpl's address
  key << p.unsafeGetTensorImpl();
  return static_cast<const fh::ScheduleFreeAdamWParamState&>(*opt.state().at(key.str()));
}

/// The optimizers keep their state in the parameters' dtype. Double parameters follow the
/// references to rounding (the equations are the same); float32 ones to float tolerance: Prodigy's
/// d = r / ||s||_1 feeds back into every step, and over 12 steps the float32 runs drift by up to
/// 3e-6 in absolute terms on O(1) parameters (measured), well inside 1e-5 + 1e-4 |x|.
struct Tolerance {
  double rtol, atol;
};
Tolerance tolerance(torch::Dtype dtype) {
  return dtype == torch::kDouble ? Tolerance{1e-10, 1e-12} : Tolerance{1e-4, 1e-5};
}

/// Twelve steps of `opt` over `params` (two groups: `first`, `second`) and of its double-precision
/// `reference` on the same quadratic `f`, `compare()` after each.
template <typename Optimizer, typename Reference, typename Options, typename Compare>
void step_beside_reference(const Quadratic& f, const std::vector<torch::Tensor>& params,
                           Optimizer& opt, Reference& reference, const Options& first,
                           const Options& second, Compare&& compare) {
  for (int step = 1; step <= 12; ++step) {
    f.set_gradients(params);
    opt.step();
    reference.step(f, {first, second});
    SCOPED_TRACE("step " + std::to_string(step));
    compare();
  }
}

void expect_prodigy_matches_reference(const fh::ProdigyOptions& first,
                                      const fh::ProdigyOptions& second, torch::Dtype dtype) {
  const double rtol = tolerance(dtype).rtol, atol = tolerance(dtype).atol;
  const Quadratic f({3, 5, 4, 2});
  auto params = f.start(dtype);
  ProdigyReference reference(as_double(params), first.d0());
  fh::Prodigy opt(two_groups(params, first, second));
  step_beside_reference(f, params, opt, reference, first, second, [&] {
    for (size_t i = 0; i < params.size(); ++i) {
      EXPECT_TRUE(all_close(params[i], reference.x[i], rtol, atol)) << "tensor " << i;
    }
    EXPECT_NEAR(opt.d(), reference.d, rtol * reference.d);
  });
  EXPECT_GT(opt.d(), 2.0 * first.d0());  // the estimate moved
}

}  // namespace

// ---- numerics: against the references ----------------------------------------------------------

TEST_F(BaselineOptimizers, Prodigy_MatchesDoublePrecisionReference) {
  // d0 0.05 so that the parameters move within 12 steps; the second group has its own lr, moments,
  // eps, bias correction and warm-up safeguard, and the same beta3 (the estimate is global).
  const auto first = fh::ProdigyOptions(1.0).d0(0.05).weight_decay(0.1);
  const auto second = fh::ProdigyOptions(0.5)
                          .d0(0.05)
                          .betas(std::make_tuple(0.8, 0.99))
                          .beta3(std::sqrt(0.999))
                          .eps(1e-4)
                          .use_bias_correction(true)
                          .safeguard_warmup(true);
  for (auto dtype : {torch::kDouble, torch::kFloat}) {
    SCOPED_TRACE(dtype == torch::kDouble ? "double" : "float");
    expect_prodigy_matches_reference(first, second, dtype);
  }
}

TEST_F(BaselineOptimizers, Prodigy_MatchesDoublePrecisionReferenceWithGrowthCapped) {
  const auto first = fh::ProdigyOptions().d0(1e-3).growth_rate(2.0);
  const auto second = fh::ProdigyOptions(0.3).d0(1e-3).growth_rate(2.0);
  for (auto dtype : {torch::kDouble, torch::kFloat}) {
    SCOPED_TRACE(dtype == torch::kDouble ? "double" : "float");
    expect_prodigy_matches_reference(first, second, dtype);
  }
}

TEST_F(BaselineOptimizers, ScheduleFree_MatchesDoublePrecisionReference) {
  // The second group: other betas, eps and lr, and the general weights w_t = t^0.5 gamma_t.
  const auto first = fh::ScheduleFreeAdamWOptions(0.05).weight_decay(0.1).warmup_steps(3);
  const auto second = fh::ScheduleFreeAdamWOptions(0.1)
                          .betas(std::make_tuple(0.8, 0.99))
                          .eps(1e-6)
                          .r(0.5)
                          .weight_lr_power(1.0);
  for (auto dtype : {torch::kDouble, torch::kFloat}) {
    SCOPED_TRACE(dtype == torch::kDouble ? "double" : "float");
    const double rtol = tolerance(dtype).rtol, atol = tolerance(dtype).atol;
    const Quadratic f({3, 5, 4, 2});
    auto params = f.start(dtype);
    ScheduleFreeReference reference(as_double(params));
    fh::ScheduleFreeAdamW opt(two_groups(params, first, second));
    step_beside_reference(f, params, opt, reference, first, second, [&] {
      for (size_t i = 0; i < params.size(); ++i) {
        EXPECT_TRUE(all_close(params[i], reference.y[i], rtol, atol)) << "y of tensor " << i;
        EXPECT_TRUE(all_close(sf_state(opt, params[i]).z(), reference.z[i], rtol, atol));
        EXPECT_TRUE(all_close(sf_state(opt, params[i]).x(), reference.x[i], rtol, atol));
      }
    });
  }
}

// ---- invariants the papers state ---------------------------------------------------------------

TEST_F(BaselineOptimizers, ScheduleFree_XIsTheLrSquaredWeightedAverageOfZAndParametersHoldY) {
  const Quadratic f({3, 5, 4, 2});
  auto params = f.start();
  const double lr = 0.05, beta2 = 0.999;
  const int64_t warmup = 4;
  fh::ScheduleFreeAdamW opt(params, fh::ScheduleFreeAdamWOptions(lr).warmup_steps(warmup));
  std::vector<std::vector<torch::Tensor>> z_iterates(params.size());  // z_2, z_3, ...
  std::vector<double> weights;                                        // gamma_1^2, gamma_2^2, ...
  for (int64_t t = 1; t <= 10; ++t) {
    f.set_gradients(params);
    opt.step();
    const double gamma = lr * std::sqrt(1.0 - std::pow(beta2, double(t))) *
                         std::min(1.0, double(t) / double(warmup));
    weights.push_back(gamma * gamma);
    SCOPED_TRACE("step " + std::to_string(t));
    for (size_t i = 0; i < params.size(); ++i) {
      const auto& st = sf_state(opt, params[i]);
      z_iterates[i].push_back(st.z().to(torch::kDouble));
      // x_{t+1} = sum_{s<=t} gamma_s^2 z_{s+1} / sum_{s<=t} gamma_s^2
      auto average = torch::zeros_like(z_iterates[i][0]);
      double total = 0.0;
      for (size_t s = 0; s < weights.size(); ++s) {
        average += weights[s] * z_iterates[i][s];
        total += weights[s];
      }
      EXPECT_TRUE(all_close(st.x(), average / total, 1e-5, 1e-6)) << "x of tensor " << i;
      // y = (1 - beta1) z + beta1 x with beta1 0.9.
      EXPECT_TRUE(all_close(params[i], 0.9 * st.x() + 0.1 * st.z(), 1e-6, 1e-7));
    }
  }
}

TEST_F(BaselineOptimizers, ScheduleFree_EvalAndTrainSwitchBetweenXAndYExactly) {
  const Quadratic f({3, 5});
  auto params = f.start();
  fh::ScheduleFreeAdamW opt(params, fh::ScheduleFreeAdamWOptions(0.05));
  for (int t = 0; t < 5; ++t) {
    f.set_gradients(params);
    opt.step();
  }
  const auto y0 = params[0].detach().clone(), y1 = params[1].detach().clone();
  EXPECT_TRUE(opt.training());
  opt.eval();
  EXPECT_FALSE(opt.training());
  EXPECT_TRUE(torch::equal(params[0], sf_state(opt, params[0]).x()));
  EXPECT_TRUE(torch::equal(params[1], sf_state(opt, params[1]).x()));
  EXPECT_FALSE(torch::equal(params[0], y0));
  opt.eval();  // idempotent
  EXPECT_TRUE(torch::equal(params[0], sf_state(opt, params[0]).x()));
  expect_error([&] { opt.step(); }, {"ScheduleFreeAdamW", "eval mode", "train()"});
  opt.train();
  EXPECT_TRUE(opt.training());
  EXPECT_TRUE(torch::equal(params[0], y0));
  EXPECT_TRUE(torch::equal(params[1], y1));
  opt.train();  // idempotent
  EXPECT_TRUE(torch::equal(params[0], y0));
}

TEST_F(BaselineOptimizers, Prodigy_EstimateNeverDecreases) {
  // A noisy quadratic from the authors' d0 1e-6: d rises by orders of magnitude and never falls.
  const Quadratic f({3, 5, 4, 2});
  auto params = f.start();
  fh::Prodigy opt(params);
  std::vector<double> d{opt.d()};
  for (int t = 0; t < 300; ++t) {
    f.set_gradients(params);
    for (auto& p : params) p.mutable_grad().add_(0.3 * torch::randn_like(p));
    opt.step();
    d.push_back(opt.d());
  }
  for (size_t t = 1; t < d.size(); ++t) ASSERT_GE(d[t], d[t - 1]) << "step " << t;
  EXPECT_EQ(d.front(), 1e-6);
  EXPECT_GT(d.back(), 1e3 * d.front());
}

TEST_F(BaselineOptimizers, Prodigy_EstimateSettlesNearTheDistanceToTheSolution) {
  // f(x) = (x - x*)^2 / 2 from x_0 = 0, D = |x_0 - x*| over six decades, from d_0 = 1e-6. While
  // the iterates approach x* from one side (g keeps its sign), d_hat = r / ||s||_1 is a
  // gradient-weighted mean of the distance covered |x_0 - x_k|, so below D: with |g| the distance
  // left and a uniform path it is D / 3 (int u (D - u) du / int (D - u) du), and beta3's weight on
  // the recent, nearer iterates raises it towards D / 2. Measured 0.33-0.57 D for D from 1e-4 to
  // 1e3, the same after 2000 and 10000 steps: tolerance [D / 4, D].
  for (double target : {1e-3, 1.0, -30.0, 1000.0}) {
    const double distance = std::abs(target);
    SCOPED_TRACE("x* = " + std::to_string(target));
    auto x = torch::zeros({1}, torch::kDouble).requires_grad_(true);
    fh::Prodigy opt({x});
    for (int t = 0; t < 2000; ++t) {
      x.mutable_grad() = x.detach() - target;
      opt.step();
    }
    EXPECT_GE(opt.d(), distance / 4);
    EXPECT_LE(opt.d(), distance);
    EXPECT_NEAR(x.item<double>(), target, 0.01 * distance);  // and it found the minimum
  }
}

// ---- the torch::optim contract -----------------------------------------------------------------

TEST_F(BaselineOptimizers, BadOptions_ThrowNamingTheValue) {
  auto p = torch::randn({3}).requires_grad_(true);
  using PO = fh::ProdigyOptions;
  expect_error([&] { fh::Prodigy({p}, PO(-1.0)); }, {"Prodigy", "lr", "-1"});
  expect_error([&] { fh::Prodigy({p}, PO().betas(std::make_tuple(1.0, 0.999))); },
               {"Prodigy", "beta1", "[0, 1)", "1"});
  expect_error([&] { fh::Prodigy({p}, PO().beta3(1.5)); }, {"beta3", "1.5"});
  expect_error([&] { fh::Prodigy({p}, PO().d0(0.0)); }, {"d0", "positive", "0"});
  expect_error([&] { fh::Prodigy({p}, PO().growth_rate(0.5)); }, {"growth_rate", "0.5"});
  expect_error([&] { fh::Prodigy({p}, PO().eps(-1e-8)); }, {"eps", "-1e-08"});
  expect_error([&] { fh::Prodigy({p}, PO().weight_decay(NAN)); }, {"weight_decay", "nan"});
  auto q = torch::randn({2}).requires_grad_(true);
  expect_error(
      [&] {
        fh::Prodigy(two_groups<PO>({p, p, q, q}, PO(), PO().d0(1e-3)));
      },
      {"Prodigy", "parameter 1", "more than once"});
  std::vector<OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<torch::Tensor>{p}, std::make_unique<PO>());
  groups.emplace_back(std::vector<torch::Tensor>{q}, std::make_unique<PO>(PO().d0(1e-3)));
  expect_error([&] { fh::Prodigy(std::move(groups)); },
               {"d estimate is global", "d0", "group 0 has 1e-06", "group 1 has 0.001"});

  using SO = fh::ScheduleFreeAdamWOptions;
  expect_error([&] { fh::ScheduleFreeAdamW({p}, SO(NAN)); }, {"ScheduleFreeAdamW", "lr", "nan"});
  expect_error([&] { fh::ScheduleFreeAdamW({p}, SO().betas(std::make_tuple(0.9, 1.0))); },
               {"beta2", "1"});
  expect_error([&] { fh::ScheduleFreeAdamW({p}, SO().warmup_steps(-2)); }, {"warmup_steps", "-2"});
  expect_error([&] { fh::ScheduleFreeAdamW({p}, SO().weight_lr_power(-1.0)); },
               {"weight_lr_power", "-1"});
  expect_error([&] { fh::ScheduleFreeAdamW({p}, SO().r(INFINITY)); }, {"r must", "inf"});

  // Parameters: empty, not floating point.
  expect_error([&] { fh::Prodigy(std::vector<torch::Tensor>{}); }, {"Prodigy", "empty"});
  expect_error([&] { fh::ScheduleFreeAdamW({torch::ones({2}, torch::kLong)}); },
               {"ScheduleFreeAdamW", "parameter 0", "Long"});

  // Options edited between steps are checked when used.
  fh::ScheduleFreeAdamW opt({p});
  opt.param_groups()[0].options().set_lr(-0.5);
  p.mutable_grad() = torch::ones_like(p);
  expect_error([&] { opt.step(); }, {"ScheduleFreeAdamW", "lr", "-0.5"});
}

TEST_F(BaselineOptimizers, SaveLoad_ContinuesExactly) {
  const Quadratic f({3, 5, 4, 2});
  const auto start = f.start();
  const auto copy = [&] {
    std::vector<torch::Tensor> out;
    for (const auto& p : start) out.push_back(p.detach().clone().requires_grad_(true));
    return out;
  };
  // Prodigy, two groups, one with beta3 unset (sqrt(beta2)) and one with it set to the same.
  using PO = fh::ProdigyOptions;
  const auto first = PO().d0(1e-3), second = PO(0.5).d0(1e-3).beta3(std::sqrt(0.999));
  auto straight = copy(), resumed = copy();
  fh::Prodigy opt_straight(two_groups(straight, first, second));
  fh::Prodigy opt_first(two_groups(resumed, first, second));
  for (int s = 0; s < 5; ++s) {
    f.set_gradients(straight);
    opt_straight.step();
    f.set_gradients(resumed);
    opt_first.step();
  }
  std::stringstream buffer;
  torch::save(opt_first, buffer);
  // As LibTorch's optimizers: the options are the constructor's, the archive restores the state.
  fh::Prodigy opt_second(two_groups(resumed, first, second));
  torch::load(opt_second, buffer);
  EXPECT_EQ(opt_second.d(), opt_first.d());
  EXPECT_EQ(opt_second.steps(), 5);
  for (int s = 0; s < 5; ++s) {
    f.set_gradients(straight);
    opt_straight.step();
    f.set_gradients(resumed);
    opt_second.step();
  }
  for (size_t i = 0; i < straight.size(); ++i) EXPECT_TRUE(torch::equal(straight[i], resumed[i]));
  EXPECT_EQ(opt_straight.d(), opt_second.d());

  // Schedule-Free, saved in eval mode (the parameters hold x then): the loaded optimizer is in
  // eval mode, and train() writes the saved y.
  using SO = fh::ScheduleFreeAdamWOptions;
  auto sf_straight = copy(), sf_resumed = copy();
  fh::ScheduleFreeAdamW sf_opt_straight(sf_straight, SO(0.05).warmup_steps(3));
  fh::ScheduleFreeAdamW sf_opt_first(sf_resumed, SO(0.05).warmup_steps(3));
  for (int s = 0; s < 5; ++s) {
    f.set_gradients(sf_straight);
    sf_opt_straight.step();
    f.set_gradients(sf_resumed);
    sf_opt_first.step();
  }
  sf_opt_first.eval();
  std::stringstream sf_buffer;
  torch::save(sf_opt_first, sf_buffer);
  fh::ScheduleFreeAdamW sf_opt_second(sf_resumed, SO(0.05).warmup_steps(3));
  torch::load(sf_opt_second, sf_buffer);
  EXPECT_FALSE(sf_opt_second.training());
  sf_opt_second.train();
  for (int s = 0; s < 5; ++s) {
    f.set_gradients(sf_straight);
    sf_opt_straight.step();
    f.set_gradients(sf_resumed);
    sf_opt_second.step();
  }
  for (size_t i = 0; i < sf_straight.size(); ++i) {
    EXPECT_TRUE(torch::equal(sf_straight[i], sf_resumed[i]));
  }
}

TEST_F(BaselineOptimizers, Options_SerializeRoundTrip) {
  // Every field, beta3 set and unset (c10::optional), through LibTorch's archive.
  const auto round_trip = [](const auto& options) {
    torch::serialize::OutputArchive out;
    options.serialize(out);
    std::stringstream buffer;
    out.save_to(buffer);
    torch::serialize::InputArchive in;
    in.load_from(buffer);
    std::decay_t<decltype(options)> back(123.0);
    back.serialize(in);
    return back;
  };
  const auto prodigy = fh::ProdigyOptions(0.7)
                           .betas(std::make_tuple(0.8, 0.99))
                           .eps(1e-6)
                           .weight_decay(0.01)
                           .d0(1e-4)
                           .growth_rate(1.5)
                           .use_bias_correction(true)
                           .safeguard_warmup(true);
  EXPECT_TRUE(round_trip(prodigy) == prodigy);
  EXPECT_FALSE(round_trip(prodigy).beta3().has_value());
  EXPECT_TRUE(round_trip(fh::ProdigyOptions().beta3(0.9)) == fh::ProdigyOptions().beta3(0.9));
  EXPECT_TRUE(round_trip(fh::ProdigyOptions()) == fh::ProdigyOptions());  // growth_rate inf
  EXPECT_FALSE(fh::ProdigyOptions().beta3(0.9) == fh::ProdigyOptions());
  const auto schedule_free = fh::ScheduleFreeAdamWOptions(0.01)
                                 .betas(std::make_tuple(0.95, 0.98))
                                 .eps(1e-7)
                                 .weight_decay(0.1)
                                 .warmup_steps(7)
                                 .r(0.5)
                                 .weight_lr_power(1.0);
  EXPECT_TRUE(round_trip(schedule_free) == schedule_free);
  EXPECT_FALSE(round_trip(schedule_free) == fh::ScheduleFreeAdamWOptions());
}

TEST_F(BaselineOptimizers, LoadingAnotherOptimizersState_SaysWhatTheArchiveHolds) {
  auto x = torch::randn({5}).requires_grad_(true);
  x.mutable_grad() = torch::ones_like(x);
  torch::optim::Adam adam({x});
  adam.step();
  std::stringstream adam_state;
  torch::save(adam, adam_state);
  fh::Prodigy prodigy({x});
  expect_error([&] { torch::load(prodigy, adam_state); },
               {"Prodigy::load: the archive is not a Prodigy optimizer state"});
  fh::ScheduleFreeAdamW schedule_free({x});
  schedule_free.step();
  std::stringstream schedule_free_state;
  torch::save(schedule_free, schedule_free_state);
  expect_error([&] { torch::load(prodigy, schedule_free_state); },
               {"not a Prodigy optimizer state", "it holds a ScheduleFreeAdamW state"});
}

TEST_F(BaselineOptimizers, StepWithClosure_ReturnsTheLoss) {
  const Quadratic f({3, 5});
  auto params = f.start();
  fh::Prodigy prodigy(params, fh::ProdigyOptions().d0(0.1));
  fh::ScheduleFreeAdamW schedule_free(params, fh::ScheduleFreeAdamWOptions(0.05));
  for (torch::optim::Optimizer* opt :
       std::vector<torch::optim::Optimizer*>{&prodigy, &schedule_free}) {
    const double before = f.loss(params).item<double>();
    const auto loss = opt->step([&] {
      opt->zero_grad();
      auto l = f.loss(params);
      l.backward();
      return l;
    });
    ASSERT_TRUE(loss.defined());
    EXPECT_DOUBLE_EQ(loss.item<double>(), before);  // the loss at the point the step started from
    EXPECT_LT(f.loss(params).item<double>(), before);
  }
}

TEST_F(BaselineOptimizers, UndefinedGradients_AreSkipped) {
  auto with = torch::randn({4}).requires_grad_(true);
  auto without = torch::randn({3}).requires_grad_(true);
  const auto unchanged = without.detach().clone();
  fh::Prodigy prodigy({with, without}, fh::ProdigyOptions().d0(0.1));
  fh::ScheduleFreeAdamW schedule_free({with, without});
  for (torch::optim::Optimizer* opt :
       std::vector<torch::optim::Optimizer*>{&prodigy, &schedule_free}) {
    const auto before = with.detach().clone();
    for (int t = 0; t < 3; ++t) {
      with.mutable_grad() = torch::ones_like(with);
      opt->step();
    }
    EXPECT_FALSE(torch::equal(with, before));
    EXPECT_TRUE(torch::equal(without, unchanged));
    EXPECT_EQ(opt->state().size(), 1u);  // no state for the parameter without a gradient
  }
  // No gradient anywhere: Prodigy's estimate and step count stay.
  fh::Prodigy idle({without});
  idle.step();
  EXPECT_EQ(idle.steps(), 0);
  EXPECT_EQ(idle.d(), 1e-6);
}

// ---- the loop's warm-up
// ---------------------------------------------------------------------------

TEST_F(BaselineOptimizers, ScheduleFree_WarmupByTheLoop_IsTheOptimizersWarmup) {
  // The harness's schedule-free-adamw-warmup scales lr in the loop (a factory does not see the
  // run's length); gamma_t, and so the run, is that of warmup_steps(W) in the optimizer.
  const Quadratic f({3, 5});
  auto own = f.start();
  std::vector<torch::Tensor> by_loop;
  for (const auto& p : own) by_loop.push_back(p.detach().clone().requires_grad_(true));
  const int64_t steps = 100;  // W = 5
  fh::ScheduleFreeAdamW opt_own(own, fh::ScheduleFreeAdamWOptions(0.05).warmup_steps(5));
  fh::ScheduleFreeAdamW opt_loop(by_loop, fh::ScheduleFreeAdamWOptions(0.05));
  for (int64_t t = 0; t < 20; ++t) {
    opt_loop.param_groups()[0].options().set_lr(
        0.05 * fh::schedule_factor(fh::Schedule::kWarmup, t, steps));
    f.set_gradients(own);
    opt_own.step();
    f.set_gradients(by_loop);
    opt_loop.step();
  }
  for (size_t i = 0; i < own.size(); ++i) EXPECT_TRUE(all_close(by_loop[i], own[i], 1e-6, 1e-7));
}
