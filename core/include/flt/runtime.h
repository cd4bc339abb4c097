#pragma once
// Process-wide runtime set-up shared by every FLT executable: threads and BLAS checks.

#include <string>

namespace flt {

/// What `init()` found and set.
struct RuntimeInfo {
  int threads = 1;                ///< intra-op threads LibTorch uses after init
  bool threads_from_env = false;  ///< true when OMP_NUM_THREADS chose the thread count
  std::string blas;               ///< BLAS library resolved at run time (path), or "unknown"
  bool reference_blas = false;    ///< true for the slow netlib reference BLAS
  double matmul_gflops = 0.0;     ///< measured float32 256x256 matmul throughput
  std::string wait_policy;        ///< OMP_WAIT_POLICY seen by the OpenMP runtime ("" when unset)
};

/// Sets up LibTorch for this machine and returns what it found. Idempotent; call it first in
/// main().
///  - intra-op threads = hardware cores, unless OMP_NUM_THREADS is set (then LibTorch's choice
///  stays);
///  - OpenBLAS's own pool gets the same count, so the two pools do not oversubscribe the cores;
///  - measures a small matmul once and warns on stderr when the BLAS is the reference one
///    (about 40x slower: install libopenblas0-pthread).
/// OMP_WAIT_POLICY can only be set before the OpenMP runtime starts: the project's scripts export
/// OMP_WAIT_POLICY=PASSIVE, and `info.wait_policy` reports what the process got.
const RuntimeInfo& init(bool quiet = false);

/// Sets the intra-op thread count of LibTorch and of OpenBLAS's pool together (after `init`).
/// Throws naming the value unless threads >= 1.
void set_threads(int threads);

/// One line describing the runtime, e.g. for benchmark headers and the visualizer's status bar.
std::string runtime_summary(const RuntimeInfo& info);

/// Library version, e.g. "0.1.0".
const char* version();

}  // namespace flt
