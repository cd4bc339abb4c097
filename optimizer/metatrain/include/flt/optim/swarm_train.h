#pragma once
// Kept so that code written against earlier releases compiles: the swarm's meta-training moved to
// <flt/metatrain/swarm_meta_train.h> when the optimizer's jobs got rooms of their own. (The
// comparison with the baselines that this header also declared is the project's evaluation
// harness, optimizer/harness/, which is not installed.)
#include "flt/metatrain/swarm_meta_train.h"
