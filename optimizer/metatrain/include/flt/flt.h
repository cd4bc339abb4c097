#pragma once
// Umbrella header: the whole installed FLT library, one umbrella per layer from the bottom up.
// It lives in the highest installed layer, which sees every layer below it.

#include "flt/attention.h"
#include "flt/core.h"
#include "flt/kernels.h"
#include "flt/metatrain.h"
#include "flt/optim.h"
