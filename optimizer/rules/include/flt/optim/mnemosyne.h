#pragma once
// flt::optim::Mnemosyne: the learned optimizer this library recommends, usable wherever a
// torch::optim::Optimizer is:
//
//   flt::optim::Mnemosyne opt(model->parameters(), flt::optim::MnemosyneOptions().total_steps(T));
//   for (...) { opt.zero_grad(); loss.backward(); opt.step(); }
//
// Two designs stand on their own (docs/learned-optimizer.md):
//   ScheduleMnemosyne (schedule_mnemosyne.h): a per-tensor schedule whose memory sees the whole
//     run, over Adam's moments; it ships with its learned part zeroed (the hand rule);
//   CoordinateMnemosyne (coordinate_mnemosyne.h): a memory per coordinate (Mnemosyne's design, an
//     FLT cell over the step index) with a per-tensor step-size controller and shipped weights.
// `Mnemosyne` names the schedule with its hand rule. No schedule meta-trained by ES beat the hand
// rule on real runs (the one that led it on fresh draws of its held-out families lost 6/2/10 on
// the 18 real runs), and on 23 training loops written outside the project the hand rule beat the
// best no-tuning optimizer of the run on 8, the coordinate design on 5, at 41-61% of its wall
// time (its step costs about Adam's or less, the coordinate design's several times Adam's:
// docs/benchmarks.md, "Optimizer step").

#include "flt/optim/coordinate_mnemosyne.h"
#include "flt/optim/schedule_mnemosyne.h"

namespace flt::optim {

using Mnemosyne = ScheduleMnemosyne;
using MnemosyneOptions = ScheduleMnemosyneOptions;
using MnemosyneParamState = ScheduleMnemosyneParamState;

}  // namespace flt::optim
