#pragma once
// The kernels layer: the fused operators behind the attention variants and the learned
// optimizers' fused steps (the coordinate rule's and the schedule rule's).

#include "flt/kernels/causal_matmul.h"
#include "flt/kernels/coordinate_rule.h"
#include "flt/kernels/coordinate_step.h"
#include "flt/kernels/fourier_attention.h"
#include "flt/kernels/fourier_series.h"
#include "flt/kernels/linear_attention.h"
#include "flt/kernels/position_features.h"
#include "flt/kernels/schedule_rule.h"
#include "flt/kernels/schedule_step.h"
