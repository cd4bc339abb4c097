// The harness's baselines in its loops: the warm-up schedule, evaluation at Schedule-Free's
// average with BatchNorm statistics recomputed there, and the untuned contenders in both loops.
// The optimizers themselves: test_baseline_optimizers.cpp.
#include <cmath>
#include <string>
#include <vector>

#include "flt/harness/baseline_optimizers.h"
#include "harness_test_util.h"

namespace fh = flt::harness;
using namespace flt::testing;

TEST_F(BaselineOptimizers, Schedule_WarmupRisesOverFivePercentOfTheRun) {
  for (int64_t t = 0; t < 100; ++t) {
    EXPECT_DOUBLE_EQ(fh::schedule_factor(fh::Schedule::kWarmup, t, 100),
                     std::min(1.0, double(t + 1) / 5.0));
    EXPECT_EQ(fh::schedule_factor(fh::Schedule::kConstant, t, 100), 1.0);
  }
  EXPECT_EQ(fh::schedule_factor(fh::Schedule::kWarmup, 0, 10), 1.0);  // W at least 1 step
  EXPECT_NEAR(fh::schedule_factor(fh::Schedule::kCosine, 50, 100), 0.5, 1e-15);
}

TEST_F(BaselineOptimizers, EvaluationHook_RecomputesBatchNormAtTheEvaluationPoint) {
  // The hook moves the first layer's bias by +5 for each evaluation (an evaluation point far from
  // the training point) and back. With batch_norm_batches the BatchNorm layer evaluates with the
  // batch mean of the shifted point; without, with the mean training left, about 5 below. The
  // training itself is the same either way: its batches come from their own stream.
  torch::nn::Sequential net;
  const auto run = tiny_regression(/*steps=*/60, /*batch_norm=*/true, &net);
  // The full training set's mean of the BatchNorm input at the current parameters.
  const auto input_mean = [&] {
    torch::NoGradGuard no_grad;
    return net[0]->as<torch::nn::Linear>()->forward(run.split.train_x).mean().item<double>();
  };
  std::vector<double> seen, expected;
  torch::Tensor saved;
  fh::EvaluationHook hook;
  hook.before = [&](torch::optim::Optimizer&) {
    torch::NoGradGuard no_grad;
    auto bias = net[0]->as<torch::nn::Linear>()->bias;
    saved = bias.detach().clone();
    bias.add_(5.0);
  };
  hook.after = [&](torch::optim::Optimizer&) {
    seen.push_back(net[1]->as<torch::nn::BatchNorm1d>()->running_mean.mean().item<double>());
    expected.push_back(input_mean());
    torch::NoGradGuard no_grad;
    net[0]->as<torch::nn::Linear>()->bias.copy_(saved);
  };
  hook.batch_norm_batches = 8;
  const auto recomputed = fh::run_training(run, 0, sgd(0.05), fh::Schedule::kConstant, hook);
  ASSERT_EQ(seen.size(), recomputed.steps.size());  // once per evaluation, step 0 included
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_NEAR(seen[i], expected[i], 0.3) << "eval " << i;

  seen.clear(), expected.clear();
  hook.batch_norm_batches = 0;
  const auto kept = fh::run_training(run, 0, sgd(0.05), fh::Schedule::kConstant, hook);
  for (size_t i = 1; i < seen.size(); ++i) EXPECT_GT(expected[i] - seen[i], 4.0) << "eval " << i;
  EXPECT_EQ(kept.train_loss.size(), recomputed.train_loss.size());
  for (size_t i = 1; i < kept.train_loss.size(); ++i) {
    EXPECT_EQ(kept.train_loss[i], recomputed.train_loss[i]);
  }
  EXPECT_NE(kept.held_out.back(), recomputed.held_out.back());
}

TEST_F(BaselineOptimizers, UntunedContenders_RunInBothLoops) {
  const auto contenders = fh::untuned_baseline_contenders();
  ASSERT_EQ(contenders.size(), 4u);
  fh::RunEvalOptions options;
  options.eval_seeds = 2;
  options.progress = false;
  // Real-suite loop, on a model with BatchNorm (Schedule-Free evaluates at x, statistics there).
  const auto rows = fh::evaluate_training_runs({tiny_regression(/*steps=*/60, /*batch_norm=*/true)},
                                               contenders, options);
  ASSERT_EQ(rows.size(), 4u);
  const std::vector<std::string> names{"prodigy", "prodigy-cosine", "schedule-free-adamw",
                                       "schedule-free-adamw-warmup"};
  const std::vector<double> lrs{1.0, 1.0, 0.0025, 0.0025};
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].contender, names[i]);
    EXPECT_EQ(rows[i].lr, lrs[i]);
    EXPECT_EQ(rows[i].diverged, 0);
    EXPECT_TRUE(std::isfinite(rows[i].median_final));
    EXPECT_LT(rows[i].median_final, rows[i].median_curve.front()) << names[i];
  }
  // Synthetic-suite loop: every loss evaluation between the hooks, at x.
  int before = 0, after = 0;
  auto sf = contenders[2];
  const auto inner_before = sf.evaluation.before, inner_after = sf.evaluation.after;
  fh::EvaluationHook counting;
  counting.before = [&](torch::optim::Optimizer& o) { ++before, inner_before(o); };
  counting.after = [&](torch::optim::Optimizer& o) { ++after, inner_after(o); };
  auto task = fh::held_out_tasks()[4];  // rosenbrock-4d
  auto gen = at::make_generator<at::CPUGeneratorImpl>(1);
  const auto instance = task.make(gen);
  const auto curve = fh::run_optimizer(*instance, instance->initial(gen), 30, 7, sf.make(0.01),
                                       fh::Schedule::kConstant, counting);
  EXPECT_EQ(before, 31);
  EXPECT_EQ(after, 31);
  EXPECT_FALSE(curve.diverged);
  EXPECT_LT(curve.losses.back(), curve.losses.front());
}
