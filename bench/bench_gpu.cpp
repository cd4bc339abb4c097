// GPU benchmarks (bench/NOTES.md, "GPU"): the fused CUDA kernels against what a user would
// otherwise call, and the learned optimizer's step against Adam, all measured side by side in one
// run on one device; and the Fourier kernel's achieved fraction of the GPU's peak FP32 rate.
//
//   flt_gpu_bench [--peak-tflops X] [--repeats N]
//
// A plain program, not Google Benchmark: the GPU machine (scripts/gpu-check) has none. Each time is
// the median over --repeats (default 5) of a timed batch of calls, the device synchronised around
// every batch, after warm-up calls. Exit status 77 (skipped) without a CUDA device.

#include <torch/cuda.h>
#include <torch/optim/adam.h>
#include <torch/types.h>
#include <torch/version.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#if defined(FLT_WITH_CUDA)
#include <cuda_runtime_api.h>
#endif

#include "flt/attention/softmax.h"
#include "flt/detail/statistics.h"
#include "flt/kernels/fourier_attention.h"
#include "flt/kernels/linear_attention.h"
#include "flt/optim/mnemosyne.h"
#include "flt/runtime.h"

namespace {

constexpr int kSkipped = 77;
// The benchmark's shape: B = 4, H = 8, L = 2048, D = 64, float32.
constexpr int64_t kBatch = 4, kHeads = 8, kLength = 2048, kDim = 64;
constexpr int64_t kFourierPower = 4;
// The optimizer benchmark's model: 10 matrices of 1000 x 10000 = 100M float32 parameters.
constexpr int64_t kOptimizerTensors = 10, kOptimizerRows = 1000, kOptimizerCols = 10000;

struct Options {
  double peak_tflops = 0;  ///< 0: from the device query
  int repeats = 5;
};

/// Median milliseconds per call of `fn` on `device`: warm-up calls, then `repeats` batches of
/// `calls`, the device synchronised before and after each batch.
double median_ms(const std::function<void()>& fn, int calls, int repeats) {
  for (int i = 0; i < 2; ++i) fn();
  torch::cuda::synchronize();
  std::vector<double> times;
  for (int r = 0; r < repeats; ++r) {
    torch::cuda::synchronize();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) fn();
    torch::cuda::synchronize();
    const std::chrono::duration<double, std::milli> elapsed =
        std::chrono::steady_clock::now() - start;
    times.push_back(elapsed.count() / calls);
  }
  return flt::detail::median(times);
}

struct Row {
  std::string name, reference;
  double ms = 0, reference_ms = 0;
  double target = 0;  ///< largest acceptable ratio ms / reference_ms; 0 = none set
  std::string error;  ///< why the row has no numbers
};

void print_table(const std::vector<Row>& rows) {
  std::printf("\n| benchmark | ms | reference | reference ms | ratio | target |\n");
  std::printf("|---|---|---|---|---|---|\n");
  for (const auto& r : rows) {
    if (!r.error.empty()) {
      std::printf("| %s | failed: %s | %s | | | |\n", r.name.c_str(), r.error.c_str(),
                  r.reference.c_str());
      continue;
    }
    const double ratio = r.ms / r.reference_ms;
    const std::string target =
        r.target > 0 ? (ratio <= r.target ? "<= " : "MISSED <= ") + c10::str(r.target) + "x" : "";
    std::printf("| %s | %.3f | %s | %.3f | %.2fx | %s |\n", r.name.c_str(), r.ms,
                r.reference.c_str(), r.reference_ms, ratio, target.c_str());
  }
}

/// Runs one table row; an exception becomes the row's error (the other rows still run).
Row measure(Row row, const std::function<void(Row&)>& body) {
  try {
    body(row);
  } catch (const c10::Error& e) {
    row.error = std::string(e.what_without_backtrace()).substr(0, 160);
  } catch (const std::exception& e) {
    row.error = std::string(e.what()).substr(0, 160);
  }
  return row;
}

/// fwd (+ bwd with a fixed output gradient) of `fn`; gradients accumulate into the leaves, which
/// costs the same every call.
std::function<void()> forward_backward(const std::function<torch::Tensor()>& fn, bool backward) {
  return [fn, backward] {
    std::optional<torch::NoGradGuard> no_grad;
    if (!backward) no_grad.emplace();
    const auto out = fn();
    if (backward) out.backward(torch::ones_like(out));
  };
}

torch::Tensor leaf(std::vector<int64_t> shape, const torch::TensorOptions& options, double scale) {
  return (scale * torch::randn(shape, options)).requires_grad_(true);
}

