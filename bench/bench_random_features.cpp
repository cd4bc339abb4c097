// Random-feature attention (Performer, FLT, SchoenbAt) against exact softmax: forward and
// forward+backward time, peak memory and page faults for L = 256 .. 8192 (the random-feature
// variants also 16384), B = 1, H = 8, D = 64, m = 64, r = 32, float32; non-causal, Performer and
// FLT with m = 256 features too (and textbook FAVOR+ at m = 64 and 256, the peers' sequence of
// operations written here with plain LibTorch ops as their stand-in) and FLT with a signed spectrum
// (N1 != N2: its position block projected twice); causal Performer and SchoenbAt against causal
// softmax. After the runs it prints, from the same run, each variant's time and memory relative to
// softmax (causal: to causal softmax), the crossover length, FLT / Performer at L = 4096, and
// Performer against the plain-ops rows at m = 64 and 256 (time and faults side by side).
//
// Peak memory (flt/detail/allocation_counter.h): for one untimed call, the largest number of bytes
// live at once above what was live before the call (inputs excluded, autograd buffers included).
// Minor page faults per call (getrusage over the timed calls): where a fault is costly (the machine
// line's fresh-page bandwidth), a call that maps and frees large temporaries pays them on every
// call.
//
// --compare_allocators runs the program again (same arguments) under glibc's default allocator and
// with freed memory kept (MALLOC_MMAP_THRESHOLD_ and MALLOC_TRIM_THRESHOLD_ at 1e9, which glibc
// reads only at start-up: hence new processes), --compare_rounds=N times each (3 by default),
// alternating, and prints each cell's median time and faults side by side with the rounds' range of
// ratios. The variables are the comparison itself; the library never sets them.
#include <benchmark/benchmark.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bench_util.h"
#include "flt/detail/allocation_counter.h"
#include "flt/detail/statistics.h"
#include "flt/flt.h"

namespace fa = flt::attention;

namespace {

// ---- the variants
// --------------------------------------------------------------------------------

constexpr int64_t kBatch = 1, kHeads = 8, kDim = 64, kFeatures = 64, kRpeFeatures = 32;

/// A measured configuration: the attention options and whether calls are causal. Ratios are taken
/// against exact softmax with the same causality.
struct Variant {
  std::string name;
  fa::AttentionOptions options;
  bool causal = false;
  /// Set for a plain composite written here instead of a library module (options unused).
  std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&)>
      composite = nullptr;
  std::string reference() const { return causal ? "softmax-causal" : "softmax"; }
};

/// Non-causal FAVOR+ written the textbook way (Choromanski et al. 2021, positive features), the
/// sequence of operations public implementations such as performer-pytorch run: scaled q and k
/// projected onto m Gaussian rows, exp(Wx - |x|^2/2 - max) per query and with one max over all
/// keys, plus a small epsilon, then K^T V, the normaliser and the read-out as plain products.
/// The peers' own code cannot be installed here (not in Debian); this row stands in for their
/// arithmetic so that the library's Performer at m = 64 and 256 has a side-by-side baseline.
torch::Tensor textbook_favor(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             const torch::Tensor& rows) {
  const double normalizer = std::pow(static_cast<double>(q.size(-1)), -0.25);
  const double ratio = 1.0 / std::sqrt(static_cast<double>(rows.size(0)));
  const double epsilon = 1e-4;
  const auto q_logits = at::matmul(q * normalizer, rows.t());
  const auto k_logits = at::matmul(k * normalizer, rows.t());
  const auto q_half_norm = (q * q).sum(-1, true) * (normalizer * normalizer / 2.0);
  const auto k_half_norm = (k * k).sum(-1, true) * (normalizer * normalizer / 2.0);
  const auto q_features =
      ratio * (at::exp(q_logits - q_half_norm - std::get<0>(q_logits.max(-1, true))) + epsilon);
  const auto k_features = ratio * (at::exp(k_logits - k_half_norm - k_logits.max()) + epsilon);
  const auto context = at::matmul(k_features.transpose(-2, -1), v);  // (B, H, m, D)
  const auto denominator = at::matmul(q_features, k_features.sum(-2).unsqueeze(-1));
  return at::matmul(q_features, context) / denominator;
}

