# flt_gpu_tests (tests/gpu_suite.cpp), flt_gpu_bench (bench/bench_gpu.cpp) and
# flt_long_context_bench (bench/bench_long_context.cpp): the GPU test suite and the GPU benchmarks, plain programs that need only LibTorch and flt (the GPU machine has no
# GoogleTest or Google Benchmark). One translation unit each. Built with the tests / benchmarks so
# CI compiles them; otherwise defined but built only on request (scripts/gpu-check asks for them).
# Without a CUDA device they print "no CUDA device: skipped" and exit 77 (ctest: skipped).
function(flt_add_gpu_program name source build_by_default)
  add_executable(${name} ${source})
  target_link_libraries(${name} PRIVATE flt::flt flt_detail)  # flt_detail: median
  if(FLT_CUDA_ENABLED)
    target_link_libraries(${name} PRIVATE CUDA::cudart)  # the benchmark's device query
  endif()
  if(NOT build_by_default)
    set_target_properties(${name} PROPERTIES EXCLUDE_FROM_ALL ON)
  endif()
endfunction()

flt_add_gpu_program(flt_gpu_tests "${PROJECT_SOURCE_DIR}/tests/gpu_suite.cpp" ${FLT_BUILD_TESTS})
flt_add_gpu_program(flt_gpu_bench "${PROJECT_SOURCE_DIR}/bench/bench_gpu.cpp" ${FLT_BUILD_BENCH})
# Long-context TransformerLM training (its text: the repository's own Markdown and C++ files).
flt_add_gpu_program(flt_long_context_bench "${PROJECT_SOURCE_DIR}/bench/bench_long_context.cpp"
                    ${FLT_BUILD_BENCH})
target_compile_definitions(flt_long_context_bench PRIVATE FLT_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
