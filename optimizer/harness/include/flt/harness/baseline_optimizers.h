#pragma once
// The baselines a sceptic asks for beside the learned optimizer, one per header: Prodigy and
// Schedule-Free AdamW, written from their papers' algorithms as torch::optim::Optimizers. They live
// in the harness (not installed): they are what the learned optimizer is judged against.

#include "flt/harness/prodigy.h"              // IWYU pragma: export
#include "flt/harness/schedule_free_adamw.h"  // IWYU pragma: export
