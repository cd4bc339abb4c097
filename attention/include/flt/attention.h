#pragma once
// The attention layer: every variant as a torch::nn module and a function, and the transformer
// blocks built from them.

#include "flt/attention/attention.h"
#include "flt/attention/feature_map.h"
#include "flt/attention/flt.h"
#include "flt/attention/fourier.h"
#include "flt/attention/linear.h"
#include "flt/attention/multihead.h"
#include "flt/attention/performer.h"
#include "flt/attention/schoenbat.h"
#include "flt/attention/softmax.h"
#include "flt/attention/transformer.h"
#include "flt/attention/variants.h"