const std::vector<Variant>& variants() {
  const fa::AttentionOptions softmax = fa::SoftmaxAttentionOptions();
  const fa::AttentionOptions performer = fa::PerformerAttentionOptions().features(kFeatures);
  const fa::AttentionOptions schoenbat = fa::SchoenbAttentionOptions().features(kFeatures);
  static const std::vector<Variant> all = {
      {"softmax", softmax, false},
      {"performer", performer, false},
      {"performer-m256", fa::PerformerAttentionOptions().features(256), false},
      {"favor-textbook", performer, false,
       [](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
         static const auto rows = torch::randn({kFeatures, kDim});
         return textbook_favor(q, k, v, rows);
       }},
      {"favor-m256-textbook", performer, false,
       [](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
         static const auto rows = torch::randn({256, kDim});
         return textbook_favor(q, k, v, rows);
       }},
      {"flt", fa::FLTAttentionOptions().features(kFeatures).rpe_features(kRpeFeatures), false},
      {"flt-m256", fa::FLTAttentionOptions().features(256).rpe_features(kRpeFeatures), false},
      // A spectrum with a negative part (here all of it: f = -Gaussian): N1 != N2, so the position
      // block is projected for queries and keys separately (one product more than "flt").
      {"flt-signed",
       fa::FLTAttentionOptions().features(kFeatures).rpe_features(kRpeFeatures).rpe_weight(-1.0),
       false},
      {"schoenbat", schoenbat, false},
      {"softmax-causal", softmax, true},
      {"performer-causal", performer, true},
      {"schoenbat-causal", schoenbat, true},
  };
  return all;
}

long minor_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// One call: forward (no autograd graph) or forward + backward of sum(out).
void run_once(fa::Attention& attention, const Variant& variant, const torch::Tensor& q,
              const torch::Tensor& k, const torch::Tensor& v, bool backward) {
  fa::AttentionCall call;
  call.causal = variant.causal;
  const auto forward = [&] {
    return variant.composite ? variant.composite(q, k, v) : attention.forward(q, k, v, call);
  };
  if (!backward) {
    torch::NoGradGuard no_grad;
    benchmark::DoNotOptimize(forward().data_ptr());
    return;
  }
  forward().sum().backward();
  q.mutable_grad() = torch::Tensor();
  k.mutable_grad() = torch::Tensor();
  v.mutable_grad() = torch::Tensor();
}

void bench_attention(benchmark::State& state, const Variant& variant, bool backward,
                     int64_t length) {
  torch::manual_seed(0);
  auto handle = fa::make_attention(variant.options, kHeads, kDim);
  fa::Attention* attention = handle.attention;
  auto q = torch::randn({kBatch, kHeads, length, kDim}).requires_grad_(backward);
  auto k = torch::randn({kBatch, kHeads, length, kDim}).requires_grad_(backward);
  auto v = torch::randn({kBatch, kHeads, length, kDim}).requires_grad_(backward);
  // Untimed call: peak memory above the live baseline.
  const size_t peak =
      flt::peak_cpu_bytes_during([&] { run_once(*attention, variant, q, k, v, backward); });
  const long faults_before = minor_faults();
  for (auto _ : state) run_once(*attention, variant, q, k, v, backward);
  state.counters["peak_MB"] = static_cast<double>(peak) / (1 << 20);
  state.counters["faults"] =
      static_cast<double>(minor_faults() - faults_before) / static_cast<double>(state.iterations());
}

// ---- summary -----------------------------------------------------------------------------------

// 16384 only for the random-feature variants: exact softmax would hold 8 GB of scores there.
const std::vector<int64_t> kLengths = {256, 512, 1024, 2048, 4096, 8192, 16384};
constexpr int64_t kLongestSoftmax = 8192;

