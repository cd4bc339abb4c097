# Resolves FLT_WITH_CUDA (ON / OFF / AUTO) into:
#   FLT_NVCC          path of nvcc, or empty
#   FLT_TORCH_CUDA    whether the LibTorch found was built with CUDA
#   FLT_CUDA_ENABLED  whether the CUDA kernels and their ATen glue are compiled into flt
# Asking for ON when it is impossible is a configure error that names what is missing.
find_program(FLT_NVCC nvcc HINTS "$ENV{CUDA_HOME}/bin" /usr/local/cuda/bin)
if(TARGET torch_cuda OR TORCH_CUDA_LIBRARIES OR CAFFE2_USE_CUDA)
  set(FLT_TORCH_CUDA ON)
else()
  set(FLT_TORCH_CUDA OFF)
endif()

set(FLT_CUDA_ENABLED OFF)
if(FLT_WITH_CUDA STREQUAL "AUTO")
  if(FLT_NVCC AND FLT_TORCH_CUDA)
    set(FLT_CUDA_ENABLED ON)
  endif()
elseif(FLT_WITH_CUDA)
  set(_missing "")
  if(NOT FLT_NVCC)
    list(APPEND _missing "nvcc (looked in PATH, $CUDA_HOME/bin and /usr/local/cuda/bin)")
  endif()
  if(NOT FLT_TORCH_CUDA)
    list(APPEND _missing "a LibTorch built with CUDA (found ${Torch_DIR}, which is CPU-only)")
  endif()
  if(_missing)
    string(REPLACE ";" " and " _missing "${_missing}")
    message(FATAL_ERROR "FLT_WITH_CUDA=ON but this machine lacks ${_missing}. "
                        "Use -DFLT_WITH_CUDA=AUTO or OFF for a CPU build.")
  endif()
  set(FLT_CUDA_ENABLED ON)
endif()

if(FLT_CUDA_ENABLED)
  if(NOT CMAKE_CUDA_COMPILER)
    set(CMAKE_CUDA_COMPILER "${FLT_NVCC}")
  endif()
  # The shared CUDA runtime, the one LibTorch loads: one runtime in the process, so the streams
  # LibTorch hands the kernels belong to the runtime that launches them.
  set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
  enable_language(CUDA)
  if(NOT CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES native)
  endif()
  find_package(CUDAToolkit REQUIRED)  # CUDA::cudart: headers and runtime for the ATen glue
endif()

# Adds the CUDA kernels (raw-pointer launchers, kernels/cuda/*.cu) and their ATen glue
# (kernels/cuda/aten_glue.cpp, the only part that needs a CUDA LibTorch) to `target`.
function(flt_add_cuda_sources target)
  file(GLOB _cuda_sources CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/kernels/cuda/*.cu")
  target_sources(${target} PRIVATE ${_cuda_sources} "${PROJECT_SOURCE_DIR}/kernels/cuda/aten_glue.cpp")
  target_include_directories(${target} PRIVATE "${PROJECT_SOURCE_DIR}/kernels/cuda")
  # PUBLIC: the shared library that takes the objects links the runtime they call.
  target_link_libraries(${target} PUBLIC CUDA::cudart)
  set_target_properties(${target} PROPERTIES CUDA_STANDARD 17)
endfunction()
