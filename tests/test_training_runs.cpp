// Held-out real training runs: the loop's contract (evaluation points, seeded minibatch order,
// schedules, divergence reported not thrown), the suite's definition, the comparison arithmetic and
// the tuning cache.
#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "flt/harness/training_runs.h"
#include "flt/metatrain/datasets.h"
#include "harness_test_util.h"

namespace fh = flt::harness;
using namespace flt::testing;

namespace {

class TrainingRuns : public flt::testing::SeededTest {};

/// SGD that records the lr of its first group at every step (to observe the loop's schedule).
class RecordingSgd : public torch::optim::SGD {
 public:
  RecordingSgd(std::vector<torch::Tensor> p, std::vector<double>* lrs)
      : SGD(std::move(p), torch::optim::SGDOptions(0.01)), lrs_(lrs) {}
  torch::Tensor step(LossClosure closure = nullptr) override {
    lrs_->push_back(param_groups()[0].options().get_lr());
    return SGD::step(closure);
  }

 private:
  std::vector<double>* lrs_;
};

/// The training losses after step 0 (the entry at step 0 is NaN: no step yet).
std::vector<double> training_losses(const fh::TrainingCurve& curve) {
  return {curve.train_loss.begin() + 1, curve.train_loss.end()};
}

}  // namespace

TEST_F(TrainingRuns, RunTraining_EvaluationPointsAndProgress) {
  const auto run = tiny_regression(/*steps=*/50);
  const auto curve = fh::run_training(run, /*seed=*/0, sgd(0.05));
  EXPECT_EQ(curve.steps, (std::vector<int64_t>{0, 20, 40, 50}));  // the last step always
  ASSERT_EQ(curve.held_out.size(), 4u);
  ASSERT_EQ(curve.param_norm.size(), 4u);
  ASSERT_EQ(curve.train_loss.size(), 4u);
  EXPECT_TRUE(std::isnan(curve.train_loss[0]));
  EXPECT_FALSE(curve.diverged);
  EXPECT_LT(curve.final_loss(), 0.5 * curve.held_out[0]);
  EXPECT_LE(curve.best_loss(), curve.final_loss());
  for (double n : curve.param_norm) EXPECT_GT(n, 0.0);
}

TEST_F(TrainingRuns, RunTraining_SeedFixesWeightsAndBatchesWhateverRanBefore) {
  const auto run = tiny_regression();
  const auto a = fh::run_training(run, 5, sgd(0.05));
  torch::manual_seed(99);
  (void)fh::run_training(run, 6, sgd(0.2));  // consumes generators in between
  const auto b = fh::run_training(run, 5, sgd(0.05));
  EXPECT_EQ(a.held_out, b.held_out);
  EXPECT_EQ(training_losses(a), training_losses(b));
  const auto c = fh::run_training(run, 6, sgd(0.05));
  EXPECT_NE(a.held_out[0], c.held_out[0]);  // another seed: other initial weights
  // Every optimizer sees the same batches: the step-0 held-out loss and, for lr 0, every
  // training loss are the same whatever the optimizer.
  const auto adam = fh::run_training(run, 5, [](std::vector<torch::Tensor> p) {
    return std::make_unique<torch::optim::Adam>(std::move(p), torch::optim::AdamOptions(0.0));
  });
  const auto still = fh::run_training(run, 5, sgd(0.0));
  EXPECT_EQ(adam.held_out[0], a.held_out[0]);
  EXPECT_EQ(training_losses(adam), training_losses(still));
}

TEST_F(TrainingRuns, RunTraining_CosineScheduleDecaysToZero) {
  const auto run = tiny_regression(/*steps=*/40);
  std::vector<double> lrs;
  const auto factory = [&](std::vector<torch::Tensor> p) {
    return std::make_unique<RecordingSgd>(std::move(p), &lrs);
  };
  fh::run_training(run, 0, factory, fh::Schedule::kCosine);
  ASSERT_EQ(lrs.size(), 40u);
  EXPECT_DOUBLE_EQ(lrs[0], 0.01);
  EXPECT_NEAR(lrs[20], 0.005, 1e-12);
  EXPECT_NEAR(lrs[39], 0.01 * 0.5 * (1 + std::cos(M_PI * 39 / 40)), 1e-12);
  lrs.clear();
  fh::run_training(run, 0, factory, fh::Schedule::kConstant);
  EXPECT_EQ(lrs, std::vector<double>(40, 0.01));
}

