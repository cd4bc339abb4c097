#pragma once
// What the GPU benchmarks (bench_gpu, bench_long_context) share: their command line (they build on
// the device machines too, which have neither CLI11 nor Google Benchmark, so they read `--flag
// value` pairs themselves) and the optimizers whose training step they time.

#include <torch/cuda.h>
#include <torch/optim/adam.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "flt/optim/mnemosyne.h"

namespace flt::bench {

/// Reads argv as `--flag value` pairs: `--device cpu` sets `dry_run` (a run at small sizes on the
/// CPU, whose times mean nothing), any other pair goes to `take`, which returns whether it knows
/// the flag. An unknown flag, or a flag without a value, prints the usage and returns false.
inline bool read_flags(int argc, char** argv, const char* usage, bool& dry_run,
                       const std::function<bool(const std::string&, const std::string&)>& take) {
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    const bool has_value = i + 1 < argc;
    if (has_value && flag == "--device" && std::string(argv[i + 1]) == "cpu") {
      dry_run = true;
    } else if (!has_value || !take(flag, argv[i + 1])) {
      std::fprintf(stderr, "usage: %s [--device cpu] %s\n(unknown argument %s)\n", argv[0], usage,
                   flag.c_str());
      return false;
    }
  }
  return true;
}

/// The device of the run: the CPU for a dry run, else CUDA device 0; none when there is no CUDA
/// device, after saying that `program` skipped.
inline std::optional<torch::Device> run_device(bool dry_run, const char* program) {
  if (dry_run) return torch::Device(torch::kCPU);
  if (!torch::cuda::is_available()) {
    std::printf("%s: no CUDA device: skipped\n", program);
    return std::nullopt;
  }
  return torch::Device(torch::kCUDA, 0);
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

using MakeOptimizer =
    std::function<std::unique_ptr<torch::optim::Optimizer>(std::vector<torch::Tensor>)>;

/// The optimizers a training step is timed with, by name: Adam at `adam_lr` (the reference), then
/// both learned optimizers at their defaults.
inline std::vector<std::pair<std::string, MakeOptimizer>> compared_optimizers(double adam_lr) {
  std::ostringstream adam;
  adam << "torch::optim::Adam " << adam_lr;
  return {
      {adam.str(),
       [adam_lr](std::vector<torch::Tensor> p) {
         return std::make_unique<torch::optim::Adam>(p, torch::optim::AdamOptions(adam_lr));
       }},
      {"Mnemosyne coordinate-memory",
       [](std::vector<torch::Tensor> p) {
         return std::make_unique<flt::optim::CoordinateMnemosyne>(p);
       }},
      {"Mnemosyne tensor-schedule",
       [](std::vector<torch::Tensor> p) {
         return std::make_unique<flt::optim::ScheduleMnemosyne>(p);
       }},
  };
}

}  // namespace flt::bench
