// The C++ training loops the Python tests compare fltlab against (tests/python/test_optim.py and
// test_training.py build the same models from the same seeds and draws in Python):
//
//   flt_python_reference trajectory OUT DESIGN STEPS SEED
//     a 16-32-4 tanh MLP on a random regression batch, Mnemosyne with total_steps = STEPS and the
//     lr halved every 10 steps, the loss given through the step's closure, a validation metric
//     reported every 5 steps; writes the losses (float64) then the final parameters (float32) to
//     OUT.
//   flt_python_reference fashion TRAIN TEST STEPS BATCH HIDDEN SEED
//     a 784-HIDDEN-10 ReLU MLP on the first TRAIN / TEST Fashion-MNIST examples, Mnemosyne (the
//     default: the schedule's hand rule, total_steps = STEPS), minibatches in order; prints the
//     held-out loss.
#include <ATen/ATen.h>
#include <torch/nn/functional/activation.h>
#include <torch/nn/functional/linear.h>
#include <torch/nn/functional/loss.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "flt/metatrain/datasets.h"
#include "flt/optim/mnemosyne.h"

namespace {

namespace F = torch::nn::functional;
namespace fo = flt::optim;

std::vector<torch::Tensor> leaves(std::vector<torch::Tensor> tensors) {
  for (auto& t : tensors) t.requires_grad_(true);
  return tensors;
}

// The Python loop of tests/python/test_optim.py in C++ with `Optimizer` (either learned optimizer).
template <class Optimizer>
int trajectory(const std::string& out, int64_t steps, int64_t seed) {
  torch::manual_seed(seed);
  const auto x = torch::randn({64, 16}), y = torch::randn({64, 4});
  auto params = leaves({torch::randn({32, 16}) * 0.25, torch::randn({32}) * 0.1,
                        torch::randn({4, 32}) * 0.25, torch::randn({4}) * 0.1});
  Optimizer opt(params, typename Optimizer::Options(1.0).total_steps(steps));
  auto loss_of = [&] {
    const auto hidden = torch::tanh(F::linear(x, params[0], params[1]));
    return F::mse_loss(F::linear(hidden, params[2], params[3]), y);
  };
  std::vector<double> losses;
  for (int64_t t = 0; t < steps; ++t) {
    // torch.optim.lr_scheduler.StepLR(step_size=10, gamma=0.5) stepped after every step.
    static_cast<typename Optimizer::Options&>(opt.param_groups()[0].options())
        .lr(std::pow(0.5, static_cast<double>(t / 10)));
    const torch::Tensor loss = opt.step([&] {
      opt.zero_grad();
      auto l = loss_of();
      l.backward();
      return l;
    });
    losses.push_back(loss.item<double>());
    if (t % 5 == 4) {
      torch::NoGradGuard no_grad;
      const torch::Tensor validation = loss_of();
      opt.report_validation(validation.item<double>());
    }
  }
  std::ofstream file(out, std::ios::binary);
  file.write(reinterpret_cast<const char*>(losses.data()),
             static_cast<std::streamsize>(losses.size() * sizeof(double)));
  for (const auto& p : params) {
    const auto flat = p.detach().contiguous();
    file.write(reinterpret_cast<const char*>(flat.data_ptr<float>()),
               static_cast<std::streamsize>(flat.numel() * sizeof(float)));
  }
  return file ? 0 : 1;
}

int fashion(int64_t train, int64_t test, int64_t steps, int64_t batch, int64_t hidden,
            int64_t seed) {
  const auto data = flt::metatrain::data::fashion_mnist(train, test);
  torch::manual_seed(seed);
  auto params = leaves({torch::randn({hidden, 784}) / std::sqrt(784.0), torch::zeros({hidden}),
                        torch::randn({10, hidden}) / std::sqrt(static_cast<double>(hidden)),
                        torch::zeros({10})});
  fo::Mnemosyne opt(params, fo::MnemosyneOptions(1.0).total_steps(steps));
  auto logits = [&](const torch::Tensor& images) {
    const auto h = F::relu(F::linear(images.flatten(1), params[0], params[1]));
    return F::linear(h, params[2], params[3]);
  };
  const int64_t n = data.train_x.size(0);
  for (int64_t t = 0; t < steps; ++t) {
    const auto index = torch::arange(t * batch, (t + 1) * batch) % n;
    opt.zero_grad();
    F::cross_entropy(logits(data.train_x.index_select(0, index)),
                     data.train_y.index_select(0, index))
        .backward();
    opt.step();
  }
  torch::NoGradGuard no_grad;
  std::printf("%.9g\n", F::cross_entropy(logits(data.test_x), data.test_y).item<double>());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // One thread: the Python side runs with one too, so both sum in the same order.
  at::set_num_threads(1);
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.size() == 5 && args[0] == "trajectory" && args[2] == "coordinate-memory")
      return trajectory<fo::CoordinateMnemosyne>(args[1], std::stoll(args[3]), std::stoll(args[4]));
    if (args.size() == 5 && args[0] == "trajectory" && args[2] == "tensor-schedule")
      return trajectory<fo::ScheduleMnemosyne>(args[1], std::stoll(args[3]), std::stoll(args[4]));
    if (args.size() == 7 && args[0] == "fashion")
      return fashion(std::stoll(args[1]), std::stoll(args[2]), std::stoll(args[3]),
                     std::stoll(args[4]), std::stoll(args[5]), std::stoll(args[6]));
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  std::cerr << "usage: flt_python_reference trajectory OUT DESIGN STEPS SEED  (DESIGN: "
               "coordinate-memory or "
               "tensor-schedule)\n"
               "       flt_python_reference fashion TRAIN TEST STEPS BATCH HIDDEN SEED\n";
  return 2;
}
