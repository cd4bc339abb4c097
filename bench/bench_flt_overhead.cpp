// FLT's time over Performer's, interleaved call by call: each round runs Performer, FLT and FLT
// with a signed spectrum (N1 != N2: the position block projected twice) once, so all three see the
// same interference on a shared machine; the minimum and the median over the rounds are printed
// with their ratios to Performer. B = 1, H = 8, D = 64, m = 64, r = 32, float32, non-causal.
//
//   build/bench/bench_flt_overhead [--length L] [--rounds N] [--backward]
//
// On a machine where page faults are costly (see the machine line), run it with glibc keeping freed
// memory (MALLOC_MMAP_THRESHOLD_=1000000000 MALLOC_TRIM_THRESHOLD_=1000000000) to compare the
// arithmetic rather than the allocator (docs/benchmarks.md). The last column,
// the median count of minor page faults per call, shows how much of a median is the allocator's.
#include <sys/resource.h>
#include <torch/types.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench_util.h"
#include "flt/detail/statistics.h"
#include "flt/flt.h"

namespace fa = flt::attention;

int main(int argc, char** argv) {
  int64_t length = 4096;
  int rounds = 21;
  bool backward = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--length" && i + 1 < argc) {
      length = std::atoll(argv[++i]);
    } else if (arg == "--rounds" && i + 1 < argc) {
      rounds = std::atoi(argv[++i]);
    } else if (arg == "--backward") {
      backward = true;
    } else {
      std::fprintf(stderr,
                   "bench_flt_overhead: unknown argument %s\n"
                   "usage: bench_flt_overhead [--length L] [--rounds N] [--backward]\n",
                   arg.c_str());
      return 2;
    }
  }
  if (length < 1 || rounds < 1) {
    std::fprintf(stderr, "bench_flt_overhead: --length and --rounds must be >= 1 (got %lld, %d)\n",
                 static_cast<long long>(length), rounds);
    return 2;
  }
  const auto& info = flt::init();
  std::printf("machine: %s\n", flt::bench::machine_line(info).c_str());
  torch::manual_seed(0);
  const auto flt_options = fa::FLTAttentionOptions().features(64).rpe_features(32);
  const std::vector<std::pair<std::string, fa::AttentionOptions>> variants = {
      {"performer", fa::PerformerAttentionOptions().features(64)},
      {"flt", flt_options},
      {"flt-signed", fa::FLTAttentionOptions(flt_options).rpe_weight(-1.0)}};
  std::vector<fa::AttentionHandle> handles;
  for (const auto& [name, options] : variants)
    handles.push_back(fa::make_attention(options, 8, 64));
  const auto q = torch::randn({1, 8, length, 64}).requires_grad_(backward);
  const auto k = torch::randn({1, 8, length, 64}).requires_grad_(backward);
  const auto v = torch::randn({1, 8, length, 64}).requires_grad_(backward);
  std::vector<std::vector<double>> ms(variants.size());
  // Minor page faults per call: on a VM where a fault is expensive they explain the gap between
  // the min and the median, and between this run and one with glibc keeping freed memory.
  std::vector<std::vector<double>> faults(variants.size());
  const auto minor_faults = [] {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return usage.ru_minflt;
  };
  for (int round = 0; round <= rounds; ++round) {  // round 0 warms up, untimed
    for (size_t i = 0; i < variants.size(); ++i) {
      const long faults_before = minor_faults();
      const auto start = std::chrono::steady_clock::now();
      if (backward) {
        handles[i].attention->forward(q, k, v, {}).sum().backward();
      } else {
        torch::NoGradGuard no_grad;
        handles[i].attention->forward(q, k, v, {});
      }
      const auto elapsed = std::chrono::steady_clock::now() - start;
      if (round > 0) {
        ms[i].push_back(std::chrono::duration<double, std::milli>(elapsed).count());
        faults[i].push_back(static_cast<double>(minor_faults() - faults_before));
      }
    }
  }
  using flt::detail::median;
  std::printf(
      "L = %lld, %s, %d interleaved rounds: ms min (median), ratio to performer, median minor page "
      "faults per call\n",
      static_cast<long long>(length), backward ? "forward+backward" : "forward", rounds);
  for (size_t i = 0; i < variants.size(); ++i) {
    const double least = *std::min_element(ms[i].begin(), ms[i].end());
    const double performer = *std::min_element(ms[0].begin(), ms[0].end());
    std::printf("  %-11s %8.2f (%8.2f)   %.2fx (%.2fx)   %6.0f faults\n", variants[i].first.c_str(),
                least, median(ms[i]), least / performer, median(ms[i]) / median(ms[0]),
                median(faults[i]));
  }
  return 0;
}
