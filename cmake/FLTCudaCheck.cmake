# flt_cuda_check: compiles kernels/cuda/*.cu with nvcc alone (no LibTorch, no CMake CUDA language)
# and links the standalone harness (CPU reference vs GPU, dev/cuda-harness/harness.cu), so CI
# machines without a GPU or a CUDA LibTorch still prove the CUDA code compiles. Built on request
# (ctest's cuda_compile_check builds it); absent nvcc, the test reports itself skipped.
set(FLT_CUDA_CHECK_ARCHS "80;90" CACHE STRING "SM architectures the nvcc check target compiles for")

if(FLT_NVCC)
  set(_flags -std=c++17 -O2 -Xcompiler=-Wall
             -I${PROJECT_SOURCE_DIR}/kernels/include -I${PROJECT_SOURCE_DIR}/kernels/cuda)
  foreach(arch IN LISTS FLT_CUDA_CHECK_ARCHS)
    list(APPEND _flags -gencode arch=compute_${arch},code=sm_${arch})
  endforeach()
  file(GLOB _cuda_kernels CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/kernels/cuda/*.cu)
  file(GLOB _cuda_headers CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/kernels/cuda/*.h
                                            ${PROJECT_SOURCE_DIR}/kernels/cuda/*.cuh
                                            ${PROJECT_SOURCE_DIR}/dev/cuda-harness/*.h
                                            ${PROJECT_SOURCE_DIR}/dev/cuda-harness/*.cu
                                            ${PROJECT_SOURCE_DIR}/tests/cuda_emulation/fourier_reference.h
                                            ${PROJECT_SOURCE_DIR}/kernels/include/flt/kernels/fourier_series.h
                                            ${PROJECT_SOURCE_DIR}/kernels/include/flt/kernels/schedule_rule.h)
  set(_objects "")
  foreach(source IN LISTS _cuda_kernels)
    get_filename_component(name ${source} NAME_WE)
    set(object ${CMAKE_CURRENT_BINARY_DIR}/cuda_check/${name}.o)
    add_custom_command(OUTPUT ${object}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_CURRENT_BINARY_DIR}/cuda_check
      COMMAND ${FLT_NVCC} ${_flags} -c ${source} -o ${object}
      DEPENDS ${source} ${_cuda_headers}
      COMMENT "nvcc (check) ${name}.cu" VERBATIM)
    list(APPEND _objects ${object})
  endforeach()
  # The harness and its own kernel variants (the candidates the library's kernels were chosen from).
  file(GLOB _harness_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/dev/cuda-harness/*.cu)
  set(_harness ${CMAKE_CURRENT_BINARY_DIR}/flt_cuda_harness)
  add_custom_command(OUTPUT ${_harness}
    COMMAND ${FLT_NVCC} ${_flags} -I${PROJECT_SOURCE_DIR}/tests/cuda_emulation ${_harness_sources}
            ${_objects} -o ${_harness}
    DEPENDS ${_harness_sources} ${_objects} ${_cuda_headers}
    COMMENT "nvcc (check) flt_cuda_harness" VERBATIM)
  add_custom_target(flt_cuda_check DEPENDS ${_objects} ${_harness})
endif()
