#pragma once
// flt::optim::Mnemosyne: the learned optimizer this library recommends, usable wherever a
// torch::optim::Optimizer is:
//
//   flt::optim::Mnemosyne opt(model->parameters(), flt::optim::MnemosyneOptions().lr(1.0));
//   for (...) { opt.zero_grad(); loss.backward(); opt.step(); }
//
// Two designs stand on their own (docs/learned-optimizer.md):
//   CoordinateMnemosyne (coordinate_mnemosyne.h): a memory per coordinate (Mnemosyne's design,
//     an FLT cell over the step index) with a per-tensor step-size controller;
//   ScheduleMnemosyne (schedule_mnemosyne.h): a learned per-tensor schedule whose memory sees the
//     whole run, over Adam's moments.
// `Mnemosyne` names the coordinate-memory design: it wins the held-out test run against the
// schedule and is the only design whose learned weights beat their untrained form
// (docs/learned-optimizer.md, "The test run"). Its step costs several times Adam's; the
// schedule's costs about Adam's or less and suits loops where that matters (docs/benchmarks.md,
// "Optimizer step").

#include "flt/optim/coordinate_mnemosyne.h"
#include "flt/optim/schedule_mnemosyne.h"

namespace flt::optim {

using Mnemosyne = CoordinateMnemosyne;
using MnemosyneOptions = CoordinateMnemosyneOptions;
using MnemosyneParamState = CoordinateMnemosyneParamState;

}  // namespace flt::optim
