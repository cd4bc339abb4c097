// The learned optimizers' behaviour over whole runs: LibTorch's XOR protocol with the default
// (`Mnemosyne`, the schedule's hand rule) and with the coordinate design's shipped rule; the
// coordinate design's settling (under pure noise, when gradients vanish, 10x past the
// meta-training horizon, with cosine annealing, and the step-size controller's two directions).
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "learned_optimizer_util.h"
#include "test_util.h"

namespace fo = flt::optim;
using namespace flt::testing;

// LibTorch's optimizer test protocol (test/cpp/api/optim.cpp): a 2-8-1 sigmoid MLP learns XOR with
// binary cross-entropy; the running loss must fall below 0.1 within 3000 epochs of 200 samples.
template <class Optimizer>
void expect_xor_converges(const char* name) {
  torch::manual_seed(0);
  torch::nn::Sequential model(torch::nn::Linear(2, 8), torch::nn::Sigmoid(),
                              torch::nn::Linear(8, 1), torch::nn::Sigmoid());
  Optimizer optimizer(model->parameters());  // default options, lr 1
  double running_loss = 1.0;
  int epoch = 0;
  constexpr int kMaximumEpochs = 3000;
  while (running_loss > 0.1 && epoch <= kMaximumEpochs) {
    const auto inputs = torch::randint(2, {200, 2}).to(torch::kFloat);
    const auto labels = (inputs.select(1, 0) != inputs.select(1, 1)).to(torch::kFloat).unsqueeze(1);
    const auto loss = optimizer.step([&] {
      optimizer.zero_grad();
      auto l = torch::nn::functional::binary_cross_entropy(model->forward(inputs), labels);
      l.backward();
      return l;
    });
    running_loss = running_loss * 0.99 + loss.template item<double>() * 0.01;
    ++epoch;
  }
  std::printf("  XOR, %s: running loss %.4f after %d epochs\n", name, running_loss, epoch);
  EXPECT_LT(running_loss, 0.1) << name << " after " << epoch << " epochs";
  EXPECT_EQ(optimizer.skipped(), 0) << name;
}

// The recommended optimizer as a user makes it: `Mnemosyne` (the schedule with its hand rule).
TEST_F(Mnemosyne, XOR_ConvergesWithTheDefault) {
  expect_xor_converges<fo::Mnemosyne>("Mnemosyne");
}

// The coordinate design with its shipped FLT-memory weights.
TEST_F(Mnemosyne, XOR_ConvergesWithThePretrainedDefault) {
  expect_xor_converges<fo::CoordinateMnemosyne>("CoordinateMnemosyne");
}

// `Mnemosyne` with default options is the hand rule: its schedule is the untrained one (the
// learned head zero), whichever weights ship for the coordinate design.
TEST_F(Mnemosyne, Default_IsTheScheduleWithItsHandRule) {
  auto x = torch::randn({3, 4}).requires_grad_(true);
  fo::Mnemosyne opt({x});
  const auto schedule = opt.schedule();
  ASSERT_TRUE(schedule);
  EXPECT_EQ(schedule->options.memory(), fo::Memory::kFLT);
  EXPECT_EQ(schedule->head_out->weight.abs().max().item<double>(), 0.0)
      << "the learned head's last layer is not zero";
  // The same steps as the explicitly untrained schedule, bit for bit.
  auto y = x.detach().clone().requires_grad_(true);
  fo::ScheduleMnemosyne untrained({y}, fo::ScheduleMnemosyneOptions().untrained(true));
  for (int s = 0; s < 5; ++s) {
    for (auto* p : {&x, &y}) {
      auto loss = (*p * *p * torch::arange(1, 13).view({3, 4})).sum();
      if (p->grad().defined()) p->mutable_grad().zero_();
      loss.backward();
    }
    opt.step();
    untrained.step();
  }
  EXPECT_TRUE(torch::equal(x, y));
}

// ---- settling (the rule must settle under noise and past its horizon: docs/design.md section 5)

