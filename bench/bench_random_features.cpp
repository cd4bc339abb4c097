// Random-feature attention (Performer, FLT, SchoenbAt) against exact softmax: forward and
// forward+backward time and peak memory for L = 256 .. 8192, B = 1, H = 8, D = 64, m = 64, r = 32,
// float32, non-causal. After the runs it prints, from the same run, each variant's time and memory
// relative to softmax, the crossover length, and FLT / Performer at L = 4096.
//
// Peak memory: LibTorch 1.13's CPU allocator keeps no statistics, so this program installs a counting
// wrapper around it (c10::SetCPUAllocator) and reports, for one untimed call, the largest number of
// bytes live at once above what was live before the call (inputs excluded, autograd buffers included).
#include <benchmark/benchmark.h>
#include <c10/core/CPUAllocator.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <string>

#include "flt/flt.h"

namespace fa = flt::attention;

namespace {

// ---- counting allocator ----------------------------------------------------------------------

class CountingAllocator final : public c10::Allocator {
 public:
  explicit CountingAllocator(c10::Allocator* base) : base_(base) {}

  c10::DataPtr allocate(size_t bytes) const override {
    auto inner = base_->allocate(bytes);
    void* data = inner.get();
    const auto device = inner.device();
    auto* context = new Context{std::move(inner), bytes, this};
    const int64_t now = live_.fetch_add(static_cast<int64_t>(bytes)) + static_cast<int64_t>(bytes);
    int64_t peak = peak_.load();
    while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
    }
    return {data, context, &CountingAllocator::release, device};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }

  int64_t live() const { return live_.load(); }
  int64_t peak() const { return peak_.load(); }
  void reset_peak() { peak_.store(live_.load()); }

 private:
  struct Context {
    c10::DataPtr inner;  // frees through the base allocator when destroyed
    size_t bytes;
    const CountingAllocator* owner;
  };
  static void release(void* ptr) {
    auto* context = static_cast<Context*>(ptr);
    context->owner->live_.fetch_sub(static_cast<int64_t>(context->bytes));
    delete context;
  }

  c10::Allocator* base_;
  mutable std::atomic<int64_t> live_{0};
  mutable std::atomic<int64_t> peak_{0};
};

CountingAllocator* counting_allocator() {
  static CountingAllocator* allocator = new CountingAllocator(c10::GetCPUAllocator());
  return allocator;
}

// ---- the variants --------------------------------------------------------------------------------

constexpr int64_t kBatch = 1, kHeads = 8, kDim = 64, kFeatures = 64, kRpeFeatures = 32;

std::shared_ptr<torch::nn::Module> make_variant(const std::string& name, fa::Attention** attention) {
  fa::AttentionOptions options = fa::SoftmaxAttentionOptions();
  if (name == "performer") options = fa::PerformerAttentionOptions().features(kFeatures);
  if (name == "flt") options = fa::FLTAttentionOptions().features(kFeatures).rpe_features(kRpeFeatures);
  if (name == "schoenbat") options = fa::SchoenbAttentionOptions().features(kFeatures);
  auto handle = fa::make_attention(options, kHeads, kDim);
  *attention = handle.attention;
  return handle.module;
}

// One call: forward (no autograd graph) or forward + backward of sum(out).
void run_once(fa::Attention& attention, const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
              bool backward) {
  if (!backward) {
    torch::NoGradGuard no_grad;
    benchmark::DoNotOptimize(attention.forward(q, k, v).data_ptr());
    return;
  }
  attention.forward(q, k, v).sum().backward();
  q.mutable_grad() = torch::Tensor();
  k.mutable_grad() = torch::Tensor();
  v.mutable_grad() = torch::Tensor();
}

void bench_attention(benchmark::State& state, const std::string& name, bool backward) {
  const int64_t length = state.range(0);
  torch::manual_seed(0);
  fa::Attention* attention = nullptr;
  auto module = make_variant(name, &attention);
  auto q = torch::randn({kBatch, kHeads, length, kDim}).requires_grad_(backward);
  auto k = torch::randn({kBatch, kHeads, length, kDim}).requires_grad_(backward);
  auto v = torch::randn({kBatch, kHeads, length, kDim}).requires_grad_(backward);
  // Untimed call: peak memory above the live baseline.
  auto* counter = counting_allocator();
  const int64_t before = counter->live();
  counter->reset_peak();
  run_once(*attention, q, k, v, backward);
  const double peak_mb = static_cast<double>(counter->peak() - before) / (1024.0 * 1024.0);
  for (auto _ : state) run_once(*attention, q, k, v, backward);
  state.counters["peak_MB"] = peak_mb;
}

