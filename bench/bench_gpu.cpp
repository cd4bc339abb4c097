// GPU benchmarks (docs/benchmarks.md, "GPU"): the fused CUDA kernels against what a user would
// otherwise call, the learned optimizer's step (both designs) against Adam and against a plain
// copy's bandwidth, a TransformerLM training step with each optimizer, all measured side by side in
// one run on one device; the Fourier kernel's achieved fraction of the GPU's peak FP32 rate; and
// linear, Performer and FLT attention against SDPA from L = 1k to 64k (time and peak memory).
//
//   flt_gpu_bench [--peak-tflops X] [--repeats N] [--device cpu]
//
// A plain program, not Google Benchmark: the GPU machine (scripts/gpu-check) has none. Each time is
// the median over --repeats (default 5) of a timed batch of calls, the device synchronised around
// every batch, after warm-up calls. Exit status 77 (skipped) without a CUDA device. --device cpu
// runs every row at small sizes on the CPU: a dry run of the program itself (its shapes, its API
// calls) on a machine without a GPU, whose times mean nothing.

#include <torch/cuda.h>
#include <torch/nn/functional/loss.h>
#include <torch/optim/adam.h>
#include <torch/types.h>
#include <torch/version.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#if defined(FLT_WITH_CUDA)
#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime_api.h>
#endif

#include "device_bench.h"
#include "flt/attention/softmax.h"
#include "flt/attention/transformer.h"
#include "flt/attention/variants.h"
#include "flt/detail/statistics.h"
#include "flt/kernels/fourier_attention.h"
#include "flt/kernels/linear_attention.h"
#include "flt/optim/mnemosyne.h"
#include "flt/runtime.h"

namespace {

constexpr int kSkipped = 77;
constexpr int64_t kFourierPower = 4;

/// The sizes of every section: the real ones on a GPU, small ones for the CPU dry run.
struct Sizes {
  // Kernels: B, H, L, D, float32.
  int64_t batch = 4, heads = 8, length = 2048, dim = 64;
  // The optimizer's model: `tensors` matrices of rows x cols (100M float32 parameters).
  int64_t tensors = 10, rows = 1000, cols = 10000;
  // Linear attention against SDPA: B, H, D = 1, 8, 64, m = 64 features, over these lengths.
  std::vector<int64_t> sweep_lengths = {1024, 2048, 4096, 8192, 16384, 32768, 65536};
  // The TransformerLM step: vocabulary, width, heads, layers, batch, sequence length.
  int64_t vocab = 512, embed = 512, lm_heads = 8, layers = 6, lm_batch = 8, lm_length = 1024;

  static Sizes dry_run() {
    Sizes s;
    s.batch = 1, s.heads = 2, s.length = 256;
    s.tensors = 3, s.rows = 100, s.cols = 1000;
    s.sweep_lengths = {256, 512};
    s.vocab = 64, s.embed = 32, s.lm_heads = 2, s.layers = 2, s.lm_batch = 2, s.lm_length = 64;
    return s;
  }
};

struct Options {
  double peak_tflops = 0;  ///< 0: from the device query
  int repeats = 5;
  bool dry_run = false;  ///< --device cpu
};

torch::Device g_device = torch::kCPU;

void synchronize() {
  if (g_device.is_cuda()) torch::cuda::synchronize();
}

/// Median milliseconds per call of `fn`: warm-up calls, then `repeats` batches of `calls`, the
/// device synchronised before and after each batch.
double median_ms(const std::function<void()>& fn, int calls, int repeats) {
  for (int i = 0; i < 2; ++i) fn();
  synchronize();
  std::vector<double> times;
  for (int r = 0; r < repeats; ++r) {
    synchronize();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) fn();
    synchronize();
    const std::chrono::duration<double, std::milli> elapsed =
        std::chrono::steady_clock::now() - start;
    times.push_back(elapsed.count() / calls);
  }
  return flt::detail::median(times);
}