// 10,000 coordinates fed N(0, 1) gradients for 5000 steps, x_0 = 0. What holds for any weights,
// shipped or not (learned_rule.h): the step is eta_t = rho * floor * exp(c_t) (x_0 = 0 makes the
// reference scale the floor: the cap 16 mean(x_0^2) is 0), and c moves by
// kappa (signal * h - target) a step with kappa >= kMinGain = 0.03, target >= kMinTarget = 0.03,
// signal in [0, 1] and h = cos(g_t, m1 / sqrt(v) before g_t): g_t is independent of it, so h ~
// N(0, 1/N) and sum_t h over 5000 steps is N(0, 5000 / 10^4), within 3.5 at 5 sd. Hence
// log(eta_5000 / eta_1) <= kappa (3.5 - 0.03 * 4999) <= 0.03 * (3.5 - 150) = -4.39. The
// displacement cannot be bounded without the head's weights (its correction d is unbounded); the
// settling of the displacement itself is tested on the untrained rule below. The one absolute
// bound: no further than Adam at lr 1e-3, whose steps m1 / sqrt(v) ~ g walk to
// 1e-3 sqrt(5000) = 0.0707.
TEST_F(Mnemosyne, PureNoiseGradients_ParameterNormStaysBounded) {
  torch::manual_seed(0);
  auto x = torch::zeros({10000}).requires_grad_(true);
  fo::CoordinateMnemosyne opt({x});  // its shipped weights
  double first_step = 0.0, rms = 0.0;
  for (int t = 1; t <= 5000; ++t) {
    x.mutable_grad() = torch::randn({10000});
    opt.step();
    if (t == 1) first_step = opt.step_sizes()[0];
  }
  rms = x.detach().pow(2).mean().sqrt().item<double>();
  std::printf("  pure noise: RMS displacement %.4g after 5000 steps, step size %.3g -> %.3g\n", rms,
              first_step, opt.step_sizes()[0]);
  EXPECT_LT(rms, 1e-3 * std::sqrt(5000.0)) << "no further than Adam at lr 1e-3";
  EXPECT_LT(opt.step_sizes()[0], std::exp(-4.39) * first_step) << "the step has annealed";
}

// The same on the untrained rule (head 0: the step is -eta_t m1 / sqrt(v), Adam's direction, with
// rho 0.05, floor 0.01, kappa = target = 0.035), independent of the shipped weights:
//  - c falls kappa * target = 1.225e-3 a step on average (signal = 1 for stationary noise), so
//    log(eta_5000 / eta_1) = -1.225e-3 * 4999 + kappa sum_t h = -6.12 +- 0.12 (5 sd of the sum,
//    as above);
//  - the increments eta_t m1_t / sqrt(v_t) of a noise walk are uncorrelated beyond m1's ~10-step
//    memory, each of mean square eta_t^2 (m1 / sqrt(v) sums to g / sqrt(v), v ~ E g^2 = 1), so
//    E[RMS(x_T)^2] = sum_{t <= T} eta_t^2: from the step sizes actually taken, the walk's ratio
//    RMS(x_5000) / RMS(x_1000) is sqrt(sum_{t <= 5000} eta_t^2 / sum_{t <= 1000} eta_t^2), 1.046
//    for the decay above, against sqrt(5) = 2.24 for a constant step. The measured ratio differs
//    from it by the sampling error of 10^4 coordinates: each mean square within sqrt(2 / 10^4) =
//    1.4% (1 sd), so the ratio sqrt(1 + 0.094) within about 0.0015; 0.03 is 20 sd, far below
//    the 1.2 a non-settling walk adds. Measured (this test's output): decay -6.106, ratio 1.0467
//    against the walk's 1.0472.
TEST_F(Mnemosyne, PureNoiseGradients_UntrainedControllerSettles) {
  torch::manual_seed(0);
  auto x = torch::zeros({10000}).requires_grad_(true);
  auto opt = make_mnemosyne({x}, untrained());
  std::vector<double> eta;
  double rms_1000 = 0.0;
  for (int t = 1; t <= 5000; ++t) {
    x.mutable_grad() = torch::randn({10000});
    opt.step();
    eta.push_back(opt.step_sizes()[0]);
    if (t == 1000) rms_1000 = x.detach().pow(2).mean().sqrt().item<double>();
  }
  const double rms_5000 = x.detach().pow(2).mean().sqrt().item<double>();
  double squares_1000 = 0.0, squares_5000 = 0.0;
  for (size_t t = 0; t < eta.size(); ++t) {
    squares_5000 += eta[t] * eta[t];
    if (t < 1000) squares_1000 += eta[t] * eta[t];
  }
  const double walk_ratio = std::sqrt(squares_5000 / squares_1000);
  std::printf(
      "  untrained, pure noise: step %.3g -> %.3g (log ratio %.4f), RMS %.4g -> %.4g (ratio %.4f, "
      "walk with these steps %.4f)\n",
      eta.front(), eta.back(), std::log(eta.back() / eta.front()), rms_1000, rms_5000,
      rms_5000 / rms_1000, walk_ratio);
  EXPECT_NEAR(eta.front(), 0.05 * 0.01, 1e-9) << "rho * floor at x = 0";
  EXPECT_NEAR(std::log(eta.back() / eta.front()), -0.035 * 0.035 * 4999, 0.12)
      << "c falls kappa * target a step under noise";
  EXPECT_NEAR(rms_5000 / rms_1000, walk_ratio, 0.03) << "the displacement is the walk of its steps";
  // eta_t = eta_1 r^(t-1), r = exp(-kappa * target): the walk ratio in closed form (1.046).
  const double r2 = std::exp(-2.0 * 0.035 * 0.035);
  const double settled = std::sqrt((1.0 - std::pow(r2, 5000)) / (1.0 - std::pow(r2, 1000)));
  EXPECT_LT(rms_5000 / rms_1000, settled + 0.03) << "has the walk stopped? sqrt(5) = 2.24 if not";
}

