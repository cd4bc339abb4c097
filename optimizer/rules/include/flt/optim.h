#pragma once
// The optimizers a training loop uses: the learned rule, flt::optim::Mnemosyne, and the
// population searchers (flt::optim::Swarm and its baselines).

#include "flt/optim/learned_model.h"
#include "flt/optim/learned_schedule.h"
#include "flt/optim/mnemosyne.h"
#include "flt/optim/population.h"
#include "flt/optim/swarm.h"
#include "flt/optim/swarm_baselines.h"
