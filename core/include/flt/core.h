#pragma once
// The core layer: runtime set-up (threads, BLAS), version, allocation counting.

#include "flt/allocation_counter.h"
#include "flt/runtime.h"
#include "flt/version.h"
