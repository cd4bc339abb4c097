// Long-context language-model training on the GPU: what a TransformerLM training step costs in time
// and memory with softmax attention (through at::scaled_dot_product_attention), Performer, FLT and
// plain linear attention as the sequence grows with the tokens per step held fixed, and what
// held-out loss each reaches in the same wall-clock budget (a faster variant takes more steps, as
// in practice). docs/benchmarks.md, "Long context".
//
//   flt_long_context_bench [--device cpu] [--budget S] [--time-limit S] [--text-root DIR]
//
// The text: every Markdown and C++ source file of the repository (sorted by path, build folders
// and hidden folders left out), as bytes, the same on any machine that has the checkout: the first
// seven eighths train, the last eighth is held out. Sections, in order, each skipped with a line
// saying so once --time-limit seconds have passed since the start:
//   1. step time (median of 2 after a warm-up) and peak memory of the caching allocator, Adam,
//      fp32 and bf16 (parameters and activations in bf16, the loss in fp32), every variant at every
//      length; a cell that runs out of memory says so and the rest still run
//   2. the optimizer's share: one length, FLT, fp32, Adam against CoordinateMnemosyne and
//   ScheduleMnemosyne
//   3. held-out loss after --budget seconds of training (Adam 5e-4, fp32), every variant and length
// Exit status 77 (skipped) without a CUDA device; --device cpu is a dry run at small sizes whose
// numbers mean nothing (a ctest).

#include <torch/cuda.h>
#include <torch/nn/functional/loss.h>
#include <torch/optim/adam.h>
#include <torch/types.h>
#include <torch/version.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#if defined(FLT_WITH_CUDA)
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include "device_bench.h"
#include "flt/attention/transformer.h"
#include "flt/attention/variants.h"
#include "flt/detail/statistics.h"
#include "flt/optim/mnemosyne.h"
#include "flt/runtime.h"

namespace {

namespace fa = flt::attention;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int kSkipped = 77;
constexpr int64_t kVocab = 256;  // bytes

struct Sizes {
  int64_t embed = 512, heads = 8, layers = 6;
  int64_t tokens_per_step = 65536;
  std::vector<int64_t> lengths = {1024, 4096, 16384, 65536};
  int64_t mnemosyne_length = 4096;
  static Sizes dry_run() {
    Sizes s;
    s.embed = 32, s.heads = 2, s.layers = 2, s.tokens_per_step = 512;
    s.lengths = {64, 256};
    s.mnemosyne_length = 64;
    return s;
  }
};

struct Options {
  bool dry_run = false;
  double budget_s = 20;       ///< training seconds per cell of section 3
  double time_limit_s = 1e9;  ///< sections not started by then are skipped
  fs::path text_root = FLT_SOURCE_DIR;
};

torch::Device g_device = torch::kCPU;
Clock::time_point g_start;

double seconds_since_start() {
  return std::chrono::duration<double>(Clock::now() - g_start).count();
}

void synchronize() {
  if (g_device.is_cuda()) torch::cuda::synchronize();
}

void release_cached_memory() {
#if defined(FLT_WITH_CUDA)
  if (g_device.is_cuda()) c10::cuda::CUDACachingAllocator::emptyCache();
#endif
}

/// The peak bytes the caching allocator handed out since the last reset (-1 on the CPU).
int64_t peak_bytes_since_reset() {
#if defined(FLT_WITH_CUDA)
  if (g_device.is_cuda()) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(g_device.index());
    return stats.allocated_bytes[0].peak;  // index 0: the small and large pools together
  }
#endif
  return -1;
}