TEST_F(TrainingRuns, RunTraining_DivergenceIsReportedNotThrown) {
  const auto run = tiny_regression();
  fh::TrainingCurve curve;
  ASSERT_NO_THROW(curve = fh::run_training(run, 0, sgd(10.0)));
  EXPECT_TRUE(curve.diverged);
  EXPECT_GT(curve.diverged_at, 0);
  EXPECT_TRUE(std::isinf(curve.final_loss()));
  EXPECT_TRUE(std::isfinite(curve.best_loss()));
  EXPECT_EQ(curve.held_out.size(), curve.steps.size());  // the curve is complete, +inf after
}

TEST_F(TrainingRuns, RunTraining_BadRunsNameTheProblem) {
  auto run = tiny_regression();
  run.loss = fh::LossKind::kCrossEntropy;
  expect_error([&] { fh::run_training(run, 0, sgd(0.1)); }, {"tiny-linreg", "cross-entropy"});
  run = tiny_regression();
  run.eval_every = 0;
  expect_error([&] { fh::run_training(run, 0, sgd(0.1)); }, {"eval_every", "0"});
}

TEST_F(TrainingRuns, Suite_NamesScalingAndSkippedTabularRuns) {
  const auto names = fh::held_out_training_run_names();
  EXPECT_EQ(names.size(), 18u);
  const std::string dir = "/nonexistent/sklearn";
  setenv("FLT_SKLEARN_DATA_DIR", dir.c_str(), 1);
  std::vector<std::string> skipped;
  const auto runs = fh::held_out_training_runs(0.1, {"text-gru", "wine-mlp"}, &skipped);
  unsetenv("FLT_SKLEARN_DATA_DIR");
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].name, "text-gru");
  EXPECT_EQ(runs[0].steps, 150);  // 1500 x 0.1
  EXPECT_EQ(runs[0].eval_every, 5);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_NE(skipped[0].find("wine-mlp"), std::string::npos);
  EXPECT_NE(skipped[0].find("python3-sklearn"), std::string::npos);
  expect_error([] { fh::held_out_training_runs(1.0, {"digits-cnnn"}); }, {"\"digits-cnnn\""});
  expect_error([] { fh::held_out_training_runs(0.0); }, {"steps_scale", "0"});
}

namespace {

/// Each run, 2% of its steps: finite held-out losses, and Adam lowers them.
void expect_every_run_trains_under_adam(const std::vector<fh::TrainingRun>& runs) {
  for (const auto& run : runs) {
    SCOPED_TRACE(run.name);
    const auto curve = fh::run_training(run, 0, [](std::vector<torch::Tensor> p) {
      return std::make_unique<torch::optim::Adam>(std::move(p), torch::optim::AdamOptions(3e-3));
    });
    EXPECT_FALSE(curve.diverged);
    EXPECT_LT(curve.final_loss(), curve.held_out[0]);
  }
}

}  // namespace

TEST_F(TrainingRuns, Suite_EveryRunTrainsUnderAdam) {
  expect_every_run_trains_under_adam(fh::held_out_training_runs(0.02));
}

TEST_F(TrainingRuns, Development_OtherNamesAndDataThanTheHeldOutSuite) {
  const auto names = fh::development_training_run_names();
  EXPECT_EQ(names.size(), 12u);
  for (const auto& held_out : fh::held_out_training_run_names()) {
    EXPECT_EQ(std::count(names.begin(), names.end(), held_out), 0) << held_out;
  }
  const auto runs = fh::development_training_runs(0.1, {"fmnist-mlp", "fmnist-autoencoder"});
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].steps, 100);  // 1000 x 0.1
  // Fashion-MNIST from index 10,000 on; held out, the training file's last images: neither the
  // first 10,000 training images nor the test images, which checks from outside read.
  const auto all = flt::metatrain::data::fashion_mnist();
  const int64_t n = all.train_x.size(0);
  EXPECT_TRUE(torch::equal(runs[0].split.train_x, all.train_x.narrow(0, 10000, 1000)));
  EXPECT_TRUE(torch::equal(runs[0].split.train_y, all.train_y.narrow(0, 10000, 1000)));
  EXPECT_TRUE(torch::equal(runs[0].split.test_x, all.train_x.narrow(0, n - 2000, 2000)));
  // The autoencoder regresses its 14x14 input.
  EXPECT_EQ(runs[1].split.classes, 0);
  EXPECT_EQ(runs[1].split.train_x.sizes(), (std::vector<int64_t>{4000, 1, 14, 14}));
  EXPECT_TRUE(torch::equal(runs[1].split.train_y, runs[1].split.train_x.flatten(1)));
  expect_error([] { fh::development_training_runs(1.0, {"text-gru"}); }, {"\"text-gru\""});
  expect_error([] { fh::development_training_runs(-1.0); }, {"steps_scale", "-1"});
}