std::string key(const std::string& name, const std::string& mode, int64_t length) {
  return name + "/" + mode + "/" + std::to_string(length);
}

double peak_mb(const flt::bench::Result& r) {
  return r.counters.at("peak_MB");
}

// The library's non-causal Performer against the same forward written with plain LibTorch ops
// (textbook_favor), at m = 64 and 256, side by side from one run: each cell's median over its
// repetitions (--benchmark_repetitions, best with --benchmark_enable_random_interleaving=true,
// which spreads the machine's drift over both sides), ms and faults a call.
void print_plain_ops_table(const flt::bench::CollectingReporter& results) {
  std::printf(
      "\n== Performer (non-causal) against plain ops, the public code's sequence: median ms and "
      "minor page faults per call over the repetitions; plain / ours above 1: ours faster\n");
  std::printf("%4s %-8s %6s | %9s %8s | %9s %8s | %12s | %4s\n", "m", "pass", "L", "ours ms",
              "faults", "plain ms", "faults", "plain / ours", "reps");
  const std::pair<int, std::pair<const char*, const char*>> pairs[] = {
      {kFeatures, {"performer", "favor-textbook"}},
      {256, {"performer-m256", "favor-m256-textbook"}}};
  const auto medians = [&](const std::string& name) {
    std::vector<double> ms, faults;
    for (const auto& r : results.all(name)) {
      ms.push_back(r.ms);
      faults.push_back(r.counters.at("faults"));
    }
    return std::make_pair(flt::detail::median(ms), flt::detail::median(faults));
  };
  for (const auto& [m, names] : pairs) {
    for (const std::string mode : {"fwd", "fwd+bwd"}) {
      for (const auto length : kLengths) {
        const auto& ours_runs = results.all(key(names.first, mode, length));
        const auto& plain_runs = results.all(key(names.second, mode, length));
        if (ours_runs.empty() || plain_runs.empty()) continue;
        const auto [ours_ms, ours_faults] = medians(key(names.first, mode, length));
        const auto [plain_ms, plain_faults] = medians(key(names.second, mode, length));
        std::printf("%4d %-8s %6lld | %9.2f %8.0f | %9.2f %8.0f | %11.2fx | %4zu\n", m,
                    mode.c_str(), static_cast<long long>(length), ours_ms, ours_faults, plain_ms,
                    plain_faults, plain_ms / ours_ms,
                    std::min(ours_runs.size(), plain_runs.size()));
      }
    }
  }
}

void print_summary(const flt::bench::CollectingReporter& results) {
  for (const std::string mode : {"fwd", "fwd+bwd"}) {
    std::printf(
        "\n== %s: time ms (ratio to softmax) | peak MB (ratio to softmax) | minor page faults per "
        "call\n",
        mode.c_str());
    std::printf("%6s", "L");
    for (const auto& v : variants()) std::printf(" | %-38s", v.name.c_str());
    std::printf("\n");
    for (const auto length : kLengths) {
      bool measured = false;
      for (const auto& v : variants())
        measured = measured || results.find(key(v.name, mode, length));
      if (!measured) continue;  // filtered out
      std::printf("%6lld", static_cast<long long>(length));
      for (const auto& v : variants()) {
        const auto* r = results.find(key(v.name, mode, length));
        const auto* base = results.find(key(v.reference(), mode, length));
        if (!r) {
          std::printf(" | %-38s", "-");
        } else if (!base) {  // softmax filtered out, or longer than it runs
          std::printf(" | %8.2f (%6s) %7.1f (%6s) %7.0f", r->ms, "-", peak_mb(*r), "-",
                      r->counters.at("faults"));
        } else {
          std::printf(" | %8.2f (%5.2fx) %7.1f (%5.2fx) %7.0f", r->ms, r->ms / base->ms,
                      peak_mb(*r), peak_mb(*r) / peak_mb(*base), r->counters.at("faults"));
        }
      }
      std::printf("\n");
    }
    for (const auto& v : variants()) {
      if (v.name == v.reference()) continue;
      const auto& name = v.name;
      // Crossover: the smallest measured L from which the variant is faster at every larger L.
      int64_t crossover = -1;
      for (auto it = kLengths.rbegin(); it != kLengths.rend(); ++it) {
        const auto* r = results.find(key(name, mode, *it));
        const auto* base = results.find(key(v.reference(), mode, *it));
        if (!r || !base) continue;
        if (r->ms >= base->ms) break;
        crossover = *it;
      }
      if (crossover > 0) {
        std::printf("%s %s: faster than %s from L = %lld on\n", name.c_str(), mode.c_str(),
                    v.reference().c_str(), static_cast<long long>(crossover));
      } else {
        std::printf("%s %s: not faster than %s at the longest measured L\n", name.c_str(),
                    mode.c_str(), v.reference().c_str());
      }
    }
    const auto* performer = results.find(key("performer", mode, 4096));
    for (const std::string name : {"flt", "flt-signed"}) {
      const auto* flt = results.find(key(name, mode, 4096));
      if (!flt || !performer) continue;
      std::printf("%s / Performer at L = 4096 (%s): time %.2fx, peak memory %.2fx\n", name.c_str(),
                  mode.c_str(), flt->ms / performer->ms, peak_mb(*flt) / peak_mb(*performer));
    }
  }
}

