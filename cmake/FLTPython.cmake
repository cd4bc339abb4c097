# Resolves FLT_BUILD_PYTHON (ON / OFF / AUTO) into FLT_PYTHON_ENABLED: the Python package fltlab
# (python/) is a PyTorch C++ extension, so it needs a python3 whose torch uses the same LibTorch as
# this build (Debian: python3-torch, whose torch/lib links point at libtorch-dev's libraries),
# torch's libtorch_python, Python's headers and pybind11 (Debian: python3-dev, pybind11-dev).
# Sets FLT_PYTHON_EXECUTABLE, FLT_TORCH_PYTHON_LIBRARY and FLT_TORCH_PYBIND11_DEFINITIONS.
set(FLT_PYTHON_ENABLED OFF)
set(FLT_PYTHON_WHY "")

# The interpreter: FLT_PYTHON_EXECUTABLE when given, else the first python3 that imports torch,
# Debian's own first (a python3 earlier on PATH, say pyenv's, usually has no torch).
if(NOT FLT_BUILD_PYTHON STREQUAL "OFF" AND NOT FLT_PYTHON_EXECUTABLE)
  find_program(FLT_PATH_PYTHON3 python3)
  foreach(candidate /usr/bin/python3 ${FLT_PATH_PYTHON3})
    if(EXISTS "${candidate}" AND NOT FLT_PYTHON_EXECUTABLE)
      execute_process(COMMAND "${candidate}" -c "import torch" RESULT_VARIABLE rc
                      OUTPUT_QUIET ERROR_QUIET)
      if(rc EQUAL 0)
        set(FLT_PYTHON_EXECUTABLE "${candidate}" CACHE FILEPATH
            "python3 for the fltlab package (its torch must use this build's LibTorch)")
      endif()
    endif()
  endforeach()
  if(NOT FLT_PYTHON_EXECUTABLE)
    set(FLT_PYTHON_WHY "no python3 that imports torch (Debian: apt-get install python3-torch)")
  endif()
endif()

if(FLT_PYTHON_EXECUTABLE)
  # torch's folder, its libraries folder, and the pybind11 ABI strings torch was built with (an
  # extension must use the same ones to share pybind11's internals with torch, as
  # torch.utils.cpp_extension does).
  execute_process(
    COMMAND "${FLT_PYTHON_EXECUTABLE}" -c
            "import os, torch; c = torch._C; print(os.path.dirname(torch.__file__)); print(c._PYBIND11_COMPILER_TYPE); print(c._PYBIND11_STDLIB); print(c._PYBIND11_BUILD_ABI); print(torch.__version__)"
    RESULT_VARIABLE rc OUTPUT_VARIABLE torch_facts ERROR_VARIABLE torch_error
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    set(FLT_PYTHON_WHY "${FLT_PYTHON_EXECUTABLE} cannot import torch: ${torch_error}")
  else()
    string(REPLACE "\n" ";" torch_facts "${torch_facts}")
    list(GET torch_facts 0 FLT_PYTHON_TORCH_DIR)
    list(GET torch_facts 1 compiler_type)
    list(GET torch_facts 2 stdlib)
    list(GET torch_facts 3 build_abi)
    list(GET torch_facts 4 FLT_PYTHON_TORCH_VERSION)
    set(FLT_TORCH_PYBIND11_DEFINITIONS PYBIND11_COMPILER_TYPE="${compiler_type}"
        PYBIND11_STDLIB="${stdlib}" PYBIND11_BUILD_ABI="${build_abi}")
    # The same LibTorch: python's torch/lib/libtorch.so is the file this build links (TorchConfig's
    # TORCH_LIBRARY).
    file(REAL_PATH "${TORCH_LIBRARY}" project_torch)
    set(python_torch "${FLT_PYTHON_TORCH_DIR}/lib/libtorch.so")
    if(EXISTS "${python_torch}")
      file(REAL_PATH "${python_torch}" python_torch)
    endif()
    find_library(FLT_TORCH_PYTHON_LIBRARY torch_python PATHS "${FLT_PYTHON_TORCH_DIR}/lib"
                 NO_DEFAULT_PATH)
    set(Python3_EXECUTABLE "${FLT_PYTHON_EXECUTABLE}")
    find_package(Python3 COMPONENTS Interpreter Development.Module QUIET)
    find_package(pybind11 CONFIG QUIET)
    if(NOT python_torch STREQUAL project_torch)
      string(CONCAT FLT_PYTHON_WHY "${FLT_PYTHON_EXECUTABLE}'s torch (${FLT_PYTHON_TORCH_DIR}) "
                    "uses ${python_torch}, this build links ${project_torch}")
    elseif(NOT FLT_TORCH_PYTHON_LIBRARY)
      set(FLT_PYTHON_WHY "no libtorch_python in ${FLT_PYTHON_TORCH_DIR}/lib")
    elseif(NOT Python3_Development.Module_FOUND)
      set(FLT_PYTHON_WHY "no Python headers for ${FLT_PYTHON_EXECUTABLE} (Debian: python3-dev)")
    elseif(NOT pybind11_FOUND)
      set(FLT_PYTHON_WHY "pybind11 not found (Debian: pybind11-dev)")
    else()
      set(FLT_PYTHON_ENABLED ON)
    endif()
  endif()
endif()

if(FLT_BUILD_PYTHON STREQUAL "ON" AND NOT FLT_PYTHON_ENABLED)
  message(FATAL_ERROR "FLT_BUILD_PYTHON=ON but the Python package cannot be built: ${FLT_PYTHON_WHY}")
elseif(NOT FLT_PYTHON_ENABLED AND NOT FLT_BUILD_PYTHON STREQUAL "OFF")
  message(STATUS "fltlab (Python) not built: ${FLT_PYTHON_WHY}")
endif()
