#pragma once
// Helpers shared by the learned optimizer's tests (test_mnemosyne*.cpp, test_meta_train.cpp,
// test_learned_schedule.cpp, test_schedule_stack.cpp).

#include <torch/serialize.h>
#include <torch/types.h>

#include <string>
#include <utility>
#include <vector>

#include "flt/optim/learned_schedule.h"
#include "flt/optim/mnemosyne.h"
#include "test_util.h"

namespace flt::testing {

/// The fixture of the learned optimizer's tests (test_mnemosyne*.cpp).
class Mnemosyne : public SeededTest {};

/// A schedule whose head and corrector are not zero, so every path of the rule is exercised.
inline optim::LearnedSchedule perturbed_schedule(optim::Memory memory, uint64_t seed,
                                                 bool hand_rule = true) {
  torch::manual_seed(seed);
  optim::LearnedSchedule schedule(
      optim::LearnedScheduleOptions().memory(memory).hand_rule(hand_rule));
  torch::NoGradGuard no_grad;
  schedule->head_out->weight.normal_(0.0, 0.5);
  schedule->head_out->bias.normal_(0.0, 0.3);
  schedule->corrector_out->weight.normal_(0.0, 0.5);
  schedule->corrector_out->bias.normal_(0.0, 0.1);
  return schedule;
}

/// A fresh (untrained) model: its head starts at zero, so it is Adam with the controller's step.
inline optim::LearnedOptimizerModel untrained(optim::Memory memory = optim::Memory::kFLT) {
  return optim::LearnedOptimizerModel(optim::LearnedOptimizerModelOptions().memory(memory));
}

/// A model whose head is not zero (so memory and features matter).
inline optim::LearnedOptimizerModel perturbed(optim::Memory memory, uint64_t seed) {
  torch::manual_seed(seed);
  auto model = untrained(memory);
  torch::NoGradGuard no_grad;
  model->head_out->weight.normal_(0.0, 0.3);
  model->head_out->bias.normal_(0.0, 0.1);
  return model;
}

/// Mnemosyne over `params` with `model` and learning rate `lr`.
inline optim::CoordinateMnemosyne make_mnemosyne(std::vector<torch::Tensor> params,
                                                 optim::LearnedOptimizerModel model,
                                                 double lr = 1.0) {
  return optim::CoordinateMnemosyne(std::move(params), optim::CoordinateMnemosyneOptions(lr),
                                    std::move(model));
}

/// Continues a state saved by the Mnemosyne of version 0.1 (one class with a design option;
/// tests/data/README.md): loads tests/data/mnemosyne_0.1_<name>.pt into `Optimizer` over the
/// parameter it was saved with, takes the 3 steps the old build took after saving (the loss
/// reported, as then) and returns the parameter with the old build's, bit for bit comparable.
template <class Optimizer>
std::pair<torch::Tensor, torch::Tensor> continue_version_0_1_state(const std::string& name) {
  const std::string prefix = std::string(FLT_TEST_DATA_DIR) + "/mnemosyne_0.1_" + name;
  torch::Tensor x, expected;
  torch::load(x, prefix + "_param.pt");
  torch::load(expected, prefix + "_after.pt");
  x = x.detach().requires_grad_(true);
  Optimizer opt({x}, typename Optimizer::Options().untrained(true));
  torch::load(opt, prefix + ".pt");
  for (int s = 0; s < 3; ++s) {
    opt.zero_grad();
    auto loss = (x * x * torch::arange(1, x.numel() + 1)).sum();
    loss.backward();
    opt.report_loss(loss.item<double>());
    opt.step();
  }
  return {x.detach(), expected};
}

/// One step on f(x) = sum_i (i + 1) x_i^2; returns the loss before it.
inline torch::Tensor quadratic_step(optim::CoordinateMnemosyne& opt, torch::Tensor& x) {
  opt.zero_grad();
  auto loss = (x * x * torch::arange(1, x.numel() + 1, x.options()).view(x.sizes())).sum();
  loss.backward();
  opt.step();
  return loss.detach();
}

}  // namespace flt::testing
