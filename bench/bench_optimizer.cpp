// Optimizer step time: flt::optim::CoordinateMnemosyne (each memory kind) vs torch::optim::Adam and
// SGD on an MLP with about 1M parameters and on a small model of 30 tensors (gradients fixed, so
// only the optimizer's step is timed). The mnemosyne_KIND rows time the shipped rules;
// mnemosyne_flt_hiddenH the FLT rule's shape with a head of width H; schedule_KIND
// ScheduleMnemosyne (untrained, its default; schedule_KIND_trained: a trained one's cost).
//   build/bench/bench_optimizer
#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>

#include "bench_util.h"
#include "flt/optim/mnemosyne.h"

namespace fo = flt::optim;

namespace {

// The Arg picks the model (its parameter count in thousands):
//      0: a logistic regression of 13 features and 3 classes, 42 parameters in 2 tensors (the
//         fixed cost of a step, which dominates the small tabular runs of the real suite);
//   1000: two 1000x500 layers and biases, 1,001,500 parameters (the per-coordinate cost);
//     32: 15 weights of 32x64 and 15 biases of 64, 31,680 parameters in 30 tensors, shaped like
//         the small models of the real suite (a 2-layer TransformerLM has 26 tensors): the
//         per-tensor cost, which dominates there.
std::vector<torch::Tensor> model_parameters(int64_t thousands) {
  torch::manual_seed(0);
  std::vector<torch::Tensor> params;
  if (thousands == 0) {  // a logistic regression of 13 features and 3 classes (wine-logreg)
    params = {torch::randn({13, 3}) * 0.1, torch::zeros({3})};
  } else if (thousands == 1000) {
    params = {torch::randn({1000, 500}), torch::randn({1000}), torch::randn({500, 1000}),
              torch::randn({500})};
  } else {
    for (int i = 0; i < 15; ++i) {
      params.push_back(torch::randn({32, 64}) * 0.1);
      params.push_back(torch::randn({64}) * 0.1);
    }
  }
  for (auto& p : params) {
    p.requires_grad_(true);
    p.mutable_grad() = torch::randn_like(p);
  }
  return params;
}

template <typename MakeOptimizer>
void run(benchmark::State& state, MakeOptimizer make) {
  auto params = model_parameters(state.range(0));
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
// The shipped rule of a memory kind: the shape users get (its weights do not change the cost).
auto mnemosyne = [](fo::Memory memory) {
  return [memory](std::vector<torch::Tensor> p) {
    return std::make_unique<fo::CoordinateMnemosyne>(
        p, fo::CoordinateMnemosyneOptions().memory(memory));
  };
};
// The FLT rule with another head width: the cost of the shape alone (untrained weights).
auto mnemosyne_flt_hidden = [](int64_t hidden) {
  return [hidden](std::vector<torch::Tensor> p) {
    return std::make_unique<fo::CoordinateMnemosyne>(
        p, fo::CoordinateMnemosyneOptions(),
        fo::LearnedOptimizerModel(fo::LearnedOptimizerModelOptions().hidden(hidden)));
  };
};

void config(benchmark::internal::Benchmark* b) {
  b->Arg(0)->Arg(32)->Arg(1000)->Unit(benchmark::kMillisecond)->MinTime(1.0);
}

}  // namespace

BENCHMARK_CAPTURE(run, step / adam, adam)->Apply(config);
BENCHMARK_CAPTURE(run, step / sgd_momentum, sgd)->Apply(config);
BENCHMARK_CAPTURE(run, step / mnemosyne_flt, mnemosyne(fo::Memory::kFLT))->Apply(config);
BENCHMARK_CAPTURE(run, step / mnemosyne_performer, mnemosyne(fo::Memory::kPerformer))
    ->Apply(config);
BENCHMARK_CAPTURE(run, step / mnemosyne_none, mnemosyne(fo::Memory::kNone))->Apply(config);
BENCHMARK_CAPTURE(run, step / mnemosyne_lstm, mnemosyne(fo::Memory::kLSTM))->Apply(config);
// The second design (learned_schedule.h): its default, the untrained schedule, whose head cannot
// read the memory, so the memory is not stepped; and a trained one's cost (the same shape with a
// non-zero head: the memory steps every step).
auto schedule = [](fo::Memory memory, bool trained) {
  return [memory, trained](std::vector<torch::Tensor> p) {
    fo::LearnedSchedule rule(fo::LearnedScheduleOptions().memory(memory));
    if (trained) {
      torch::NoGradGuard no_grad;
      rule->head_out->weight.normal_(0.0, 0.01);
    }
    return std::make_unique<fo::ScheduleMnemosyne>(p, fo::ScheduleMnemosyneOptions(), rule);
  };
};
BENCHMARK_CAPTURE(run, step / schedule_flt, schedule(fo::Memory::kFLT, false))->Apply(config);
BENCHMARK_CAPTURE(run, step / schedule_flt_trained, schedule(fo::Memory::kFLT, true))
    ->Apply(config);
BENCHMARK_CAPTURE(run, step / schedule_none, schedule(fo::Memory::kNone, false))->Apply(config);
BENCHMARK_CAPTURE(run, step / schedule_none_trained, schedule(fo::Memory::kNone, true))
    ->Apply(config);
BENCHMARK_CAPTURE(run, step / schedule_ema_trained, schedule(fo::Memory::kEMA, true))
    ->Apply(config);
BENCHMARK_CAPTURE(run, step / mnemosyne_flt_hidden32, mnemosyne_flt_hidden(32))->Apply(config);
BENCHMARK_CAPTURE(run, step / mnemosyne_flt_hidden16, mnemosyne_flt_hidden(16))->Apply(config);

int main(int argc, char** argv) {
  return flt::bench::run_benchmarks(argc, argv, "adam");
}
