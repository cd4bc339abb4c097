#pragma once
// Umbrella header: the whole FLT library.

#include "flt/allocation_counter.h"
#include "flt/attention/attention.h"
#include "flt/attention/fourier.h"
#include "flt/attention/linear.h"
#include "flt/attention/multihead.h"
#include "flt/attention/softmax.h"
#include "flt/attention/transformer.h"
#include "flt/attention/variants.h"
#include "flt/kernels/fourier_attention.h"
#include "flt/kernels/fourier_series.h"
#include "flt/kernels/linear_attention.h"
#include "flt/runtime.h"
#include "flt/version.h"
