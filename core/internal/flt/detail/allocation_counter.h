#pragma once
// Counts the bytes LibTorch allocates on the CPU, for peak-memory measurements in tests and
// benchmarks (a counting hook, not a timer): wraps the CPU allocator once, process-wide. Internal:
// the tests, benchmarks and lessons use it; it is not installed.

#include <cstddef>
#include <functional>

namespace flt {

/// Installs the counting allocator on first use (c10::SetCPUAllocator with a high priority) and
/// returns the peak of live CPU bytes above the live bytes at entry while `fn` runs. Tensors
/// allocated before the first call are not counted when freed (their bytes were never added).
size_t peak_cpu_bytes_during(const std::function<void()>& fn);

/// Live CPU bytes allocated through LibTorch since the counter was installed.
size_t live_cpu_bytes();

}  // namespace flt