// ---- summary -----------------------------------------------------------------------------------

struct Result {
  double ms = 0.0;
  double peak_mb = 0.0;
};
std::map<std::string, Result> g_results;  // key: "name/mode/L"

class CapturingReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& run : runs) {
      if (run.run_type != Run::RT_Iteration) continue;
      Result result;
      result.ms = run.GetAdjustedRealTime();  // in the run's time unit (ms, set below)
      const auto it = run.counters.find("peak_MB");
      if (it != run.counters.end()) result.peak_mb = it->second.value;
      g_results[run.run_name.function_name + "/" + run.run_name.args] = result;
    }
    ConsoleReporter::ReportRuns(runs);
  }
};

const std::vector<int64_t> kLengths = {256, 512, 1024, 2048, 4096, 8192};
const std::vector<std::string> kVariants = {"softmax", "performer", "flt", "schoenbat"};

std::string key(const std::string& name, const std::string& mode, int64_t length) {
  return name + "/" + mode + "/" + std::to_string(length);
}

void print_summary() {
  for (const std::string mode : {"fwd", "fwd+bwd"}) {
    std::printf("\n== %s: time ms (ratio to softmax) | peak MB (ratio to softmax)\n", mode.c_str());
    std::printf("%6s", "L");
    for (const auto& name : kVariants) std::printf(" | %-30s", name.c_str());
    std::printf("\n");
    for (const auto length : kLengths) {
      if (!g_results.count(key("softmax", mode, length))) continue;  // filtered out
      std::printf("%6lld", static_cast<long long>(length));
      const auto base = g_results[key("softmax", mode, length)];
      for (const auto& name : kVariants) {
        const auto r = g_results[key(name, mode, length)];
        std::printf(" | %8.2f (%5.2fx) %7.1f (%5.2fx)", r.ms, r.ms / base.ms, r.peak_mb, r.peak_mb / base.peak_mb);
      }
      std::printf("\n");
    }
    for (const auto& name : kVariants) {
      if (name == "softmax") continue;
      // Crossover: the smallest measured L from which the variant is faster at every larger L.
      int64_t crossover = -1;
      for (auto it = kLengths.rbegin(); it != kLengths.rend(); ++it) {
        if (!g_results.count(key(name, mode, *it)) || !g_results.count(key("softmax", mode, *it))) continue;
        if (g_results[key(name, mode, *it)].ms < g_results[key("softmax", mode, *it)].ms) {
          crossover = *it;
        } else {
          break;
        }
      }
      if (crossover > 0) {
        std::printf("%s %s: faster than softmax from L = %lld on\n", name.c_str(), mode.c_str(),
                    static_cast<long long>(crossover));
      } else {
        std::printf("%s %s: not faster than softmax at the longest measured L\n", name.c_str(), mode.c_str());
      }
    }
    if (!g_results.count(key("flt", mode, 4096)) || !g_results.count(key("performer", mode, 4096))) continue;
    const auto flt = g_results[key("flt", mode, 4096)], performer = g_results[key("performer", mode, 4096)];
    std::printf("FLT / Performer at L = 4096 (%s): time %.2fx, peak memory %.2fx\n", mode.c_str(),
                flt.ms / performer.ms, flt.peak_mb / performer.peak_mb);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const auto& info = flt::init();
  std::printf("%s\n", flt::runtime_summary(info).c_str());
  c10::SetCPUAllocator(counting_allocator(), /*priority=*/100);
  for (const auto& name : kVariants) {
    for (const std::string mode : {"fwd", "fwd+bwd"}) {
      auto* b = benchmark::RegisterBenchmark((name + "/" + mode).c_str(), bench_attention, name, mode != "fwd");
      for (const auto length : kLengths) b->Arg(length);
      b->Unit(benchmark::kMillisecond)->MinTime(0.3)->UseRealTime();
    }
  }
  benchmark::Initialize(&argc, argv);
  CapturingReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  print_summary();
  benchmark::Shutdown();
  return 0;
}
