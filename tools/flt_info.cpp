// flt-info: prints what flt::init() found on this machine (threads, BLAS, matmul throughput).
//   build/tools/flt-info
#include <CLI/CLI.hpp>
#include <cstdio>

#include "flt/runtime.h"

int main(int argc, char** argv) {
  CLI::App app{
      "flt-info: prints what flt::init() found on this machine (threads, BLAS, matmul "
      "throughput)."};
  CLI11_PARSE(app, argc, argv);
  const auto& info = flt::init();
  std::printf("%s\n", flt::runtime_summary(info).c_str());
  return 0;
}
