#pragma once
// The swarm's baselines, as PopulationSearch searchers on a box, one per header: random search,
// particle swarm optimisation, CMA-ES and Adam with random restarts. All keep their points inside
// the box (clipped) and are deterministic for a seed.

#include "flt/optim/adam_restarts.h"   // IWYU pragma: export
#include "flt/optim/cma_es.h"          // IWYU pragma: export
#include "flt/optim/particle_swarm.h"  // IWYU pragma: export
#include "flt/optim/random_search.h"   // IWYU pragma: export
