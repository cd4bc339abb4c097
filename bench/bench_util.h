#pragma once
// Shared by the benchmark programs: a reporter that keeps every result for the ratio tables, and
// the machine's measured FMA throughput (the physical limit of arithmetic-bound kernels).

#include <benchmark/benchmark.h>
#include <omp.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace flt::bench {

struct Result {
  double ms = 0;                          ///< real time per iteration
  std::map<std::string, double> counters;  ///< e.g. peak_MB
};

/// Console output as usual, and every benchmark's fastest repetition kept by name for the tables
/// printed after the run (with --benchmark_repetitions=N the minimum filters out interference
/// from other processes on a shared machine).
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
      const auto it = results.find(key);
      if (it == results.end() || r.ms < it->second.ms) results[key] = r;
    }
    ConsoleReporter::ReportRuns(runs);
  }
  const Result* find(const std::string& name) const {
    const auto it = results.find(name);
    return it == results.end() ? nullptr : &it->second;
  }
  std::map<std::string, Result> results;
};

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("arch=x86-64-v3", "default")))
#endif
inline float fma_probe(long rounds, float a, float b) {
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
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return 128.0 * rounds * threads / seconds;
}

}  // namespace flt::bench
