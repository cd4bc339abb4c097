#pragma once
// Shared by the benchmark programs: reporters that keep results for ratio tables measured in the
// same run (CollectingReporter for custom tables, RatioReporter for the standard
// "<family>/<variant>/L" layout), and the machine's measured FMA throughput (the physical limit of
// arithmetic-bound kernels).

#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "flt/detail/cpu_clones.h"  // FLT_CLONES: the kernels' own AVX2/FMA clone and baseline
#include "flt/runtime.h"

namespace flt::bench {

struct Result {
  double ms = 0;                           ///< real time per iteration
  std::map<std::string, double> counters;  ///< e.g. peak_MB
};

/// Console output as usual, and every benchmark's fastest repetition kept by name for the tables
/// printed after the run (with --benchmark_repetitions=N the minimum filters out interference
/// from other processes on a shared machine); every repetition is kept too, for tables of medians.
class CollectingReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& run : runs) {
      if (run.run_type != Run::RT_Iteration || run.error_occurred) continue;
      Result r;
      r.ms = run.GetAdjustedRealTime() * benchmark::GetTimeUnitMultiplier(benchmark::kMillisecond) /
             benchmark::GetTimeUnitMultiplier(run.time_unit);
      for (const auto& [name, counter] : run.counters) r.counters[name] = counter.value;
      const std::string key = run.run_name.function_name;  // registered name, no /real_time
      repetitions[key].push_back(r);
      const auto it = results.find(key);
      if (it == results.end() || r.ms < it->second.ms) results[key] = r;
    }
    ConsoleReporter::ReportRuns(runs);
  }
  const Result* find(const std::string& name) const {
    const auto it = results.find(name);
    return it == results.end() ? nullptr : &it->second;
  }
  /// Every repetition of `name` (empty when it did not run).
  const std::vector<Result>& all(const std::string& name) const {
    static const std::vector<Result> none;
    const auto it = repetitions.find(name);
    return it == repetitions.end() ? none : it->second;
  }
  std::map<std::string, Result> results;
  std::map<std::string, std::vector<Result>> repetitions;
};

FLT_CLONES inline float fma_probe(long rounds, float a, float b) {
  // 128 independent accumulators: 16 AVX2 registers of chained a * x + b, enough to fill both FMA
  // pipes; the result is returned so nothing is optimised away.
  alignas(64) float acc[128];
  for (int i = 0; i < 128; ++i) acc[i] = 1.0f + 1e-3f * i;
  for (long r = 0; r < rounds; ++r) {
#pragma omp simd
    for (int i = 0; i < 128; ++i) acc[i] = acc[i] * a + b;
  }
  float s = 0;
  for (int i = 0; i < 128; ++i) s += acc[i];
  return s;
}

/// Float fused multiply-adds per second on `threads` threads (a * x + b chains, all cores busy).
inline double measure_fma_per_second(int threads) {
  const long rounds = 2000000;
  volatile float sink = 0;
  fma_probe(rounds / 10, 0.999999f, 1e-6f);  // warm-up, frequency ramp
  const auto start = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads)
  { sink = sink + fma_probe(rounds, 0.999999f, 1e-6f); }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return 128.0 * rounds * threads / seconds;
}