// A fitted network (training loss ~0) sends gradients of 1e-8 and less that all point the same
// way (they grow the margins). The rule must stop there, as Adam does: before the correction gate
// and the controller's gradient signal, the head's bias kept moving such parameters (a wine MLP's
// norm went 24 -> 142 over 750 steps of zero loss), and float underflow in the cosine once lifted
// c from -30 to +3 in one step.
TEST_F(Mnemosyne, VanishingGradients_StopTheRule) {
  torch::manual_seed(2);
  auto x = torch::randn({4096}).mul_(0.1).requires_grad_(true);
  fo::CoordinateMnemosyne opt({x});  // its shipped weights
  for (int t = 1; t <= 100; ++t) {   // ordinary training: unit-scale gradients
    x.mutable_grad() = torch::randn({4096}) + 0.5;
    opt.step();
  }
  const double step_when_fitted = opt.step_sizes()[0];
  const auto margin_direction = torch::randn({4096}).sign();
  const auto feed = [&](double scale, int steps) {
    for (int t = 1; t <= steps; ++t) {
      x.mutable_grad() = scale * margin_direction;
      opt.step();
      const auto& st =
          static_cast<fo::CoordinateMnemosyneParamState&>(*opt.state().begin()->second);
      ASSERT_LE(st.controller()[0].item<double>(), 3.0);
    }
  };
  // Momentum coasts on for a while (m2 / rms decays as 0.99^t / 0.9995^t, 0.0013 at t = 700), as
  // Adam's does; then the parameters must stand still.
  feed(1e-8, 700);
  const auto coasted = x.detach().clone();
  feed(1e-20, 300);
  feed(0.0, 300);
  const double moved = (x.detach() - coasted).norm().item<double>() / coasted.norm().item<double>();
  std::printf(
      "  vanishing gradients: relative displacement %.3g over the last 600 steps, step size %.3g "
      "-> %.3g\n",
      moved, step_when_fitted, opt.step_sizes()[0]);
  EXPECT_LT(moved, 1e-4) << "the parameters kept moving without gradient";
  EXPECT_LE(opt.step_sizes()[0], step_when_fitted) << "the step grew on vanishing gradients";
}

