#pragma once
// Umbrella header: the whole FLT library.

#include "flt/attention/attention.h"
#include "flt/attention/feature_map.h"
#include "flt/attention/flt.h"
#include "flt/attention/linear.h"
#include "flt/attention/multihead.h"
#include "flt/attention/performer.h"
#include "flt/attention/schoenbat.h"
#include "flt/attention/softmax.h"
#include "flt/attention/transformer.h"
#include "flt/attention/variants.h"
#include "flt/kernels/linear_attention.h"
#include "flt/optim/landscapes.h"
#include "flt/runtime.h"
#include "flt/version.h"
