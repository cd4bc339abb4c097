#include "flt/runtime.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <dlfcn.h>

#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <thread>

#include "flt/version.h"

namespace flt {
namespace {

// The library that provides sgemm_ to LibTorch: Debian switches libblas.so.3 through alternatives
// (openblas-pthread/ vs blas/), and the global symbol search order decides which of the loaded BLAS
// libraries answers, so ask the loader rather than the list of mapped files.
std::string loaded_blas_path() {
  void* symbol = dlsym(RTLD_DEFAULT, "sgemm_");
  Dl_info where{};
  if (symbol == nullptr || dladdr(symbol, &where) == 0 || where.dli_fname == nullptr)
    return "unknown";
  char resolved[4096];
  return realpath(where.dli_fname, resolved) ? resolved : where.dli_fname;
}

// Debian's netlib reference BLAS lives in .../blas/libblas.so.3; optimised ones name themselves.
bool is_reference_blas(const std::string& path) {
  for (const char* fast : {"openblas", "mkl", "blis", "atlas"}) {
    if (path.find(fast) != std::string::npos) return false;
  }
  return path.find("libblas") != std::string::npos;
}

// OpenBLAS keeps a thread pool of its own; size it like LibTorch's when the symbol exists.
void set_openblas_threads(int threads) {
  using SetThreads = void (*)(int);
  if (auto fn = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) {
    fn(threads);
  }
}

double measure_matmul_gflops() {
  constexpr int64_t n = 256;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(/*seed=*/1);
  const auto a = at::randn({n, n}, gen, at::kFloat);
  const auto b = at::randn({n, n}, gen, at::kFloat);
  at::mm(a, b);  // warm-up: page in the BLAS, start its threads
  int reps = 0;
  const auto start = std::chrono::steady_clock::now();
  double seconds = 0.0;
  do {
    at::mm(a, b);
    ++reps;
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  } while (seconds < 0.05 && reps < 1000);
  return 2.0 * n * n * n * reps / seconds / 1e9;
}

}  // namespace

const RuntimeInfo& init(bool quiet) {
  static RuntimeInfo info;
  static std::once_flag once;
  std::call_once(once, [quiet] {
    const char* omp_threads = std::getenv("OMP_NUM_THREADS");
    info.threads_from_env = omp_threads != nullptr && *omp_threads != '\0';
    if (!info.threads_from_env) {
      const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
      at::set_num_threads(cores);
    }
    info.threads = at::get_num_threads();
    set_openblas_threads(info.threads);
    const char* wait = std::getenv("OMP_WAIT_POLICY");
    info.wait_policy = wait ? wait : "";
    info.matmul_gflops = measure_matmul_gflops();
    info.blas = loaded_blas_path();
    info.reference_blas = is_reference_blas(info.blas);
    if (info.reference_blas && !quiet) {
      std::fprintf(stderr,
                   "flt: warning: LibTorch is using the reference BLAS (%s, %.1f GFLOP/s on a "
                   "256x256 matmul); matmul is about 40x slower than with OpenBLAS. Install "
                   "libopenblas0-pthread.\n",
                   info.blas.c_str(), info.matmul_gflops);
    }
  });
  return info;
}

void set_threads(int threads) {
  TORCH_CHECK(threads >= 1, "flt::set_threads: thread count must be >= 1, got ", threads);
  at::set_num_threads(threads);
  set_openblas_threads(threads);
}

std::string runtime_summary(const RuntimeInfo& info) {
  std::ostringstream out;
  out << "flt " << FLT_VERSION_STRING << " | threads " << info.threads
      << (info.threads_from_env ? " (OMP_NUM_THREADS)" : "") << " | BLAS "
      << (info.reference_blas ? "reference (slow) " : "") << info.blas << " | matmul "
      << static_cast<int>(info.matmul_gflops + 0.5) << " GFLOP/s | OMP_WAIT_POLICY "
      << (info.wait_policy.empty() ? "unset" : info.wait_policy);
  return out.str();
}

const char* version() {
  return FLT_VERSION_STRING;
}

}  // namespace flt
