// flt::init(): thread count, BLAS detection, summary line.
#include <ATen/Parallel.h>

#include <cstdlib>
#include <thread>

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
