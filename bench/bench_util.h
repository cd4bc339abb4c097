#pragma once
// Shared by the benchmark programs: a Google Benchmark reporter that, after the usual console
// output, prints ratio tables of runs measured side by side in the same process.
//
// Benchmarks are named "<family>/<variant>/<L>" (e.g. "forward/linear/1024"); for each family and
// length the table shows every variant's time and its ratio to the baseline variant.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "flt/runtime.h"

namespace flt::bench {

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
      const std::string family = name.substr(before == std::string::npos ? 0 : before + 1,
                                             last - (before == std::string::npos ? 0 : before + 1));
      const std::string variant = name.substr(last + 1);
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
  std::string baseline_;
  std::map<std::string, std::vector<std::string>> variants_;  // per family, in run order
  std::map<std::string, std::map<std::string, std::map<std::string, double>>> table_;
};

/// main() body for a benchmark program: runtime set-up, machine line, benchmarks, ratio tables.
inline int run_benchmarks(int argc, char** argv, const std::string& baseline) {
  const auto& info = flt::init();
  std::printf("machine: %s\n", flt::runtime_summary(info).c_str());
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  RatioReporter reporter(baseline);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}

}  // namespace flt::bench
