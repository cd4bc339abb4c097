#pragma once
// What the lessons share: progress reporting, timing, a log-log slope, the text corpus and the
// small character language model that lessons 3 and 4 train. Internal to demos/lessons.

#include <torch/optim/optimizer.h>
#include <torch/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "flt/attention/variants.h"
#include "lessons/lessons.h"

namespace flt::demos {

/// Counts units of work and reports the fraction done through LessonSettings::progress.
class Progress {
 public:
  Progress(const LessonSettings& settings, double total_units)
      : callback_(settings.progress),
        cancelled_(settings.cancelled),
        total_(total_units > 0 ? total_units : 1.0) {}
  /// `units` more are done; `stage` says what runs next. Throws LessonCancelled when asked to.
  void advance(double units, const std::string& stage) {
    if (cancelled_ && cancelled_()) throw LessonCancelled();
    done_ += units;
    if (callback_) callback_(std::min(1.0, done_ / total_), stage);
  }
  void stage(const std::string& stage) { advance(0.0, stage); }

 private:
  std::function<void(double, const std::string&)> callback_;
  std::function<bool()> cancelled_;
  double total_, done_ = 0.0;
};

class Stopwatch {
 public:
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

/// Least-squares slope of log(y) against log(x) (points with y <= 0 or non-finite are skipped).
double log_log_slope(const std::vector<double>& x, const std::vector<double>& y);

/// Median wall time in seconds of `runs` calls of fn after one warm-up call.
double median_seconds(const std::function<void()>& fn, int runs);

/// "agrees" / "disagrees" from a condition.
inline std::string verdict(bool agrees) {
  return agrees ? "agrees" : "disagrees";
}

/// English text Debian always ships: the regular files of /usr/share/common-licenses (symlinks,
/// which repeat files, skipped), in name order, as bytes mapped to a dense alphabet.
struct TextCorpus {
  std::vector<int64_t> train, valid;  ///< token ids; valid is the last 10% of every file
  std::string alphabet;               ///< byte of each token id
  int64_t vocab() const { return static_cast<int64_t>(alphabet.size()); }
  std::vector<std::string> files;
};
/// Throws (naming the folder) when no text is found.
const TextCorpus& text_corpus();

/// Perplexity of the unigram model (token frequencies of train) on valid: the trivial baseline of
/// a language model.
double unigram_perplexity(const TextCorpus& corpus);

struct CharLmSetup {
  int64_t embed_dim = 64, heads = 4, layers = 2, context = 128, batch = 16, steps = 400;
  double lr = 3e-3;
  /// Learned absolute position embeddings (for variants without their own positions).
  bool absolute_positions = false;
  int64_t eval_batches = 16;
  /// FLT attention: one RPE spectrum per head shared by the layers (FLT paper).
  bool share_rpe = false;
  /// Measure how sharp the trained attention is (CharLmRun::attention_keys).
  bool measure_attention = false;
};

struct CharLmRun {
  double valid_perplexity = 0.0;  ///< NaN when training diverged
  bool diverged = false;
  int64_t diverged_step = -1;
  std::vector<double> loss;  ///< training loss per step (smoothed over 10 steps)
  double seconds = 0.0;
  int64_t parameters = 0;
  /// Heap bytes the first training step's forward pass left allocated (what autograd keeps for
  /// backward, the logits and loss), from glibc's allocator statistics.
  double forward_bytes = 0.0;
  /// With CharLmSetup::measure_attention: the effective number of keys a query attends to,
  /// exp(entropy) of its attention row (negative weights of approximate variants clipped to 0),
  /// averaged over layers, heads and the second half of the rows of held-out windows (where
  /// context / 2 to context keys are visible). NaN otherwise.
  double attention_keys = NAN;
};

/// One training step as the lessons take it, after the forward pass: a non-finite `loss` marks the
/// run diverged at `step` and returns false; otherwise zero_grad, backward, the gradient norm
/// clipped at 1, the optimizer's step, and the loss smoothed over about 10 steps appended to
/// run.loss.
bool lesson_step(torch::optim::Optimizer& optimizer, const torch::Tensor& loss, int64_t step,
                 CharLmRun& run);

/// Bytes the process's heap has allocated now (glibc mallinfo2: arena and mmap'ed blocks in use).
double heap_bytes_in_use();

/// Trains a causal TransformerLM with `attention` on the corpus with Adam (cosine decay), from
/// `seed`, and returns its validation perplexity. `on_step(step)` is called after every step.
CharLmRun train_char_lm(const TextCorpus& corpus, const attention::AttentionOptions& attention,
                        const CharLmSetup& setup, uint64_t seed,
                        const std::function<void(int64_t)>& on_step = {});

}  // namespace flt::demos

namespace flt::demos {

// The lessons, one file each (common.cpp lists them in the order of docs/reproductions.md, and
// names and times each run). Each fills in `result`, whose key is set.
void run_rpe_error(const LessonSettings& settings, LessonResult& result);  // rpe_error.cpp
void run_speed(const LessonSettings& settings, LessonResult& result);      // speed.cpp
void run_text_lm(const LessonSettings& settings, LessonResult& result);    // text_lm.cpp
void run_fourier_ablation(const LessonSettings& settings,
                          LessonResult& result);                           // fourier_ablation.cpp
void run_density(const LessonSettings& settings, LessonResult& result);    // density.cpp
void run_schoenbat(const LessonSettings& settings, LessonResult& result);  // schoenbat.cpp
void run_swarm(const LessonSettings& settings, LessonResult& result);      // swarm.cpp
void run_attention_training(const LessonSettings& settings,
                            LessonResult& result);  // attention_training.cpp

}  // namespace flt::demos
