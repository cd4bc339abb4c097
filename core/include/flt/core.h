#pragma once
// The core layer: runtime set-up (threads, BLAS), version, allocation counting, the ranks a
// program trains with (Communicator).

#include "flt/allocation_counter.h"
#include "flt/communicator.h"
#include "flt/runtime.h"
#include "flt/version.h"
