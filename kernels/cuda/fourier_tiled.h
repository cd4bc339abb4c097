#pragma once
// The tiled Fourier-attention kernels' block code, written once as __host__ __device__
// code for the CUDA kernels (fourier_attention.cu) and the host emulation (tests/cuda_emulation):
// the shared arithmetic, the forward's block and the backward's blocks.

#include "fourier_tiled_backward.h"
#include "fourier_tiled_common.h"
#include "fourier_tiled_forward.h"
