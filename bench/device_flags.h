#pragma once
// The command line of the GPU benchmarks (bench_gpu, bench_long_context): they build on the device
// machines too, which have neither CLI11 nor Google Benchmark, so they read `--flag value` pairs
// themselves, with the same errors.

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

namespace flt::bench {

/// Reads argv as `--flag value` pairs, handing each to `take`, which returns whether it knows the
/// flag (and the value). An unknown flag, or a flag without a value, prints `usage` and returns
/// false.
inline bool read_flags(int argc, char** argv, const char* usage,
                       const std::function<bool(const std::string&, const std::string&)>& take) {
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (i + 1 >= argc || !take(flag, argv[i + 1])) {
      std::fprintf(stderr, "usage: %s %s\n(unknown argument %s)\n", argv[0], usage, flag.c_str());
      return false;
    }
  }
  return true;
}

/// `text` as a number > 0; else prints "FLAG: expected a positive number, got TEXT" and exits with
/// status 2.
inline double positive_number(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || !(value > 0)) {
    std::fprintf(stderr, "%s: expected a positive number, got %s\n", flag.c_str(), text.c_str());
    std::exit(2);
  }
  return value;
}

}  // namespace flt::bench
