#pragma once
// Helpers shared by the tests of the evaluation harness's loops (test_training_runs.cpp,
// test_baseline_optimizers*.cpp).

#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include <memory>
#include <utility>
#include <vector>

#include "flt/harness/evaluate.h"
#include "flt/harness/training_runs.h"
#include "test_util.h"

namespace flt::testing {

/// The fixture of the harness's baselines' tests (test_baseline_optimizers*.cpp).
class BaselineOptimizers : public SeededTest {};

/// Linear regression on 256 noisy examples of a random linear map, cheap and data-free, for
/// `steps` steps; through BatchNorm when `batch_norm`: Linear(8, 4) -> BatchNorm1d(4) ->
/// Linear(4, 1). `built` receives the model.
inline harness::TrainingRun tiny_regression(int64_t steps = 60, bool batch_norm = false,
                                            torch::nn::Sequential* built = nullptr) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(3);
  const auto w = torch::randn({8, 1}, gen);
  const auto x = torch::randn({320, 8}, gen);
  const auto y = x.matmul(w) + 0.1 * torch::randn({320, 1}, gen);
  harness::TrainingRun run;
  run.name = "tiny-linreg";
  run.family = "linear regression / synthetic";
  run.split.name = "synthetic";
  run.split.train_x = x.slice(0, 0, 256);
  run.split.train_y = y.slice(0, 0, 256);
  run.split.test_x = x.slice(0, 256);
  run.split.test_y = y.slice(0, 256);
  run.split.classes = 0;
  run.loss = harness::LossKind::kMeanSquaredError;
  run.build = [batch_norm, built](uint64_t) {
    torch::nn::Sequential net =
        batch_norm ? torch::nn::Sequential(torch::nn::Linear(8, 4), torch::nn::BatchNorm1d(4),
                                           torch::nn::Linear(4, 1))
                   : torch::nn::Sequential(torch::nn::Linear(8, 1));
    if (built != nullptr) *built = net;
    return harness::TrainableModel{
        net.ptr(), [net](const torch::Tensor& t) mutable { return net->forward(t); }};
  };
  run.batch = 16;
  run.steps = steps;
  run.eval_every = 20;
  return run;
}

/// Plain SGD at `lr`.
inline harness::OptimizerFactory sgd(double lr) {
  return [lr](std::vector<torch::Tensor> p) {
    return std::make_unique<torch::optim::SGD>(std::move(p), torch::optim::SGDOptions(lr));
  };
}

}  // namespace flt::testing
