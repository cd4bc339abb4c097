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
// `Mnemosyne` names the one that wins the held-out evaluation; until the design campaign's test
// run decides, that is the coordinate-memory design, the default of earlier versions, whose
// saved states therefore load unchanged.

#include "flt/optim/coordinate_mnemosyne.h"
#include "flt/optim/schedule_mnemosyne.h"

namespace flt::optim {

using Mnemosyne = CoordinateMnemosyne;
using MnemosyneOptions = CoordinateMnemosyneOptions;
using MnemosyneParamState = CoordinateMnemosyneParamState;

}  // namespace flt::optim
