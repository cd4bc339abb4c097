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
// `Mnemosyne` names the one that won the held-out test run (18 real runs, 5 seeds, 2026-11-28;
// docs/learned-optimizer.md, "The test run"): the coordinate-memory design, 10/2/6 against the
// schedule's untrained rule and the only design whose learned weights beat its untrained form.
// Its step costs 2.9-19x Adam's; the schedule's, 0.27-1.03x, suits loops where that matters.

#include "flt/optim/coordinate_mnemosyne.h"
#include "flt/optim/schedule_mnemosyne.h"

namespace flt::optim {

using Mnemosyne = CoordinateMnemosyne;
using MnemosyneOptions = CoordinateMnemosyneOptions;
using MnemosyneParamState = CoordinateMnemosyneParamState;

}  // namespace flt::optim