// ---- --compare_allocators --------------------------------------------------------------------

constexpr const char* kResultsVariable = "FLT_BENCH_RESULTS";

/// In a child of --compare_allocators: every result as "name ms faults" lines, for the parent.
void write_results(const flt::bench::CollectingReporter& results, const char* path) {
  std::ofstream out(path);
  for (const auto& [name, r] : results.results)
    out << name << ' ' << r.ms << ' ' << r.counters.at("faults") << '\n';
}

std::map<std::string, std::pair<double, double>> read_results(const std::string& path) {
  std::map<std::string, std::pair<double, double>> results;
  std::ifstream in(path);
  std::string name;
  double ms = 0, faults = 0;
  while (in >> name >> ms >> faults) results[name] = {ms, faults};
  return results;
}

/// One run of this program (argv) in a child whose allocator is glibc's default or keeps freed
/// memory; its results by benchmark name (ms, faults), or nothing when it failed.
std::optional<std::map<std::string, std::pair<double, double>>> run_child(std::vector<char*> args,
                                                                          bool kept) {
  char path[] = "/tmp/bench_random_features_XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return std::nullopt;
  close(fd);
  const pid_t child = fork();
  if (child == 0) {
    setenv(kResultsVariable, path, 1);
    if (kept) {
      setenv("MALLOC_MMAP_THRESHOLD_", "1000000000", 1);
      setenv("MALLOC_TRIM_THRESHOLD_", "1000000000", 1);
    } else {
      unsetenv("MALLOC_MMAP_THRESHOLD_");
      unsetenv("MALLOC_TRIM_THRESHOLD_");
    }
    execv("/proc/self/exe", args.data());
    std::perror("execv");
    _exit(127);
  }
  int status = 0;
  const bool ok =
      child > 0 && waitpid(child, &status, 0) >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  auto results = read_results(path);
  std::remove(path);
  if (!ok) return std::nullopt;
  return results;
}