/// Wall-clock seconds of one call of `fn`.
inline double seconds_of(const std::function<void()>& fn) {
  const auto start = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// Bytes per second written by memset into a kept 64 MB buffer and into freshly allocated ones
/// (malloc, memset, free each round): blocks that large come from mmap and go back to the kernel,
/// so the second pays a page fault per 4 KB page. On a VM where faults are costly the gap is wide,
/// and operations that allocate big temporaries (LibTorch's Adam, the attention forwards) time
/// slower and noisier there than the arithmetic says (docs/benchmarks.md).
inline std::pair<double, double> measure_write_bandwidth() {
  constexpr size_t kBytes = size_t{64} << 20;
  constexpr int kRounds = 5;
  const auto best_of = [](const std::function<void()>& body) {
    double best = 1e30;
    for (int r = 0; r < kRounds; ++r) best = std::min(best, seconds_of(body));
    return best;
  };
  std::vector<char> kept(kBytes, 1);
  const double reused = best_of([&] {
    std::memset(kept.data(), 2, kBytes);
    benchmark::DoNotOptimize(kept.data());
  });
  bool allocated = true;
  const double fresh = best_of([&] {
    char* block = static_cast<char*>(std::malloc(kBytes));
    if (block == nullptr) {
      allocated = false;
      return;
    }
    std::memset(block, 3, kBytes);
    benchmark::DoNotOptimize(block);
    std::free(block);
  });
  return {kBytes / reused, allocated ? kBytes / fresh : std::nan("")};
}

/// The machine line every benchmark program prints first: the runtime summary and the write
/// bandwidth into reused and into fresh memory.
inline std::string machine_line(const flt::RuntimeInfo& info) {
  const auto [reused, fresh] = measure_write_bandwidth();
  char memory[160];
  std::snprintf(memory, sizeof memory,
                " | memset 64 MB: reused %.1f GB/s, fresh pages %.2f GB/s (ratio %.1f)",
                reused / 1e9, fresh / 1e9, reused / fresh);
  return flt::runtime_summary(info) + memory;
}

class RatioReporter : public benchmark::ConsoleReporter {
 public:
  explicit RatioReporter(std::string baseline) : baseline_(std::move(baseline)) {}

  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const auto& run : runs) {
      if (run.run_type != Run::RT_Iteration && run.aggregate_name != "median") continue;
      // "[function/]<family>/<variant>": BENCHMARK_CAPTURE prefixes the function's name.
      const std::string name = run.run_name.function_name;
      const auto last = name.rfind('/');
      if (last == std::string::npos || last == 0) continue;
      const auto before = name.rfind('/', last - 1);
      // Trimmed: BENCHMARK_CAPTURE(run, step / adam, ...) names the variant " adam".
      const std::string family =
          trimmed(name.substr(before == std::string::npos ? 0 : before + 1,
                              last - (before == std::string::npos ? 0 : before + 1)));
      const std::string variant = trimmed(name.substr(last + 1));
      table_[family][run.run_name.args][variant] = run.GetAdjustedRealTime();  // ms below
      auto& order = variants_[family];
      if (std::find(order.begin(), order.end(), variant) == order.end()) order.push_back(variant);
    }
  }

  void Finalize() override {
    ConsoleReporter::Finalize();
    for (const auto& [family, rows] : table_) {
      const auto& variants = variants_[family];
      std::printf("\n%s: time in ms, and ratio to %s (same run)\n%-8s", family.c_str(),
                  baseline_.c_str(), "L");
      for (const auto& v : variants) std::printf(" %12s %8s", v.c_str(), "ratio");
      std::printf("\n");
      std::vector<std::pair<long, const std::map<std::string, double>*>> ordered;
      for (const auto& [length, cells] : rows) ordered.emplace_back(std::stol(length), &cells);
      std::sort(ordered.begin(), ordered.end());
      for (const auto& [length, cells] : ordered) {
        std::printf("%-8ld", length);
        const auto base = cells->find(baseline_);
        for (const auto& v : variants) {
          const auto it = cells->find(v);
          if (it == cells->end()) {
            std::printf(" %12s %8s", "-", "-");
          } else if (base == cells->end()) {
            std::printf(" %12.3f %8s", it->second, "-");
          } else {
            std::printf(" %12.3f %8.2f", it->second, it->second / base->second);
          }
        }
        std::printf("\n");
      }
    }
    std::fflush(stdout);
  }

 private:
  static std::string trimmed(const std::string& text) {
    const auto first = text.find_first_not_of(' '), last = text.find_last_not_of(' ');
    return first == std::string::npos ? std::string() : text.substr(first, last - first + 1);
  }
  std::string baseline_;
  std::map<std::string, std::vector<std::string>> variants_;  // per family, in run order
  std::map<std::string, std::map<std::string, std::map<std::string, double>>> table_;
};

/// Registers `fn(state)` as `name`, timed in real milliseconds for at least 0.3 s: the benchmarks
/// of the programs that print their own tables (run_collecting).
template <typename Fn>
void register_ms(const std::string& name, Fn&& fn) {
  benchmark::RegisterBenchmark(name.c_str(), std::forward<Fn>(fn))
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime()
      ->MinTime(0.3);
}

/// The end of main() for a program with its own tables: the registered benchmarks (the command
/// line filters them) into a CollectingReporter, then `print_tables` from it.
inline int run_collecting(int argc, char** argv,
                          const std::function<void(const CollectingReporter&)>& print_tables) {
  benchmark::Initialize(&argc, argv);
  CollectingReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  print_tables(reporter);
  benchmark::Shutdown();
  return 0;
}

/// main() body for a benchmark program: runtime set-up, machine line, benchmarks, ratio tables.
inline int run_benchmarks(int argc, char** argv, const std::string& baseline) {
  const auto& info = flt::init();
  std::printf("machine: %s\n", machine_line(info).c_str());
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  RatioReporter reporter(baseline);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}

}  // namespace flt::bench
