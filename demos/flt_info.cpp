// flt-info: prints what flt::init() found on this machine (threads, BLAS, matmul throughput).
//   build/demos/flt-info
#include <cstdio>

#include "flt/runtime.h"

int main() {
  const auto& info = flt::init();
  std::printf("%s\n", flt::runtime_summary(info).c_str());
  return 0;
}
