// flt::init(): thread count, BLAS detection, summary line.
#include <ATen/Parallel.h>
#include <c10/core/CPUAllocator.h>

#include <cstdlib>
#include <thread>

#include "flt/detail/allocation_counter.h"
#include "flt/runtime.h"
#include "flt/version.h"
#include "test_util.h"

TEST(Runtime, InitSetsThreadsAndFindsOpenBLAS) {
  const auto& info = flt::init(/*quiet=*/true);
  if (std::getenv("OMP_NUM_THREADS") == nullptr) {
    EXPECT_EQ(info.threads, static_cast<int>(std::thread::hardware_concurrency()));
  }
  EXPECT_EQ(info.threads, at::get_num_threads());
  // The project's set-up installs libopenblas0-pthread; the reference BLAS here means it is
  // missing.
  EXPECT_FALSE(info.reference_blas) << "BLAS in use: " << info.blas;
  EXPECT_NE(info.blas.find("openblas"), std::string::npos) << info.blas;
  EXPECT_GT(info.matmul_gflops, 0.0);
  EXPECT_EQ(&info, &flt::init()) << "init() is idempotent and returns the same record";
}

TEST(Runtime, SummaryNamesEverything) {
  const auto line = flt::runtime_summary(flt::init(/*quiet=*/true));
  for (const char* part :
       {"flt " FLT_VERSION_STRING, "threads", "BLAS", "GFLOP/s", "OMP_WAIT_POLICY"}) {
    EXPECT_NE(line.find(part), std::string::npos) << line;
  }
  EXPECT_STREQ(flt::version(), FLT_VERSION_STRING);
}

TEST(Runtime, SetThreadsSetsLibTorchsPoolAndRejectsZero) {
  flt::init(/*quiet=*/true);
  const int before = at::get_num_threads();
  flt::set_threads(1);
  EXPECT_EQ(at::get_num_threads(), 1);
  flt::set_threads(before);
  EXPECT_EQ(at::get_num_threads(), before);
  flt::testing::expect_error([] { flt::set_threads(0); }, {"thread count", "0"});
}

// The counter sees tensors and raw buffers alike: LibTorch's raw_allocate (scratch buffers of
// some CPU ops, e.g. in a transformer layer) asserts that a DataPtr's context is its data pointer.
TEST(AllocationCounter, CountsTensorsAndRawBuffers) {
  const size_t tensor_peak = flt::peak_cpu_bytes_during([] {
    auto t = torch::ones({1024, 256});
  });  // 1 MiB
  EXPECT_GE(tensor_peak, size_t{1024 * 256 * 4});
  EXPECT_LT(tensor_peak, size_t{2 * 1024 * 256 * 4});
  const size_t live = flt::live_cpu_bytes();
  const size_t raw_peak = flt::peak_cpu_bytes_during([] {
    auto* allocator = c10::GetCPUAllocator();
    void* p = allocator->raw_allocate(1 << 20);
    ASSERT_NE(p, nullptr);
    allocator->raw_deallocate(p);
  });
  EXPECT_GE(raw_peak, size_t{1 << 20});
  EXPECT_EQ(flt::live_cpu_bytes(), live) << "raw buffers are released through the counter";
}