// ---- the FLOP count of the Fourier kernel ---------------------------------------------------
// Issue 32's fixed count, for every FLOP-rate figure: 6 FP32 operations per (query, key,
// dimension) of the forward (x = q - k scaled, sin x from the tables, the two running products),
// about 51.5 GFLOP at B4 H8 L2048 D64. The fwd+bwd rate divides the same forward count by the
// fwd+bwd time: a fixed yardstick, not the work the backward does (it recomputes the weights).
constexpr double kFlopsPerPairDim = 6;

double fourier_flops() {
  return static_cast<double>(kBatch * kHeads) * kLength * kLength * kDim * kFlopsPerPairDim;
}

/// Peak FP32 rate of device 0 in TFLOP/s: SMs x FP32 lanes per SM x 2 (FMA) x clock; 0 if unknown.
double device_peak_tflops(std::string* how) {
#if defined(FLT_WITH_CUDA)
  int sms = 0, clock_khz = 0, major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) != cudaSuccess ||
      cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0) != cudaSuccess) {
    *how = "device query failed";
    return 0;
  }
  // FP32 lanes per SM (CUDA C Programming Guide, "Arithmetic Instructions" throughput table).
  int lanes = 0;
  if (major == 7) lanes = 64;                     // Volta, Turing
  if (major == 8) lanes = minor == 0 ? 64 : 128;  // A100: 64; GA10x, Ada: 128
  if (major == 9 || major == 10) lanes = 128;     // Hopper, Blackwell
  if (lanes == 0) {
    *how = "sm_" + std::to_string(major) + std::to_string(minor) +
           " is not in the table: pass --peak-tflops";
    return 0;
  }
  *how = std::to_string(sms) + " SMs x " + std::to_string(lanes) + " FP32 lanes x 2 x " +
         std::to_string(clock_khz / 1000) + " MHz (sm_" + std::to_string(major) +
         std::to_string(minor) + ", boost clock)";
  return 2.0 * sms * lanes * (clock_khz * 1e3) / 1e12;
#else
  *how = "FLT built without CUDA";
  return 0;
#endif
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if ((arg == "--peak-tflops" || arg == "--repeats") && i + 1 < argc) {
      char* end = nullptr;
      const double value = std::strtod(argv[++i], &end);
      if (*end != '\0' || !(value > 0)) {
        std::fprintf(stderr, "%s: expected a positive number, got %s\n", arg.c_str(), argv[i]);
        return 2;
      }
      if (arg == "--peak-tflops") options.peak_tflops = value;
      if (arg == "--repeats") options.repeats = static_cast<int>(value);
    } else {
      std::fprintf(stderr, "usage: %s [--peak-tflops X] [--repeats N]\n(unknown argument %s)\n",
                   argv[0], arg.c_str());
      return 2;
    }
  }
  flt::init(/*quiet=*/true);
  if (!torch::cuda::is_available()) {
    std::printf("flt_gpu_bench: no CUDA device: skipped\n");
    return kSkipped;
  }
  torch::manual_seed(1);
  const auto cuda = torch::TensorOptions().device(torch::kCUDA, 0).dtype(torch::kFloat);
  const int reps = options.repeats;
  std::vector<Row> rows;

  // ---- Fourier fused vs softmax attention at the benchmark's shape ----
  const auto q = leaf({kBatch, kHeads, kLength, kDim}, cuda, 0.5);
  const auto k = leaf({kBatch, kHeads, kLength, kDim}, cuda, 0.5);
  const auto v = leaf({kBatch, kHeads, kLength, kDim}, cuda, 1.0);
  const auto r = torch::full({kHeads, kDim}, 2.0, cuda).requires_grad_(true);
  const auto fourier = [&] {
    return flt::kernels::fourier_attention_op(q, k, v, r, kFourierPower,
                                              flt::kernels::FourierPhi::kPower, false);
  };
#if TORCH_VERSION_MAJOR >= 2
  const std::string softmax_name = "at::scaled_dot_product_attention";
  const auto softmax = [&] { return at::scaled_dot_product_attention(q, k, v); };
#else
  // LibTorch 1.x has no SDPA: the composite softmax attention stands in (printed as such).
  const std::string softmax_name = "softmax_attention (composite; LibTorch 1.x has no SDPA)";
  const auto softmax = [&] { return flt::attention::softmax_attention(q, k, v); };
