#pragma once
// The kernels layer: the fused operators behind the attention variants and the learned
// optimizer's second design.

#include "flt/kernels/causal_matmul.h"
#include "flt/kernels/fourier_attention.h"
#include "flt/kernels/fourier_series.h"
#include "flt/kernels/linear_attention.h"
#include "flt/kernels/position_features.h"
#include "flt/kernels/schedule_rule.h"
#include "flt/kernels/schedule_step.h"
