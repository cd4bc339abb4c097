// One Mnemosyne step on the 1M-parameter model of bench_optimizer (two 1000x500 layers and their
// biases, fixed gradients), timed in C++: the baseline bench/bench_python_overhead.py sets the
// Python wrapper (fltlab.optim.Mnemosyne) beside. Prints the median of ROUNDS rounds of STEPS
// steps, in milliseconds per step.
//   build/bench/bench_mnemosyne_step [STEPS=50] [ROUNDS=5]
#include <ATen/ATen.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "flt/core.h"
#include "flt/detail/statistics.h"
#include "flt/optim/mnemosyne.h"

int main(int argc, char** argv) {
  flt::init(/*quiet=*/true);
  const int steps = argc > 1 ? std::stoi(argv[1]) : 50, rounds = argc > 2 ? std::stoi(argv[2]) : 5;
  at::manual_seed(0);
  std::vector<at::Tensor> params = {at::randn({1000, 500}), at::randn({1000}),
                                    at::randn({500, 1000}), at::randn({500})};
  for (auto& p : params) {
    p.requires_grad_(true);
    p.mutable_grad() = at::randn_like(p);
  }
  flt::optim::Mnemosyne opt(params);
  opt.step();  // the state is made at the first step
  std::vector<double> per_step;
  for (int r = 0; r < rounds; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (int s = 0; s < steps; ++s) opt.step();
    const std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - start;
    per_step.push_back(took.count() / steps);
  }
  std::printf("%.6f\n", flt::detail::median(per_step));
  return 0;
}
