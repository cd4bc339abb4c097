// Exact softmax vs linear attention, forward and forward+backward, B=1, H=8, D=64.
//   build/bench/bench_attention [--benchmark_filter=...]
#include <torch/types.h>

#include <algorithm>

#include "bench_util.h"
#include "flt/attention/linear.h"
#include "flt/attention/softmax.h"

namespace {

constexpr int64_t kBatch = 1, kHeads = 8, kDim = 64;

template <typename Attention>
void run(benchmark::State& state, Attention attention, bool backward) {
  const int64_t length = state.range(0);
  torch::manual_seed(0);
  auto q = torch::randn({kBatch, kHeads, length, kDim}).requires_grad_(backward);
  auto k = torch::randn({kBatch, kHeads, length, kDim}).requires_grad_(backward);
  auto v = torch::randn({kBatch, kHeads, length, kDim}).requires_grad_(backward);
  for (auto _ : state) {
    if (backward) {
      attention(q, k, v).sum().backward();
    } else {
      torch::NoGradGuard no_grad;
      benchmark::DoNotOptimize(attention(q, k, v));
    }
  }
  state.SetItemsProcessed(state.iterations() * length);
}

auto softmax = [](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  return flt::attention::softmax_attention(q, k, v);
};
auto linear = [](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  return flt::attention::linear_attention(q, k, v);
};
auto linear_causal = [](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  return flt::attention::linear_attention(q, k, v, /*causal=*/true);
};
auto softmax_causal = [](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  return flt::attention::softmax_attention(q, k, v, /*causal=*/true);
};

void lengths(benchmark::internal::Benchmark* b) {
  for (int64_t length : {256, 512, 1024, 2048, 4096}) b->Arg(length);
  b->Unit(benchmark::kMillisecond)->MinTime(0.2);
}

}  // namespace

BENCHMARK_CAPTURE(run, forward / softmax, softmax, false)->Apply(lengths);
BENCHMARK_CAPTURE(run, forward / linear, linear, false)->Apply(lengths);
BENCHMARK_CAPTURE(run, forward_causal / softmax, softmax_causal, false)->Apply(lengths);
BENCHMARK_CAPTURE(run, forward_causal / linear, linear_causal, false)->Apply(lengths);
BENCHMARK_CAPTURE(run, fwd_bwd / softmax, softmax, true)->Apply(lengths);
BENCHMARK_CAPTURE(run, fwd_bwd / linear, linear, true)->Apply(lengths);
BENCHMARK_CAPTURE(run, fwd_bwd_causal / softmax, softmax_causal, true)->Apply(lengths);
BENCHMARK_CAPTURE(run, fwd_bwd_causal / linear, linear_causal, true)->Apply(lengths);

int main(int argc, char** argv) {
  return flt::bench::run_benchmarks(argc, argv, "softmax");
}
