#pragma once
// The kernels layer: the fused operators behind the attention variants.

#include "flt/kernels/causal_matmul.h"
#include "flt/kernels/fourier_attention.h"
#include "flt/kernels/fourier_series.h"
#include "flt/kernels/linear_attention.h"
#include "flt/kernels/position_features.h"
