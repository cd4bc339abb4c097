#pragma once
// Meta-training: how the learned optimizers' weights are made (task families, test landscapes,
// the real data sets, distributed meta-training of Mnemosyne and of the swarm, episode ES of the
// schedule against tuned references).

#include "flt/metatrain/batched_run.h"
#include "flt/metatrain/batched_tasks.h"
#include "flt/metatrain/datasets.h"
#include "flt/metatrain/distributed.h"
#include "flt/metatrain/episode_es.h"
#include "flt/metatrain/landscapes.h"
#include "flt/metatrain/meta_train.h"
#include "flt/metatrain/swarm_meta_train.h"
#include "flt/metatrain/tasks.h"
#include "flt/metatrain/tuned_reference.h"