/// Runs this program with argv (less --compare_allocators and --compare_rounds) `rounds` times
/// under each allocator, alternating (default, kept, default, ...), so a machine whose speed drifts
/// during the run weighs on both alike, and prints each cell's medians side by side with the range
/// of the rounds' ratios.
int compare_allocators(std::vector<char*> args, int rounds) {
  const std::pair<const char*, bool> settings[] = {{"default glibc allocator", false},
                                                   {"freed memory kept", true}};
  // runs[setting][round]: results by name
  std::vector<std::vector<std::map<std::string, std::pair<double, double>>>> runs(2);
  args.push_back(nullptr);
  for (int round = 0; round < rounds; ++round) {
    for (size_t i = 0; i < 2; ++i) {
      std::printf("\n#### round %d of %d: %s\n", round + 1, rounds, settings[i].first);
      std::fflush(stdout);
      auto results = run_child(args, settings[i].second);
      if (!results) {
        std::fprintf(stderr, "bench_random_features: the run under \"%s\" failed\n",
                     settings[i].first);
        return 1;
      }
      runs[i].push_back(std::move(*results));
    }
  }
  std::printf(
      "\n== allocators, %d alternating rounds: median ms and minor page faults per call; default "
      "glibc | freed memory kept (MALLOC_MMAP_THRESHOLD_=MALLOC_TRIM_THRESHOLD_=1000000000) | "
      "median default / median kept, and the rounds' lowest and highest ratio\n",
      rounds);
  std::printf("%-36s | %9s %8s | %9s %8s | %6s  %s\n", "benchmark", "ms", "faults", "ms", "faults",
              "ratio", "rounds");
  for (const auto& v : variants()) {
    for (const std::string mode : {"fwd", "fwd+bwd"}) {
      for (const auto length : kLengths) {
        const auto name = key(v.name, mode, length);
        std::vector<double> ms[2], faults[2], ratios;
        for (int round = 0; round < rounds; ++round) {
          const auto a = runs[0][round].find(name), b = runs[1][round].find(name);
          if (a == runs[0][round].end() || b == runs[1][round].end()) continue;
          ms[0].push_back(a->second.first);
          faults[0].push_back(a->second.second);
          ms[1].push_back(b->second.first);
          faults[1].push_back(b->second.second);
          ratios.push_back(a->second.first / b->second.first);
        }
        if (ratios.empty()) continue;
        const auto [low, high] = std::minmax_element(ratios.begin(), ratios.end());
        std::printf("%-36s | %9.2f %8.0f | %9.2f %8.0f | %5.2fx  %.2f-%.2fx\n", name.c_str(),
                    flt::detail::median(ms[0]), flt::detail::median(faults[0]),
                    flt::detail::median(ms[1]), flt::detail::median(faults[1]),
                    flt::detail::median(ms[0]) / flt::detail::median(ms[1]), *low, *high);
      }
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> args(argv, argv + argc);
  const auto flag = std::find_if(args.begin(), args.end(), [](const char* a) {
    return std::strcmp(a, "--compare_allocators") == 0;
  });
  if (flag != args.end()) {
    args.erase(flag);
    int rounds = 3;
    const auto rounds_flag = std::find_if(args.begin(), args.end(), [](const char* a) {
      return std::strncmp(a, "--compare_rounds=", 17) == 0;
    });
    if (rounds_flag != args.end()) {
      char* end = nullptr;
      const long value = std::strtol(*rounds_flag + 17, &end, 10);
      if (*end != '\0' || value < 1 || value > 100) {
        std::fprintf(stderr, "bench_random_features: --compare_rounds must be 1-100, got %s\n",
                     *rounds_flag + 17);
        return 2;
      }
      rounds = static_cast<int>(value);
      args.erase(rounds_flag);
    }
    return compare_allocators(args, rounds);
  }
  const auto& info = flt::init();
  std::printf("machine: %s\n", flt::bench::machine_line(info).c_str());
  for (const auto& v : variants()) {
    for (const std::string mode : {"fwd", "fwd+bwd"}) {
      for (const auto length : kLengths) {
        if (v.name == v.reference() && length > kLongestSoftmax) continue;
        flt::bench::register_ms(key(v.name, mode, length),
                                [v, backward = mode != "fwd", length](benchmark::State& s) {
                                  bench_attention(s, v, backward, length);
                                });
      }
    }
  }
  const char* results_path = std::getenv(kResultsVariable);
  return flt::bench::run_collecting(argc, argv, [&](const flt::bench::CollectingReporter& r) {
    print_summary(r);
    print_plain_ops_table(r);
    if (results_path != nullptr) write_results(r, results_path);
  });
}