/// Peak bytes the caching allocator handed out during one call of `fn` above what was allocated
/// before it (-1 where unknown: the CPU).
int64_t peak_bytes(const std::function<void()>& fn) {
#if defined(FLT_WITH_CUDA)
  if (g_device.is_cuda()) {
    namespace allocator = c10::cuda::CUDACachingAllocator;
    const auto index = g_device.index();
    synchronize();
    // Index 0 of each StatArray is the aggregate over the small and the large pool.
    const int64_t before = allocator::getDeviceStats(index).allocated_bytes[0].current;
    allocator::resetPeakStats(index);
    fn();
    synchronize();
    return allocator::getDeviceStats(index).allocated_bytes[0].peak - before;
  }
#endif
  fn();
  return -1;
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

/// The message of an exception, shortened for a table cell.
std::string short_message(const std::exception& e) {
  const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
  std::string message = c10_error ? c10_error->what_without_backtrace() : e.what();
  message = message.substr(0, message.find('\n'));
  return message.substr(0, 160);
}

/// Runs one table row; an exception becomes the row's error (the other rows still run).
Row measure(Row row, const std::function<void(Row&)>& body) {
  try {
    body(row);
  } catch (const std::exception& e) {
    row.error = short_message(e);
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

/// "B4 H8 L2048 D64": a shape as the row names spell it.
std::string shape_name(const Sizes& z) {
  return "B" + std::to_string(z.batch) + " H" + std::to_string(z.heads) + " L" +
         std::to_string(z.length) + " D" + std::to_string(z.dim);
}

#if TORCH_VERSION_MAJOR >= 2
const std::string kSoftmaxName = "at::scaled_dot_product_attention";
torch::Tensor reference_softmax(const torch::Tensor& q, const torch::Tensor& k,
                                const torch::Tensor& v, bool causal) {
  return at::scaled_dot_product_attention(q, k, v, {}, 0.0, causal);
}
#else
// LibTorch 1.x has no SDPA: the composite softmax attention stands in (printed as such).
const std::string kSoftmaxName = "softmax_attention (composite; LibTorch 1.x has no SDPA)";
torch::Tensor reference_softmax(const torch::Tensor& q, const torch::Tensor& k,
                                const torch::Tensor& v, bool causal) {
  return flt::attention::softmax_attention(q, k, v, causal);
}
#endif

// ---- the FLOP count of the Fourier kernel ---------------------------------------------------
// A fixed count, for every FLOP-rate figure: 6 FP32 operations per (query, key,
// dimension) of the forward (x = q - k scaled, sin x from the tables, the two running products),
// about 51.5 GFLOP at B4 H8 L2048 D64. The fwd+bwd rate divides the same forward count by the
// fwd+bwd time: a fixed yardstick, not the work the backward does (it recomputes the weights).
constexpr double kFlopsPerPairDim = 6;

double fourier_flops(const Sizes& z) {
  return static_cast<double>(z.batch * z.heads) * z.length * z.length * z.dim * kFlopsPerPairDim;
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

// ---- the fused kernels against what a user would call instead ----------------------------------

struct KernelTimes {
  double fourier_fwd_ms = 0, fourier_fwdbwd_ms = 0;
};

KernelTimes kernel_rows(const Sizes& z, int reps, std::vector<Row>& rows) {
  const auto options = torch::TensorOptions().device(g_device).dtype(torch::kFloat);
  const auto q = leaf({z.batch, z.heads, z.length, z.dim}, options, 0.5);
  const auto k = leaf({z.batch, z.heads, z.length, z.dim}, options, 0.5);
  const auto v = leaf({z.batch, z.heads, z.length, z.dim}, options, 1.0);
  const auto r = torch::full({z.heads, z.dim}, 2.0, options).requires_grad_(true);
  const auto fourier = [&] {
    return flt::kernels::fourier_attention_op(q, k, v, r, kFourierPower,
                                              flt::kernels::FourierPhi::kPower, false);
  };
  const auto softmax = [&] { return reference_softmax(q, k, v, false); };
  KernelTimes times;
  for (const bool backward : {false, true}) {
    const std::string pass = backward ? "fwd+bwd" : "fwd";
    rows.push_back(measure({"fourier fused " + pass + " " + shape_name(z) + " fp32",
                            kSoftmaxName + " " + pass, 0, 0, backward ? 8.0 : 4.0, ""},
                           [&](Row& row) {
                             row.ms = median_ms(forward_backward(fourier, backward), 3, reps);
                             row.reference_ms =
                                 median_ms(forward_backward(softmax, backward), 3, reps);
                             (backward ? times.fourier_fwdbwd_ms : times.fourier_fwd_ms) = row.ms;
                           }));
  }

  // Causal linear attention's numerator (on CUDA the chunked composite, every chunk at once)
  // against causal SDPA on the same q, k, v.
  const auto phi_q =
      (torch::rand({z.batch, z.heads, z.length, z.dim}, options) / z.dim).requires_grad_();
  const auto phi_k =
      (torch::rand({z.batch, z.heads, z.length, z.dim}, options) / z.dim).requires_grad_();
  const auto values = leaf({z.batch, z.heads, z.length, z.dim + 1}, options, 1.0);
  const std::string shape = "B" + std::to_string(z.batch) + " H" + std::to_string(z.heads) + " L" +
                            std::to_string(z.length) + " M" + std::to_string(z.dim) + " Dv" +
                            std::to_string(z.dim + 1);
  for (const bool backward : {false, true}) {
    const std::string pass = backward ? "fwd+bwd" : "fwd";
    const auto numerator = [&] {
      return flt::kernels::linear_attention_numerator(phi_q, phi_k, values, /*causal=*/true);
    };
    const auto causal_softmax = [&] { return reference_softmax(q, k, v, /*causal=*/true); };
    rows.push_back(measure({"causal linear_attention_numerator " + pass + " " + shape + " fp32",
                            kSoftmaxName + " causal " + pass, 0, 0, 0.0, ""},
                           [&](Row& row) {
                             row.ms = median_ms(forward_backward(numerator, backward), 3, reps);
                             row.reference_ms =
                                 median_ms(forward_backward(causal_softmax, backward), 3, reps);
                           }));
  }
  return times;
}

// ---- the optimizer's step against Adam and against a copy's bandwidth -----------------------

// Bytes a fused step moves per coordinate at the least: reads gradient, parameter and two
// moments, writes parameter and moments (Adam's state and the second design's alike).
constexpr double kStepBytesPerCoordinate = 28;

struct OptimizerTimes {
  int64_t numel = 0;
  double adam_ms = 0, schedule_ms = 0, copy_ms = 0;
};

/// The achieved bandwidth of Adam's and the second design's step against a plain copy's.
void print_step_bandwidth(const OptimizerTimes& t) {
  if (t.copy_ms <= 0) return;
  const double copy_gbs = 8.0 * t.numel / (t.copy_ms * 1e-3) / 1e9;
  std::printf(
      "\nOptimizer step bandwidth (%.0f bytes a coordinate at the least; a plain copy "
      "moves 8: %.0f GB/s):\n",
      kStepBytesPerCoordinate, copy_gbs);
  struct Step {
    const char* name;
    double ms;
    const char* target;
  };
  const Step steps[] = {{"torch::optim::Adam", t.adam_ms, ""},
                        {"Mnemosyne tensor-schedule", t.schedule_ms, " (target >= 60%)"}};
  for (const auto& step : steps) {
    if (step.ms <= 0) continue;
    const double gbs = kStepBytesPerCoordinate * t.numel / (step.ms * 1e-3) / 1e9;
    std::printf("  %s: %.0f GB/s = %.0f%% of the copy's%s\n", step.name, gbs,
                100.0 * gbs / copy_gbs, step.target);
  }
}

OptimizerTimes optimizer_rows(const Sizes& z, int reps, std::vector<Row>& rows) {
  const auto options = torch::TensorOptions().device(g_device).dtype(torch::kFloat);
  std::vector<torch::Tensor> params;
  for (int64_t i = 0; i < z.tensors; ++i) {
    auto p = torch::randn({z.rows, z.cols}, options).requires_grad_(true);
    p.mutable_grad() = 1e-2 * torch::randn_like(p);
    params.push_back(p);
  }
  const int64_t numel = z.tensors * z.rows * z.cols;
  const std::string model = std::to_string(numel / 1000000) + "M params (" +
                            std::to_string(z.tensors) + " x " + std::to_string(z.rows) + "x" +
                            std::to_string(z.cols) + ") fp32";
  double adam_ms = 0, schedule_ms = 0, copy_ms = 0;
  rows.push_back(
      measure({"torch::optim::Adam step " + model, "(itself)", 0, 0, 0.0, ""}, [&](Row& row) {
        torch::optim::Adam adam(params, torch::optim::AdamOptions(1e-3));
        adam_ms = median_ms([&] { adam.step(); }, 3, reps);
        row.ms = row.reference_ms = adam_ms;
      }));
  const auto against_adam = [&](Row& row, double ms) {
    row.ms = ms;
    row.reference_ms = adam_ms;
    if (adam_ms <= 0) row.error = "no Adam time to compare with";
  };
  // The first design: default options (the composite step in chunks of 65536 coordinates) and one
  // chunk per tensor.
  for (const int64_t chunk : {int64_t{1} << 16, z.rows * z.cols}) {
    rows.push_back(measure({"Mnemosyne step chunk_size=" + std::to_string(chunk) + " " + model,
                            "torch::optim::Adam step", 0, 0, 4.0, ""},
                           [&](Row& row) {
                             flt::optim::CoordinateMnemosyne opt(
                                 params,
                                 flt::optim::CoordinateMnemosyneOptions(1e-3).chunk_size(chunk));
                             against_adam(row, median_ms([&] { opt.step(); }, 1, reps));
                           }));
  }
  // ScheduleMnemosyne: the per-tensor network on the CPU, then one fused pass over every tensor.
  rows.push_back(measure({"Mnemosyne tensor-schedule step (fused pass) " + model,
                          "torch::optim::Adam step", 0, 0, 2.0, ""},
                         [&](Row& row) {
                           flt::optim::ScheduleMnemosyne opt(
                               params, flt::optim::ScheduleMnemosyneOptions(1e-3));
                           schedule_ms = median_ms([&] { opt.step(); }, 3, reps);
                           against_adam(row, schedule_ms);
                         }));
  rows.push_back(measure({"plain copy of " + model, "(itself)", 0, 0, 0.0, ""}, [&](Row& row) {
    auto flat = torch::cat(params).detach().reshape(-1);
    auto copy = torch::empty_like(flat);
    copy_ms = median_ms([&] { copy.copy_(flat); }, 3, reps);
    row.ms = row.reference_ms = copy_ms;
  }));
  return {numel, adam_ms, schedule_ms, copy_ms};
}

// ---- a TransformerLM training step with each optimizer --------------------------------------

void transformer_rows(const Sizes& z, int reps, std::vector<Row>& rows) {
  const auto options = flt::attention::TransformerOptions(z.vocab, z.embed, z.lm_heads, z.layers)
                           .max_length(z.lm_length);
  const auto tokens = torch::randint(z.vocab, {z.lm_batch, z.lm_length + 1},
                                     torch::TensorOptions().device(g_device).dtype(torch::kLong));
  const auto inputs = tokens.narrow(1, 0, z.lm_length), targets = tokens.narrow(1, 1, z.lm_length);
  const std::string shape = "V" + std::to_string(z.vocab) + " E" + std::to_string(z.embed) + " H" +
                            std::to_string(z.lm_heads) + " layers " + std::to_string(z.layers) +
                            " B" + std::to_string(z.lm_batch) + " L" + std::to_string(z.lm_length) +
                            " softmax fp32";
  const auto optimizers = flt::bench::compared_optimizers(1e-3);
  // One step a batch: the first design's step on CUDA takes about a second at this size.
  double adam_ms = 0;
  for (size_t i = 0; i < optimizers.size(); ++i) {
    const bool reference = i == 0;  // Adam
    rows.push_back(measure(
        {"TransformerLM train step " + optimizers[i].first + " " + shape,
         reference ? "(itself)" : "TransformerLM train step Adam", 0, 0, reference ? 0.0 : 1.2, ""},
        [&](Row& row) {
          torch::manual_seed(1);
          flt::attention::TransformerLM model(options);
          model->to(g_device);
          auto optimizer = optimizers[i].second(model->parameters());
          const auto step = [&] {
            optimizer->zero_grad();
            const auto logits = model->forward(inputs);
            const auto loss = torch::nn::functional::cross_entropy(logits.reshape({-1, z.vocab}),
                                                                   targets.reshape(-1));
            loss.backward();
            optimizer->step();
          };
          row.ms = median_ms(step, 1, reps);
          if (reference) adam_ms = row.ms;
          row.reference_ms = adam_ms;
          if (adam_ms <= 0) row.error = "no Adam time to compare with";
        }));
  }
}

// ---- linear attention against SDPA over the length --------------------------------------------

/// Forward time and peak memory of linear, Performer and FLT attention (m = 64 features) beside
/// SDPA's, B 1, H 8, D 64, causal and not, fp32 and bf16; a failed cell (out of memory, a dtype a
/// variant does not take) says so. Then, per variant, the length from which it is faster than SDPA
/// at every longer length measured, and the targets for FLT and Performer (fp32,
/// non-causal: faster from L = 4096, 10x faster at L = 32768).
void linear_attention_sweep(const Sizes& z, int reps) {
  namespace fa = flt::attention;
  constexpr int64_t kBatch = 1, kHeads = 8, kDim = 64, kFeatures = 64;
  const std::vector<std::pair<std::string, fa::AttentionOptions>> variants = {
      {"linear", fa::LinearAttentionOptions()},
      {"performer", fa::PerformerAttentionOptions().features(kFeatures)},
      {"flt", fa::FLTAttentionOptions().features(kFeatures)},
  };
  struct Cell {
    double ms = 0;
    int64_t bytes = -1;
    std::string error;
  };
  const auto run_cell = [&](const std::function<torch::Tensor()>& fn) {
    Cell cell;
    try {
      torch::NoGradGuard no_grad;
      cell.bytes = peak_bytes([&] { fn(); });
      cell.ms = median_ms([&] { fn(); }, 1, reps);
    } catch (const std::exception& e) {
      cell.error = short_message(e).substr(0, 40);
    }
    return cell;
  };
  const auto cell_text = [](const Cell& c, const Cell* reference) {
    if (!c.error.empty()) return "failed: " + c.error;
    char text[96];
    int used = std::snprintf(text, sizeof text, "%.3f", c.ms);
    if (reference && reference->error.empty() && c.ms > 0)
      used += std::snprintf(text + used, sizeof text - used, " (%.2fx)", reference->ms / c.ms);
    if (c.bytes >= 0)
      std::snprintf(text + used, sizeof text - used, ", %lld MiB",
                    static_cast<long long>(c.bytes >> 20));
    return std::string(text);
  };
  std::printf(
      "\nLinear attention against %s, forward, B%lld H%lld D%lld, m = %lld: ms (SDPA's "
      "time / the variant's: > 1 is faster than SDPA), peak MiB above the inputs\n",
      kSoftmaxName.c_str(), static_cast<long long>(kBatch), static_cast<long long>(kHeads),
      static_cast<long long>(kDim), static_cast<long long>(kFeatures));
  std::printf("\n| dtype | causal | L | SDPA |");
  for (const auto& v : variants) std::printf(" %s |", v.first.c_str());
  std::printf("\n|---|---|---|---|");
  for (size_t i = 0; i < variants.size(); ++i) std::printf("---|");
  std::printf("\n");
  bool targets_met = true;
  std::vector<std::string> target_lines;
  for (const auto dtype : {torch::kFloat, torch::kBFloat16}) {
    const std::string dtype_name = dtype == torch::kFloat ? "fp32" : "bf16";
    for (const bool causal : {false, true}) {
      // Per variant, the lengths at which it was faster than SDPA.
      std::vector<std::vector<std::pair<int64_t, double>>> speedups(variants.size());
      for (const int64_t length : z.sweep_lengths) {
        torch::manual_seed(2);
        const auto options = torch::TensorOptions().device(g_device).dtype(dtype);
        const auto q = 0.5 * torch::randn({kBatch, kHeads, length, kDim}, options);
        const auto k = 0.5 * torch::randn({kBatch, kHeads, length, kDim}, options);
        const auto v = torch::randn({kBatch, kHeads, length, kDim}, options);
        const Cell sdpa = run_cell([&] { return reference_softmax(q, k, v, causal); });
        std::printf("| %s | %s | %lld | %s |", dtype_name.c_str(), causal ? "yes" : "no",
                    static_cast<long long>(length), cell_text(sdpa, nullptr).c_str());
        for (size_t i = 0; i < variants.size(); ++i) {
          Cell cell;
          try {
            auto handle = fa::make_attention(variants[i].second, kHeads, kDim);
            handle.module->to(g_device, dtype);
            fa::AttentionCall call;
            call.causal = causal;
            cell = run_cell([&] { return handle.attention->forward(q, k, v, call); });
          } catch (const std::exception& e) {
            cell.error = short_message(e).substr(0, 40);
          }
          std::printf(" %s |", cell_text(cell, &sdpa).c_str());
          if (cell.error.empty() && sdpa.error.empty())
            speedups[i].push_back({length, sdpa.ms / cell.ms});
        }
        std::printf("\n");
        std::fflush(stdout);
      }
      for (size_t i = 0; i < variants.size(); ++i) {
        // The shortest length from which every longer measured length is faster than SDPA.
        std::string from = "never";
        for (auto it = speedups[i].rbegin(); it != speedups[i].rend() && it->second > 1.0; ++it)
          from = "L = " + std::to_string(it->first);
        std::string line = variants[i].first + " " + dtype_name + (causal ? " causal" : "") +
                           ": faster than SDPA from " + from;
        if (dtype == torch::kFloat && !causal && variants[i].first != "linear") {
          double at_4096 = 0, at_32768 = 0;
          for (const auto& [length, speedup] : speedups[i]) {
            if (length == 4096) at_4096 = speedup;
            if (length == 32768) at_32768 = speedup;
          }
          const bool met = at_4096 > 1.0 && at_32768 >= 10.0 && from != "never" &&
                           std::stoll(from.substr(4)) <= 4096;
          targets_met = targets_met && met;
          char numbers[64];
          std::snprintf(numbers, sizeof numbers, " (%.2fx at 4096, %.2fx at 32768)", at_4096,
                        at_32768);
          line += "; target (faster from L = 4096, 10x at L = 32768): " +
                  std::string(met ? "met" : "MISSED") + numbers;
        }
        target_lines.push_back(line);
      }
    }
  }
  std::printf("\n");
  for (const auto& line : target_lines) std::printf("  %s\n", line.c_str());
  std::printf("  FLT and Performer targets: %s\n", targets_met ? "met" : "MISSED");
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  const bool known = flt::bench::read_flags(
      argc, argv, "[--peak-tflops X] [--repeats N]", options.dry_run,
      [&](const std::string& flag, const std::string& value) {
        if (flag == "--peak-tflops") {
          options.peak_tflops = flt::bench::positive_number(flag, value);
        } else if (flag == "--repeats") {
          options.repeats = static_cast<int>(flt::bench::positive_number(flag, value));
        } else {
          return false;
        }
        return true;
      });
  if (!known) return 2;
  flt::init(/*quiet=*/true);
  const auto device = flt::bench::run_device(options.dry_run, "flt_gpu_bench");
  if (!device) return kSkipped;
  g_device = *device;
  const Sizes sizes = options.dry_run ? Sizes::dry_run() : Sizes();
  if (options.dry_run) {
    std::printf("flt_gpu_bench --device cpu: a dry run at small sizes; its times mean nothing\n");
    options.repeats = 1;
  }
  torch::manual_seed(1);
  const int reps = options.repeats;
  std::vector<Row> rows;
  const auto kernel_times = kernel_rows(sizes, reps, rows);
  const auto optimizer_times = optimizer_rows(sizes, reps, rows);
  transformer_rows(sizes, reps, rows);
  print_table(rows);
  print_step_bandwidth(optimizer_times);

  // ---- achieved fraction of peak for the Fourier kernel ----
  std::string how = "--peak-tflops";
  const double peak = options.peak_tflops > 0 ? options.peak_tflops
                      : options.dry_run       ? 0.0
                                              : device_peak_tflops(&how);
  std::printf(
      "\nFourier kernel FLOP rate (6 FP32 operations per query, key, dimension of the forward; "
      "target >= 25%% of peak; peak: %s)\n",
      how.c_str());
  for (const bool backward : {false, true}) {
    const double ms = backward ? kernel_times.fourier_fwdbwd_ms : kernel_times.fourier_fwd_ms;
    if (ms <= 0) {
      std::printf("  %s: no time measured\n", backward ? "fwd+bwd" : "fwd");
      continue;
    }
    const double tflops = fourier_flops(sizes) / (ms * 1e-3) / 1e12;
    if (peak > 0) {
      std::printf("  %s: %.2f TFLOP/s = %.1f%% of %.1f TFLOP/s FP32 peak\n",
                  backward ? "fwd+bwd" : "fwd", tflops, 100.0 * tflops / peak, peak);
    } else {
      std::printf("  %s: %.2f TFLOP/s (peak unknown: pass --peak-tflops)\n",
                  backward ? "fwd+bwd" : "fwd", tflops);
    }
  }
  // Last: the longest section, and the one most likely to meet a limit of the device's memory.
  linear_attention_sweep(sizes, reps);
  bool failed = false;
  for (const auto& row : rows) failed = failed || !row.error.empty();
  return failed ? 1 : 0;
}