TEST_F(TrainingRuns, Development_EveryRunTrainsUnderAdam) {
  expect_every_run_trains_under_adam(fh::development_training_runs(0.02));
}

TEST_F(TrainingRuns, Compare_TiesWithinOnePercentAndSpeedup) {
  EXPECT_EQ(fh::compare_finals(1.0, 1.005), 0);
  EXPECT_EQ(fh::compare_finals(1.0, 1.02), 1);
  EXPECT_EQ(fh::compare_finals(1.02, 1.0), -1);
  EXPECT_EQ(fh::compare_finals(INFINITY, INFINITY), 0);
  EXPECT_EQ(fh::compare_finals(5.0, INFINITY), 1);
  EXPECT_EQ(fh::compare_finals(INFINITY, 5.0), -1);

  fh::RunRow learned, adam;
  learned.steps = adam.steps = 100;
  learned.median_final = 0.5;
  adam.curve_steps = {0, 25, 50, 75, 100};
  adam.median_curve = {2.0, 1.0, 0.6, 0.45, 0.4};
  EXPECT_DOUBLE_EQ(fh::speedup(learned, adam), 0.75);  // Adam reaches 0.5 at step 75
  learned.median_final = 0.3;
  EXPECT_TRUE(std::isinf(fh::speedup(learned, adam)));  // never
}

TEST_F(TrainingRuns, Evaluate_TuningCacheIsReusedAndKeyedByTheRun) {
  const auto cache = std::filesystem::temp_directory_path() / "flt_test_tuning_cache.csv";
  std::filesystem::remove(cache);
  fh::RunEvalOptions options;
  options.eval_seeds = 1;
  options.tuning_seeds = 1;
  options.progress = false;
  options.tuning_cache = cache.string();
  auto contenders = fh::baseline_contenders();
  contenders.resize(2);  // adam-1e-3 (fixed) and adam-cosine (tuned)
  const auto first = fh::evaluate_training_runs({tiny_regression(40)}, contenders, options);
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0].lr, 1e-3);
  EXPECT_FALSE(first[1].tuned_from_cache);
  std::ifstream file(cache);
  std::string header;
  std::getline(file, header);
  EXPECT_EQ(header, "task,signature,contender,tuning_seeds,lr,median_final_held_out");
  const auto second = fh::evaluate_training_runs({tiny_regression(40)}, contenders, options);
  EXPECT_TRUE(second[1].tuned_from_cache);
  EXPECT_EQ(second[1].lr, first[1].lr);
  EXPECT_EQ(second[1].median_final, first[1].median_final);
  // Another step budget is another key: tuned afresh.
  const auto longer = fh::evaluate_training_runs({tiny_regression(60)}, contenders, options);
  EXPECT_FALSE(longer[1].tuned_from_cache);
  std::filesystem::remove(cache);
}

TEST_F(TrainingRuns, Evaluate_MnemosyneThroughItsPublicInterface) {
  fh::RunEvalOptions options;
  options.eval_seeds = 2;
  options.tuning_seeds = 1;
  options.progress = false;
  const auto rows =
      fh::evaluate_training_runs({fh::quick_training_run()}, {fh::mnemosyne_contender()}, options);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].contender, "mnemosyne");
  EXPECT_EQ(rows[0].lr, 1.0);
  EXPECT_TRUE(std::isfinite(rows[0].median_final));
  EXPECT_EQ(rows[0].median_curve.size(), rows[0].curve_steps.size());
  EXPECT_EQ(rows[0].curve_steps.back(), 100);
}
