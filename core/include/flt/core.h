#pragma once
// The core layer: runtime set-up (threads, BLAS), version, the ranks a program trains with
// (Communicator).

#include "flt/communicator.h"
#include "flt/runtime.h"
#include "flt/version.h"
