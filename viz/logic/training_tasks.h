#pragma once
// Live Training's synthetic tasks (GL-free): copy, reverse, associative recall and position
// match, as plain batches of token ids.

#include <cstdint>
#include <vector>

#include "logic/scenario.h"

namespace flt::viz {

/// A target the LM loss ignores (positions before the answer).
constexpr int64_t kIgnoredTarget = -100;

const char* task_name(TrainingTask task);
/// True for the tasks trained with the sequence classifier (the rest use the causal LM).
bool task_uses_classifier(TrainingTask task);

/// One synthetic batch as plain data: inputs (batch x length), targets per position (LM, -100 =
/// ignored) or one label per sequence (classifier).
struct TaskBatch {
  int batch = 0, length = 0, vocab = 0;
  std::vector<int64_t> tokens;
  std::vector<int64_t> targets;
};
/// Deterministic in `seed`. `payload` is TrainingSettings::length.
TaskBatch make_task_batch(TrainingTask task, int batch, int payload, uint64_t seed);

}  // namespace flt::viz