// A convex problem (noisy least squares, mini-batches of 16) run for 6000 steps, 10x the longest
// meta-training horizon (600): the held-out loss must not climb back from its best.
TEST_F(Mnemosyne, ConvexProblem_NoLateLossRise10xPastTheHorizon) {
  torch::manual_seed(1);
  const int64_t n = 512, d = 20;
  const auto a = torch::randn({n, d}), truth = torch::randn({d, 1});
  const auto y = torch::matmul(a, truth) + 0.5 * torch::randn({n, 1});
  const auto held_a = torch::randn({256, d});
  const auto held_y = torch::matmul(held_a, truth) + 0.5 * torch::randn({256, 1});
  auto w = torch::zeros({d, 1}).requires_grad_(true);
  auto b = torch::zeros({1}).requires_grad_(true);
  fo::CoordinateMnemosyne opt({w, b});
  const auto held_out = [&] {
    torch::NoGradGuard no_grad;
    return (torch::matmul(held_a, w) + b - held_y).pow(2).mean().item<double>();
  };
  double best = held_out(), at_horizon = 0.0;
  for (int t = 1; t <= 6000; ++t) {
    const auto idx = torch::randint(n, {16});
    opt.zero_grad();
    (torch::matmul(a.index_select(0, idx), w) + b - y.index_select(0, idx))
        .pow(2)
        .mean()
        .backward();
    opt.step();
    const double loss = held_out();
    best = std::min(best, loss);
    if (t == 600) at_horizon = loss;
  }
  const double final_loss = held_out();
  std::printf(
      "  convex: held-out loss %.4f at step 600, best %.4f, final %.4f (noise floor 0.25)\n",
      at_horizon, best, final_loss);
  EXPECT_LT(final_loss, 1.1 * best);
  EXPECT_LE(final_loss, at_horizon * 1.01);
  EXPECT_LT(final_loss, 0.35) << "near the noise floor 0.25 (+ the estimation error of 20 weights)";
}

TEST_F(Mnemosyne, TotalSteps_AnnealsTheStepToZero) {
  auto x = torch::randn({50}).requires_grad_(true);
  fo::CoordinateMnemosyne opt({x}, fo::CoordinateMnemosyneOptions().total_steps(100));
  std::vector<double> sizes;
  for (int t = 1; t <= 100; ++t) {
    quadratic_step(opt, x);
    sizes.push_back(opt.step_sizes()[0]);
  }
  EXPECT_GT(sizes[0], 0.0);
  EXPECT_LT(sizes[99], 1e-3 * sizes[0]) << "cosine annealing ends near 0";
  EXPECT_LT(sizes[74], sizes[24]);
  expect_error(
      [] {
        fo::CoordinateMnemosyne({torch::randn({2}).requires_grad_(true)},
                                fo::CoordinateMnemosyneOptions().total_steps(-5));
      },
      {"total_steps", "-5"});
}

// The controller's two behaviours on the untrained rule: a consistent gradient (a linear slope)
// makes the step grow to its cap; pure noise makes it shrink.
TEST_F(Mnemosyne, Controller_GrowsOnAConsistentSlopeAndShrinksUnderNoise) {
  auto slope = torch::zeros({100}).requires_grad_(true);
  auto noise = torch::zeros({100}).requires_grad_(true);
  auto on_slope = make_mnemosyne({slope}, untrained());
  auto under_noise = make_mnemosyne({noise}, untrained());
  double first = 0.0;
  for (int t = 1; t <= 2000; ++t) {
    if (t <= 300) {
      slope.mutable_grad() = torch::ones({100});
      on_slope.step();
    }
    noise.mutable_grad() = torch::randn({100});
    under_noise.step();
    if (t == 1) first = on_slope.step_sizes()[0];
  }
  EXPECT_GT(on_slope.step_sizes()[0], 5.0 * first);
  // Slowly with the untrained gains (kappa 0.035, target 0.035): c falls by ~1e-3 a step while the
  // parameters' own RMS, the step's reference scale, grows from 0 as they random-walk.
  EXPECT_LT(under_noise.step_sizes()[0], 0.5 * first);
}
