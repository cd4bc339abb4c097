#include "logic/training_tasks.h"

#include <algorithm>
#include <random>

namespace flt::viz {
namespace {

constexpr int kContentVocab = 16;              // payload tokens 0..15
constexpr int64_t kSeparator = kContentVocab;  // LM tasks add SEP
constexpr int kLmVocab = kContentVocab + 1;

}  // namespace

const char* task_name(TrainingTask task) {
  switch (task) {
    case TrainingTask::kCopy: return "copy";
    case TrainingTask::kReverse: return "reverse";
    case TrainingTask::kAssociativeRecall: return "associative recall";
    case TrainingTask::kPositionMatch: return "position match (classifier)";
  }
  return "?";
}

bool task_uses_classifier(TrainingTask task) {
  return task == TrainingTask::kPositionMatch;
}

TaskBatch make_task_batch(TrainingTask task, int batch, int payload, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto uniform = [&rng](int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi - 1)(rng);
  };
  TaskBatch out;
  out.batch = batch;
  const int n = std::max(2, payload);
  switch (task) {
    case TrainingTask::kCopy:
    case TrainingTask::kReverse: {
      // x_1..x_n SEP y_1..y_n (y = x or reversed x); predict y after SEP.
      out.vocab = kLmVocab;
      out.length = 2 * n;
      for (int b = 0; b < batch; ++b) {
        std::vector<int64_t> x(n);
        for (auto& t : x) t = uniform(0, kContentVocab);
        std::vector<int64_t> seq(x);
        seq.push_back(kSeparator);
        if (task == TrainingTask::kReverse) std::reverse(x.begin(), x.end());
        seq.insert(seq.end(), x.begin(), x.end());
        for (int t = 0; t < out.length; ++t) {
          out.tokens.push_back(seq[t]);
          out.targets.push_back(t >= n ? seq[t + 1] : kIgnoredTarget);
        }
      }
      break;
    }
    case TrainingTask::kAssociativeRecall: {
      // k_1 v_1 .. k_p v_p SEP k_q -> predict v_q (keys 0..7 distinct, values 8..15).
      out.vocab = kLmVocab;
      const int pairs = std::clamp(n / 2, 2, kContentVocab / 2);
      out.length = 2 * pairs + 2;
      for (int b = 0; b < batch; ++b) {
        std::vector<int64_t> keys(kContentVocab / 2);
        for (int i = 0; i < static_cast<int>(keys.size()); ++i) keys[i] = i;
        std::shuffle(keys.begin(), keys.end(), rng);
        std::vector<int64_t> seq, values;
        for (int i = 0; i < pairs; ++i) {
          values.push_back(uniform(kContentVocab / 2, kContentVocab));
          seq.push_back(keys[i]);
          seq.push_back(values.back());
        }
        const int query = uniform(0, pairs);
        seq.push_back(kSeparator);
        seq.push_back(keys[query]);
        for (int t = 0; t < out.length; ++t) {
          out.tokens.push_back(seq[t]);
          out.targets.push_back(t == out.length - 1 ? values[query] : kIgnoredTarget);
        }
      }
      break;
    }
    case TrainingTask::kPositionMatch: {
      // Is the token at position 0 equal to the one at position n/2? Half the sequences match.
      out.vocab = kContentVocab;
      out.length = n;
      for (int b = 0; b < batch; ++b) {
        std::vector<int64_t> x(n);
        for (auto& t : x) t = uniform(0, kContentVocab);
        const bool match = uniform(0, 2) == 1;
        if (match) {
          x[n / 2] = x[0];
        } else if (x[n / 2] == x[0]) {
          x[n / 2] = (x[0] + 1 + uniform(0, kContentVocab - 1)) % kContentVocab;
        }
        out.tokens.insert(out.tokens.end(), x.begin(), x.end());
        out.targets.push_back(match ? 1 : 0);
      }
      break;
    }
  }
  return out;
}

}  // namespace flt::viz
