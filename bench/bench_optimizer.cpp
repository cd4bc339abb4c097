// Optimizer step time: flt::optim::Mnemosyne (each memory kind) vs torch::optim::Adam and SGD on
// an MLP with about 1M parameters (gradients fixed, so only the optimizer's step is timed).
//   build/bench/bench_optimizer
#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>

#include "bench_util.h"
#include "flt/optim/mnemosyne.h"

namespace fo = flt::optim;

namespace {

// Two 1000x500 layers and biases: 1,001,500 parameters (the Arg is the parameter count in
// thousands).
std::vector<torch::Tensor> mlp_parameters() {
  torch::manual_seed(0);
  std::vector<torch::Tensor> params = {torch::randn({1000, 500}), torch::randn({1000}),
                                       torch::randn({500, 1000}), torch::randn({500})};
  for (auto& p : params) {
    p.requires_grad_(true);
    p.mutable_grad() = torch::randn_like(p);
  }
  return params;
}

template <typename MakeOptimizer>
void run(benchmark::State& state, MakeOptimizer make) {
  auto params = mlp_parameters();
  auto optimizer = make(params);
  for (auto _ : state) optimizer->step();
  int64_t count = 0;
  for (const auto& p : params) count += p.numel();
  state.counters["params"] = static_cast<double>(count);
}

auto adam = [](std::vector<torch::Tensor> p) { return std::make_unique<torch::optim::Adam>(p); };
auto sgd = [](std::vector<torch::Tensor> p) {
  return std::make_unique<torch::optim::SGD>(p, torch::optim::SGDOptions(0.01).momentum(0.9));
};
auto mnemosyne = [](fo::Memory memory) {
  return [memory](std::vector<torch::Tensor> p) {
    return std::make_unique<fo::Mnemosyne>(
        p, fo::MnemosyneOptions(),
        fo::LearnedOptimizerModel(fo::LearnedOptimizerModelOptions().memory(memory)));
  };
};

void config(benchmark::internal::Benchmark* b) {
  b->Arg(1000)->Unit(benchmark::kMillisecond)->MinTime(1.0);
}

}  // namespace

BENCHMARK_CAPTURE(run, step / adam, adam)->Apply(config);
BENCHMARK_CAPTURE(run, step / sgd_momentum, sgd)->Apply(config);
BENCHMARK_CAPTURE(run, step / mnemosyne_flt, mnemosyne(fo::Memory::kFLT))->Apply(config);
BENCHMARK_CAPTURE(run, step / mnemosyne_performer, mnemosyne(fo::Memory::kPerformer))
    ->Apply(config);
BENCHMARK_CAPTURE(run, step / mnemosyne_none, mnemosyne(fo::Memory::kNone))->Apply(config);
BENCHMARK_CAPTURE(run, step / mnemosyne_lstm, mnemosyne(fo::Memory::kLSTM))->Apply(config);

int main(int argc, char** argv) {
  return flt::bench::run_benchmarks(argc, argv, "adam");
}
