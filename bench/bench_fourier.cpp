// Fourier attention: fused CPU kernel vs the composite LibTorch reference vs exact softmax
// attention, forward and forward + backward, B = 1, H = 8, D in {16, 64}, L in {256 .. 4096},
// float32, non-causal; peak CPU memory of each (counting allocator); pair-dimension evaluations per
// second against the machine's measured FMA throughput. Ratios are printed side by side after the
// run.
//
//   OMP_WAIT_POLICY=PASSIVE ./build/bench/bench_fourier [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <cstdio>
#include <functional>
#include <iostream>
#include <optional>
#include <string>

#include "bench_util.h"
#include "flt/attention/fourier.h"
#include "flt/attention/softmax.h"
#include "flt/detail/allocation_counter.h"
#include "flt/kernels/fourier_attention.h"
#include "flt/runtime.h"

namespace fa = flt::attention;
namespace fk = flt::kernels;

namespace {

constexpr int64_t kBatch = 1, kHeads = 8;
const int64_t kDims[] = {16, 64};
const int64_t kLengths[] = {256, 512, 1024, 2048, 4096};
// The composite builds several (B, H, L, L, D) float tensors (x, s, logs, their gradients):
// beyond L^2 D = 512^2 * 64 it needs more than ~8 GB, so it is skipped there.
constexpr double kCompositeMaxL2D = 512.0 * 512.0 * 64.0;

enum class Impl { kFused, kComposite, kSoftmax };
const char* impl_name(Impl impl) {
  return impl == Impl::kFused ? "fused" : impl == Impl::kComposite ? "composite" : "softmax";
}

std::string bench_name(Impl impl, bool backward, int64_t dim, int64_t length) {
  return std::string("fourier/") + impl_name(impl) + (backward ? "/fwd+bwd" : "/fwd") +
         "/D:" + std::to_string(dim) + "/L:" + std::to_string(length);
}

void run_attention(benchmark::State& state, Impl impl, bool backward, int64_t dim, int64_t length) {
  torch::manual_seed(1);
  const auto q0 = torch::randn({kBatch, kHeads, length, dim});
  const auto k0 = torch::randn({kBatch, kHeads, length, dim});
  const auto v0 = torch::randn({kBatch, kHeads, length, dim});
  const auto grad = torch::randn({kBatch, kHeads, length, dim});
  auto q = q0.clone().requires_grad_(backward), k = k0.clone().requires_grad_(backward);
  auto v = v0.clone().requires_grad_(backward);
  auto R = torch::full({1}, 2.0).requires_grad_(backward);
  const auto once = [&] {
    torch::Tensor out;
    {
      std::optional<torch::NoGradGuard> no_grad;
      if (!backward) no_grad.emplace();
      switch (impl) {
        case Impl::kFused: out = fa::fourier_attention(q, k, v, R); break;
        case Impl::kComposite:
          out = fk::fourier_attention_composite(q, k, v,
                                                fa::fourier_r_per_head_dim("bench", R, kHeads, dim),
                                                4, fk::FourierPhi::kPower, false);
          break;
        case Impl::kSoftmax: out = fa::softmax_attention(q, k, v); break;
      }
    }
    if (backward) {
      out.backward(grad);
      for (auto* t : {&q, &k, &v, &R}) t->mutable_grad() = torch::Tensor();
    }
    benchmark::DoNotOptimize(out.data_ptr());
  };
  const size_t peak = flt::peak_cpu_bytes_during(once);  // also the warm-up
  for (auto _ : state) once();
  state.counters["peak_MB"] = static_cast<double>(peak) / (1 << 20);
}

void print_tables(const flt::bench::CollectingReporter& rep, double fma_per_second) {
  for (bool backward : {false, true}) {
    std::printf("\n%s, float32, B=1 H=8, non-causal (ms; ratios from the same run)\n",
                backward ? "forward+backward" : "forward");
    std::printf("%4s %5s | %9s %10s %9s | %9s %9s | %8s %8s %8s | %10s %8s\n", "D", "L", "fused",
                "composite", "softmax", "comp/fus", "fus/soft", "fus_MB", "comp_MB", "soft_MB",
                "Gpairdim/s", "FMA/pd");
    for (int64_t dim : kDims) {
      for (int64_t length : kLengths) {
        const auto* f = rep.find(bench_name(Impl::kFused, backward, dim, length));
        const auto* c = rep.find(bench_name(Impl::kComposite, backward, dim, length));
        const auto* s = rep.find(bench_name(Impl::kSoftmax, backward, dim, length));
        if (!f || !s) continue;
        const double pair_dims = double(kBatch * kHeads) * length * length * dim;
        const double rate = pair_dims / (f->ms * 1e-3);
        char comp[16] = "-", comp_ratio[16] = "-", comp_mb[16] = "-";
        if (c && c->ms > 0) {
          std::snprintf(comp, sizeof comp, "%.2f", c->ms);
          std::snprintf(comp_ratio, sizeof comp_ratio, "%.1fx", c->ms / f->ms);
          std::snprintf(comp_mb, sizeof comp_mb, "%.0f", c->counters.at("peak_MB"));
        }
        std::printf("%4ld %5ld | %9.2f %10s %9.2f | %9s %8.2fx | %8.1f %8s %8.1f | %10.2f %8.1f\n",
                    static_cast<long>(dim), static_cast<long>(length), f->ms, comp, s->ms,
                    comp_ratio, f->ms / s->ms, f->counters.at("peak_MB"), comp_mb,
                    s->counters.at("peak_MB"), rate / 1e9, fma_per_second / rate);
      }
    }
  }
  std::printf(
      "\nGpairdim/s: (query, key, dimension) triples per second of the fused kernel;\n"
      "FMA/pd: the machine's measured float FMA rate (%.1f G/s, all threads) divided by\n"
      "that rate, i.e. FMA-equivalents spent per pair-dimension (fwd+bwd counts the pair\n"
      "once, so it includes the backward's work).\n",
      fma_per_second / 1e9);
}

}  // namespace

int main(int argc, char** argv) {
  const auto& info = flt::init();
  std::cout << "machine: " << flt::bench::machine_line(info) << std::endl;
  const double fma = flt::bench::measure_fma_per_second(info.threads);
  std::printf("measured float FMA throughput: %.1f G FMA/s on %d threads\n", fma / 1e9,
              info.threads);
  for (int64_t dim : kDims) {
    for (int64_t length : kLengths) {
      for (bool backward : {false, true}) {
        for (Impl impl : {Impl::kFused, Impl::kComposite, Impl::kSoftmax}) {
          if (impl == Impl::kComposite && double(length) * length * dim > kCompositeMaxL2D)
            continue;
          flt::bench::register_ms(
              bench_name(impl, backward, dim, length),
              [=](benchmark::State& s) { run_attention(s, impl, backward, dim, length); });
        }
      }
    }
  }
  return flt::bench::run_collecting(
      argc, argv, [fma](const flt::bench::CollectingReporter& r) { print_tables(r, fma); });
}