#endif
  double fourier_fwd_ms = 0, fourier_fwdbwd_ms = 0;
  for (const bool backward : {false, true}) {
    const std::string pass = backward ? "fwd+bwd" : "fwd";
    rows.push_back(measure({"fourier fused " + pass + " B4 H8 L2048 D64 fp32",
                            softmax_name + " " + pass, 0, 0, backward ? 8.0 : 4.0, ""},
                           [&](Row& row) {
                             row.ms = median_ms(forward_backward(fourier, backward), 3, reps);
                             row.reference_ms =
                                 median_ms(forward_backward(softmax, backward), 3, reps);
                             (backward ? fourier_fwdbwd_ms : fourier_fwd_ms) = row.ms;
                           }));
  }

  // ---- causal linear attention: fused scan vs the chunked composite ----
  const auto phi_q = (torch::rand({kBatch, kHeads, kLength, kDim}, cuda) / kDim).requires_grad_();
  const auto phi_k = (torch::rand({kBatch, kHeads, kLength, kDim}, cuda) / kDim).requires_grad_();
  const auto values = leaf({kBatch, kHeads, kLength, kDim + 1}, cuda, 1.0);
  for (const bool backward : {false, true}) {
    const std::string pass = backward ? "fwd+bwd" : "fwd";
    rows.push_back(measure({"causal linear fused " + pass + " B4 H8 L2048 M64 Dv65 fp32",
                            "linear_attention_numerator_composite " + pass, 0, 0, 0.0, ""},
                           [&](Row& row) {
                             row.ms =
                                 median_ms(forward_backward(
                                               [&] {
                                                 return flt::kernels::linear_attention_numerator(
                                                     phi_q, phi_k, values, /*causal=*/true);
                                               },
                                               backward),
                                           3, reps);
                             row.reference_ms = median_ms(
                                 forward_backward(
                                     [&] {
                                       return flt::kernels::linear_attention_numerator_composite(
                                           phi_q, phi_k, values, /*causal=*/true);
                                     },
                                     backward),
                                 3, reps);
                           }));
  }

  // ---- Mnemosyne step vs Adam on a 100M-parameter model ----
  {
    std::vector<torch::Tensor> params;
    for (int64_t i = 0; i < kOptimizerTensors; ++i) {
      auto p = torch::randn({kOptimizerRows, kOptimizerCols}, cuda).requires_grad_(true);
      p.mutable_grad() = 1e-2 * torch::randn_like(p);
      params.push_back(p);
    }
    const std::string model = "100M params (10 x 1000x10000) fp32";
    double adam_ms = 0;
    rows.push_back(
        measure({"torch::optim::Adam step " + model, "(itself)", 0, 0, 0.0, ""}, [&](Row& row) {
          torch::optim::Adam adam(params, torch::optim::AdamOptions(1e-3));
          adam_ms = median_ms([&] { adam.step(); }, 3, reps);
          row.ms = row.reference_ms = adam_ms;
        }));
    // Default options (the composite step in chunks of 65536 coordinates) and one chunk per tensor.
    for (const int64_t chunk : {int64_t{1} << 16, kOptimizerRows * kOptimizerCols}) {
      rows.push_back(measure({"Mnemosyne step chunk_size=" + std::to_string(chunk) + " " + model,
                              "torch::optim::Adam step", 0, 0, 4.0, ""},
                             [&](Row& row) {
                               flt::optim::Mnemosyne opt(
                                   params, flt::optim::MnemosyneOptions(1e-3).chunk_size(chunk));
                               row.ms = median_ms([&] { opt.step(); }, 1, reps);
                               row.reference_ms = adam_ms;
                               if (adam_ms <= 0) row.error = "no Adam time to compare with";
                             }));
    }
  }

  print_table(rows);

  // ---- achieved fraction of peak for the Fourier kernel ----
  std::string how = "--peak-tflops";
  const double peak = options.peak_tflops > 0 ? options.peak_tflops : device_peak_tflops(&how);
  std::printf(
      "\nFourier kernel FLOP rate (6 FP32 operations per query, key, dimension of the forward; "
      "target >= 25%% of peak; peak: %s)\n",
      how.c_str());
  for (const bool backward : {false, true}) {
    const double ms = backward ? fourier_fwdbwd_ms : fourier_fwd_ms;
    if (ms <= 0) {
      std::printf("  %s: no time measured\n", backward ? "fwd+bwd" : "fwd");
      continue;
    }
    const double tflops = fourier_flops() / (ms * 1e-3) / 1e12;
    if (peak > 0) {
      std::printf("  %s: %.2f TFLOP/s = %.1f%% of %.1f TFLOP/s FP32 peak\n",
                  backward ? "fwd+bwd" : "fwd", tflops, 100.0 * tflops / peak, peak);
    } else {
      std::printf("  %s: %.2f TFLOP/s (peak unknown: pass --peak-tflops)\n",
                  backward ? "fwd+bwd" : "fwd", tflops);
    }
  }
  bool failed = false;
  for (const auto& row : rows) failed = failed || !row.error.empty();
  return failed ? 1 : 0;
}
