# Resolves FLT_WITH_DISTRIBUTED (ON / OFF / AUTO) into FLT_DISTRIBUTED_ENABLED: whether
# optimizer/metatrain/src/distributed.cpp is compiled with PyTorch's c10d Gloo process group (multi-process
# meta-training). It needs c10d's headers (LibTorch), Gloo's headers (Debian libgloo-dev) and the
# symbols in the LibTorch found (Debian's libtorch_cpu.so exports them); the test program below
# compiles and links what distributed.cpp uses. Without it the library still builds and
# flt::optim::connect() says why it cannot. Asking for ON when it is impossible is a configure error.
include(CheckCXXSourceCompiles)
set(FLT_DISTRIBUTED_ENABLED OFF)
if(NOT FLT_WITH_DISTRIBUTED STREQUAL "OFF")
  set(CMAKE_REQUIRED_LIBRARIES torch)
  set(CMAKE_REQUIRED_DEFINITIONS -DUSE_C10D_GLOO)
  set(CMAKE_REQUIRED_QUIET ON)
  check_cxx_source_compiles([[
    #include <torch/csrc/distributed/c10d/FileStore.hpp>
    #include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
    #include <torch/csrc/distributed/c10d/TCPStore.hpp>
    int main(int argc, char** argv) {
      if (argc > 5) {  // links, never runs
        c10d::TCPStore tcp("127.0.0.1", c10d::TCPStoreOptions{});
        auto store = c10::make_intrusive<c10d::FileStore>(argv[1], 1);
        auto options = c10d::ProcessGroupGloo::Options::create();
        options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
        c10d::ProcessGroupGloo group(store, 0, 1, options);
      }
      return 0;
    }]] FLT_C10D_GLOO_LINKS)
  unset(CMAKE_REQUIRED_LIBRARIES)
  unset(CMAKE_REQUIRED_DEFINITIONS)
  unset(CMAKE_REQUIRED_QUIET)
  if(FLT_C10D_GLOO_LINKS)
    set(FLT_DISTRIBUTED_ENABLED ON)
  elseif(FLT_WITH_DISTRIBUTED)  # ON (not AUTO)
    message(FATAL_ERROR "FLT_WITH_DISTRIBUTED=ON but a program using c10d's ProcessGroupGloo, "
                        "TCPStore and FileStore does not compile and link against the LibTorch "
                        "found (${Torch_DIR}); Debian: apt-get install libgloo-dev. Use "
                        "-DFLT_WITH_DISTRIBUTED=AUTO or OFF to build without distributed "
                        "meta-training.")
  endif()
endif()
if(FLT_DISTRIBUTED_ENABLED)
  message(STATUS "Distributed meta-training: c10d Gloo (TCPStore, FileStore)")
else()
  message(STATUS "Distributed meta-training: off (c10d's Gloo process group not usable here)")
endif()
