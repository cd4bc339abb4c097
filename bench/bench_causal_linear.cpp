// Causal linear attention (the numerator every feature-map variant uses): the fused scan kernel vs
// the chunked composite vs the textbook cumsum over the (L, M, Dv) prefix tensor, forward and
// forward + backward, B = 1, H = 8, M = Dv = 64, float32, L in {1024, 4096, 16384}; peak memory.
//
//   OMP_WAIT_POLICY=PASSIVE ./build/bench/bench_causal_linear [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <cstdio>
#include <iostream>
#include <optional>
#include <string>

#include "bench_util.h"
#include "flt/detail/allocation_counter.h"
#include "flt/kernels/linear_attention.h"
#include "flt/runtime.h"

namespace fk = flt::kernels;

namespace {

constexpr int64_t kBatch = 1, kHeads = 8, kFeatures = 64, kValues = 64;
const int64_t kLengths[] = {1024, 4096, 16384};
// The cumsum reference's (B, H, L, M, Dv) float tensor and its autograd copies: above this many
// prefix elements (4096 L: 0.5 GB per copy) it is skipped.
constexpr double kCumsumMaxElements = 8.0 * 4096 * 64 * 64;

enum class Impl { kFused, kComposite, kCumsum };
const char* impl_name(Impl impl) {
  return impl == Impl::kFused ? "fused" : impl == Impl::kComposite ? "chunked" : "cumsum";
}
std::string bench_name(Impl impl, bool backward, int64_t length) {
  return std::string("causal_linear/") + impl_name(impl) + (backward ? "/fwd+bwd" : "/fwd") +
         "/L:" + std::to_string(length);
}

// phi_q: (B, H, L, M)  phi_k: (B, H, L, M)  v: (B, H, L, Dv) -> (B, H, L, Dv)
torch::Tensor cumsum_reference(const torch::Tensor& phi_q, const torch::Tensor& phi_k,
                               const torch::Tensor& v) {
  const auto states = (phi_k.unsqueeze(-1) * v.unsqueeze(-2)).cumsum(2);
  return (phi_q.unsqueeze(-1) * states).sum(-2);
}

void run(benchmark::State& state, Impl impl, bool backward, int64_t length) {
  torch::manual_seed(1);
  auto q = torch::rand({kBatch, kHeads, length, kFeatures}).requires_grad_(backward);
  auto k = torch::rand({kBatch, kHeads, length, kFeatures}).requires_grad_(backward);
  auto v = torch::randn({kBatch, kHeads, length, kValues}).requires_grad_(backward);
  const auto grad = torch::randn({kBatch, kHeads, length, kValues});
  const auto once = [&] {
    torch::Tensor out;
    {
      std::optional<torch::NoGradGuard> no_grad;
      if (!backward) no_grad.emplace();
      out = impl == Impl::kFused       ? fk::linear_attention_numerator(q, k, v, true)
            : impl == Impl::kComposite ? fk::linear_attention_numerator_composite(q, k, v, true)
                                       : cumsum_reference(q, k, v);
    }
    if (backward) {
      out.backward(grad);
      for (auto* t : {&q, &k, &v}) t->mutable_grad() = torch::Tensor();
    }
    benchmark::DoNotOptimize(out.data_ptr());
  };
  const size_t peak = flt::peak_cpu_bytes_during(once);
  for (auto _ : state) once();
  state.counters["peak_MB"] = static_cast<double>(peak) / (1 << 20);
}

/// Fused against chunked and cumsum, forward and backward, at every length (one run).
void print_table(const flt::bench::CollectingReporter& reporter) {
  std::printf("\ncausal linear numerator, float32, B=1 H=8 M=Dv=64 (ms, MB; same run)\n");
  std::printf("%8s %6s | %9s %9s %9s | %9s %9s | %8s %8s %8s\n", "pass", "L", "fused", "chunked",
              "cumsum", "chk/fus", "cum/fus", "fus_MB", "chk_MB", "cum_MB");
  for (bool backward : {false, true}) {
    for (int64_t length : kLengths) {
      const auto* f = reporter.find(bench_name(Impl::kFused, backward, length));
      const auto* c = reporter.find(bench_name(Impl::kComposite, backward, length));
      const auto* s = reporter.find(bench_name(Impl::kCumsum, backward, length));
      if (!f || !c) continue;
      char cum[16] = "skipped", cum_ratio[16] = "-", cum_mb[16] = "-";
      if (s) {
        std::snprintf(cum, sizeof cum, "%.2f", s->ms);
        std::snprintf(cum_ratio, sizeof cum_ratio, "%.2fx", s->ms / f->ms);
        std::snprintf(cum_mb, sizeof cum_mb, "%.0f", s->counters.at("peak_MB"));
      }
      std::printf("%8s %6ld | %9.2f %9.2f %9s | %8.2fx %9s | %8.1f %8.1f %8s\n",
                  backward ? "fwd+bwd" : "fwd", static_cast<long>(length), f->ms, c->ms, cum,
                  c->ms / f->ms, cum_ratio, f->counters.at("peak_MB"), c->counters.at("peak_MB"),
                  cum_mb);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const auto& info = flt::init();
  std::cout << "machine: " << flt::bench::machine_line(info) << std::endl;
  for (int64_t length : kLengths) {
    for (bool backward : {false, true}) {
      for (Impl impl : {Impl::kFused, Impl::kComposite, Impl::kCumsum}) {
        const double prefix = double(kBatch * kHeads) * length * kFeatures * kValues;
        if (impl == Impl::kCumsum && prefix > kCumsumMaxElements) continue;
        flt::bench::register_ms(bench_name(impl, backward, length),
                                [=](benchmark::State& s) { run(s, impl, backward, length); });
      }
    }
  }
  return flt::bench::run_collecting(argc, argv, print_table);
}