void reset_peak() {
#if defined(FLT_WITH_CUDA)
  if (g_device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(g_device.index());
#endif
}

// ---- the text ---------------------------------------------------------------------------------

/// Every .md, .h, .cpp, .cu and .cuh file under `root` (sorted by relative path; folders whose name
/// starts with "build" or "." left out), concatenated as bytes.
torch::Tensor repository_text(const fs::path& root) {
  std::vector<fs::path> files;
  const std::vector<std::string> extensions = {".md", ".h", ".cpp", ".cu", ".cuh"};
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator();
       ++it) {
    const std::string name = it->path().filename().string();
    if (it->is_directory() &&
        (name.rfind("build", 0) == 0 || name.rfind('.', 0) == 0 || name == "out")) {
      it.disable_recursion_pending();
      continue;
    }
    const auto ext = it->path().extension().string();
    if (it->is_regular_file() &&
        std::find(extensions.begin(), extensions.end(), ext) != extensions.end()) {
      files.push_back(fs::relative(it->path(), root));
    }
  }
  std::sort(files.begin(), files.end());
  std::string bytes;
  for (const auto& file : files) {
    std::ifstream in(root / file, std::ios::binary);
    bytes.append(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  TORCH_CHECK(bytes.size() > 1 << 16, "flt_long_context_bench: only ", bytes.size(),
              " bytes of text under ", root.string(), " (pass --text-root)");
  auto text = torch::empty({static_cast<int64_t>(bytes.size())}, torch::kUInt8);
  std::copy(bytes.begin(), bytes.end(), text.data_ptr<uint8_t>());
  return text.to(torch::kLong);
}

/// `batch` windows of length + 1 tokens from `text`, starting at seeded random offsets (the
/// window wraps around the end of the text when it is shorter than one window).
torch::Tensor windows(const torch::Tensor& text, int64_t batch, int64_t length, uint64_t seed) {
  auto generator = at::detail::createCPUGenerator(seed);
  const int64_t n = text.size(0);
  const auto starts = torch::randint(n, {batch, 1}, generator, torch::kLong);
  const auto index = (starts + torch::arange(length + 1).unsqueeze(0)).remainder(n);
  return text.index({index}).to(g_device);
}

// ---- the models -------------------------------------------------------------------------------

struct Variant {
  std::string name;
  fa::AttentionOptions attention;
};

std::vector<Variant> variants() {
  return {
      {"softmax (SDPA)", fa::SoftmaxAttentionOptions().fused(true)},
      {"performer m=64", fa::PerformerAttentionOptions().features(64)},
      {"performer m=256", fa::PerformerAttentionOptions().features(256)},
      {"flt", fa::FLTAttentionOptions()},
      {"linear", fa::LinearAttentionOptions()},
  };
}

fa::TransformerLM make_model(const Sizes& z, const Variant& variant, torch::ScalarType dtype) {
  torch::manual_seed(1);
  fa::TransformerLM model(
      fa::TransformerOptions(kVocab, z.embed, z.heads, z.layers).attention(variant.attention));
  model->to(g_device, dtype);
  return model;
}

torch::Tensor lm_loss(fa::TransformerLM& model, const torch::Tensor& window) {
  const int64_t length = window.size(1) - 1;
  const auto logits = model->forward(window.narrow(1, 0, length));
  return torch::nn::functional::cross_entropy(logits.reshape({-1, kVocab}).to(torch::kFloat),
                                              window.narrow(1, 1, length).reshape(-1));
}

bool is_out_of_memory(const std::exception& e) {
  return std::string(e.what()).find("out of memory") != std::string::npos;
}

std::string short_message(const std::exception& e) {
  if (is_out_of_memory(e)) return "out of memory";
  const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
  std::string message = c10_error ? c10_error->what_without_backtrace() : e.what();
  return message.substr(0, std::min<size_t>(message.find('\n'), 100));
}

/// One training step's median time (ms) over `steps` after a warm-up step, and the peak memory
/// (MiB) of the caching allocator over them; an exception's message instead where one was thrown.
struct StepCost {
  double ms = 0, mib = -1;
  std::string error;
};

StepCost step_cost(fa::TransformerLM& model, torch::optim::Optimizer& optimizer,
                   const torch::Tensor& window, int steps) {
  StepCost cost;
  try {
    const auto step = [&] {
      optimizer.zero_grad();
      lm_loss(model, window).backward();
      optimizer.step();
    };
    synchronize();
    reset_peak();
    step();
    std::vector<double> times;
    for (int i = 0; i < steps; ++i) {
      synchronize();
      const auto start = Clock::now();
      step();
      synchronize();
      times.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    }
    cost.ms = flt::detail::median(times);
    const int64_t peak = peak_bytes_since_reset();
    cost.mib = peak < 0 ? -1 : peak / (1024.0 * 1024.0);
  } catch (const std::exception& e) {
    cost.error = short_message(e);
  }
  release_cached_memory();
  return cost;
}

std::string cell_text(const StepCost& c) {
  if (!c.error.empty()) return c.error;
  char text[64];
  if (c.mib >= 0) {
    std::snprintf(text, sizeof text, "%.1f ms, %.0f MiB", c.ms, c.mib);
  } else {
    std::snprintf(text, sizeof text, "%.1f ms", c.ms);
  }
  return text;
}

bool out_of_time(const Options& o, const char* section) {
  if (seconds_since_start() < o.time_limit_s) return false;
  std::printf("\n%s: not run (--time-limit %.0f s reached)\n", section, o.time_limit_s);
  return true;
}

// ---- 1. step time and memory ------------------------------------------------------------------

void step_table(const Sizes& z, const Options& o, const torch::Tensor& train) {
  const auto vs = variants();
  for (const auto dtype : {torch::kFloat, torch::kBFloat16}) {
    const char* dtype_name = dtype == torch::kFloat ? "fp32" : "bf16";
    if (out_of_time(o, dtype == torch::kFloat ? "step table fp32" : "step table bf16")) return;
    std::printf(
        "\nTraining step, Adam, %s, %lld tokens a step: ms (median of 2 after a warm-up), "
        "peak MiB of the caching allocator\n\n| L | B |",
        dtype_name, static_cast<long long>(z.tokens_per_step));
    for (const auto& v : vs) std::printf(" %s |", v.name.c_str());
    std::printf("\n|---|---|");
    for (size_t i = 0; i < vs.size(); ++i) std::printf("---|");
    std::printf("\n");
    for (const int64_t length : z.lengths) {
      const int64_t batch = std::max<int64_t>(1, z.tokens_per_step / length);
      std::printf("| %lld | %lld |", static_cast<long long>(length), static_cast<long long>(batch));
      const auto window = windows(train, batch, length, 7);
      for (const auto& v : vs) {
        StepCost cost;
        try {
          auto model = make_model(z, v, dtype);
          torch::optim::Adam adam(model->parameters(), torch::optim::AdamOptions(5e-4));
          cost = step_cost(model, adam, window, 2);
        } catch (const std::exception& e) {
          cost.error = short_message(e);
        }
        release_cached_memory();
        std::printf(" %s |", cell_text(cost).c_str());
        std::fflush(stdout);
      }
      std::printf("\n");
    }
  }
}

// ---- 2. the optimizer's share -----------------------------------------------------------------

void optimizer_table(const Sizes& z, const Options& o, const torch::Tensor& train) {
  if (out_of_time(o, "optimizer table")) return;
  const int64_t length = z.mnemosyne_length;
  const int64_t batch = std::max<int64_t>(1, z.tokens_per_step / length);
  const auto window = windows(train, batch, length, 7);
  const Variant flt = variants()[3];
  const auto optimizers = flt::bench::compared_optimizers(5e-4);
  std::printf(
      "\nOptimizer share, FLT, fp32, L %lld, B %lld: ms a training step (median of 2 after "
      "a warm-up)\n\n| optimizer | step | x Adam |\n|---|---|---|\n",
      static_cast<long long>(length), static_cast<long long>(batch));
  double adam_ms = 0;
  for (const auto& [name, make] : optimizers) {
    auto model = make_model(z, flt, torch::kFloat);
    auto optimizer = make(model->parameters());
    const auto cost = step_cost(model, *optimizer, window, 2);
    if (adam_ms == 0 && cost.error.empty()) adam_ms = cost.ms;
    if (cost.error.empty() && adam_ms > 0) {
      std::printf("| %s | %.1f ms | %.2fx |\n", name.c_str(), cost.ms, cost.ms / adam_ms);
    } else {
      std::printf("| %s | %s | |\n", name.c_str(), cell_text(cost).c_str());
    }
    std::fflush(stdout);
  }
}

// ---- 3. held-out loss after a fixed budget ------------------------------------------------------

void budget_table(const Sizes& z, const Options& o, const torch::Tensor& train,
                  const torch::Tensor& held_out) {
  const auto vs = variants();
  std::printf(
      "\nHeld-out loss (nats a byte; ln 256 = 5.55 at chance) after %.1f s of training, "
      "Adam 5e-4, fp32, %lld tokens a step; steps taken in brackets\n\n| L | B |",
      o.budget_s, static_cast<long long>(z.tokens_per_step));
  for (const auto& v : vs) std::printf(" %s |", v.name.c_str());
  std::printf("\n|---|---|");
  for (size_t i = 0; i < vs.size(); ++i) std::printf("---|");
  std::printf("\n");
  for (const int64_t length : z.lengths) {
    if (out_of_time(o, ("held-out loss at L " + std::to_string(length)).c_str())) return;
    const int64_t batch = std::max<int64_t>(1, z.tokens_per_step / length);
    std::printf("| %lld | %lld |", static_cast<long long>(length), static_cast<long long>(batch));
    const auto eval_window = windows(held_out, batch, length, 99);
    for (const auto& v : vs) {
      std::string cell;
      try {
        auto model = make_model(z, v, torch::kFloat);
        torch::optim::Adam adam(model->parameters(), torch::optim::AdamOptions(5e-4));
        int steps = 0;
        synchronize();
        const auto start = Clock::now();
        while (std::chrono::duration<double>(Clock::now() - start).count() < o.budget_s) {
          adam.zero_grad();
          lm_loss(model, windows(train, batch, length, 1000 + steps)).backward();
          adam.step();
          ++steps;
          synchronize();
        }
        torch::NoGradGuard no_grad;
        model->eval();
        const double loss = lm_loss(model, eval_window).item<double>();
        char text[48];
        std::snprintf(text, sizeof text, "%.3f (%d)", loss, steps);
        cell = text;
      } catch (const std::exception& e) {
        cell = short_message(e);
      }
      release_cached_memory();
      std::printf(" %s |", cell.c_str());
      std::fflush(stdout);
    }
    std::printf("\n");
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  const bool known = flt::bench::read_flags(
      argc, argv, "[--budget S] [--time-limit S] [--text-root DIR]", options.dry_run,
      [&](const std::string& flag, const std::string& value) {
        if (flag == "--budget") {
          options.budget_s = flt::bench::positive_number(flag, value);
        } else if (flag == "--time-limit") {
          options.time_limit_s = flt::bench::positive_number(flag, value);
        } else if (flag == "--text-root") {
          options.text_root = value;
        } else {
          return false;
        }
        return true;
      });
  if (!known) return 2;
  g_start = Clock::now();
  flt::init(/*quiet=*/true);
  const auto device = flt::bench::run_device(options.dry_run, "flt_long_context_bench");
  if (!device) return kSkipped;
  g_device = *device;
  const Sizes sizes = options.dry_run ? Sizes::dry_run() : Sizes();
  if (options.dry_run) {
    std::printf(
        "flt_long_context_bench --device cpu: a dry run at small sizes; its numbers mean "
        "nothing\n");
    options.budget_s = std::min(options.budget_s, 0.5);
  }
  const auto text = repository_text(options.text_root);
  const int64_t split = text.size(0) * 7 / 8;
  const auto train = text.narrow(0, 0, split),
             held_out = text.narrow(0, split, text.size(0) - split);
  std::printf(
      "TransformerLM: bytes (vocabulary 256), E %lld, %lld heads, %lld layers, causal; text "
      "%lld bytes of the repository's Markdown and C++ (%lld train, %lld held out)\n",
      static_cast<long long>(sizes.embed), static_cast<long long>(sizes.heads),
      static_cast<long long>(sizes.layers), static_cast<long long>(text.size(0)),
      static_cast<long long>(split), static_cast<long long>(text.size(0) - split));
#if TORCH_VERSION_MAJOR < 2
  std::printf(
      "LibTorch %d.%d has no scaled_dot_product_attention: 'softmax (SDPA)' runs the "
      "composite softmax\n",
      TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR);
#endif
  step_table(sizes, options, train);
  optimizer_table(sizes, options, train);
  budget_table(sizes, options, train, held_out);
  std::printf("\nflt_long_context_bench: %.0f s\n", seconds_since_start());
  return 0;
}
