#pragma once
// What a learned optimizer is scored against in meta-training that should transfer: on each task
// instance, AdamW with a half-cosine decay whose learning rate was tuned on a grid for that
// instance, judged by the instance's final held-out loss (its validation split; the noise-free
// training loss for tasks without one). Tuning costs a grid of whole runs, so references are kept
// in a cache file keyed by the instance and the run length, reused across generations and runs.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "flt/metatrain/tasks.h"

namespace flt::metatrain {

/// The tuned baseline of one task instance at one run length.
struct TunedReference {
  double lr = 0.0;            ///< the grid's best learning rate
  double final_loss = 0.0;    ///< its final held-out loss (lower is better)
  std::vector<double> by_lr;  ///< the final held-out loss of every grid point, in grid order
};

/// The random streams of a run, one generator per purpose from its seed, so every learning rate
/// and every candidate optimizer sees the same initial point and the same mini-batches.
enum class RunStream : uint64_t { kInitialPoint = 0, kBatches = 1 };
at::Generator run_stream(uint64_t seed, RunStream purpose);

/// What a run is scored by: the held-out loss (the validation split, drawing from `gen` where the
/// task needs a batch) or, for tasks without one, the noise-free loss. params: (dim)
double held_out_loss(const Task& task, const torch::Tensor& params, at::Generator& gen);

/// AdamW's grid: 1e-4 .. 1e-1, half decades.
std::vector<double> default_reference_grid();

/// The final held-out loss of `task` after `steps` steps of torch::optim::AdamW (weight decay
/// 1e-2) at `lr`, decayed along a half cosine to 0: the initial point and the mini-batches come
/// from `seed` (the same for every lr and for the candidates it is compared with). A run whose loss
/// turns non-finite scores +inf.
double adamw_cosine_final_loss(const Task& task, int64_t steps, double lr, uint64_t seed);

/// The best of `grid` for the task at this length and seed.
TunedReference tune_adamw_cosine(const Task& task, int64_t steps, uint64_t seed,
                                 const std::vector<double>& grid = default_reference_grid());

/// The score of a candidate's final held-out loss against the reference's: log(candidate /
/// reference), so 0 is level, -log 2 half the reference's loss; scale-free (a task's loss units
/// cancel) and smooth, clipped to [-kClip, kClip] so that one diverged or degenerate instance
/// cannot dominate a generation's mean. A non-finite candidate scores kClip; a loss of 0 (either
/// side) counts as float32's smallest normal number, so a candidate at 0 scores -kClip against a
/// reference above it, kClip above a reference at 0, and 0 when both are 0.
double reference_score(double candidate_loss, double reference_loss);
constexpr double kReferenceScoreClip = 5.0;

/// Tuned references by key (`reference_key`), read from and appended to a tab-separated text file
/// (key, lr, final loss, the grid's losses); a key already known is never tuned again. Plain text,
/// one reference per line, so a campaign's checkpoint can commit it.
class ReferenceCache {
 public:
  /// Reads `path` if it exists (an empty path: in memory only); throws naming the path and line of
  /// a malformed entry. With `appends` false the file is only read and what is added stays in
  /// memory (the ranks of a distributed campaign other than rank 0, which writes it).
  explicit ReferenceCache(std::string path = "", bool appends = true);
  /// The reference of `task` at `steps` and `seed`: from the cache, else tuned and appended.
  const TunedReference& get(const Task& task, int64_t steps, uint64_t seed);
  /// The reference under `key`, or nullptr when none is known (a caller that tunes its own way,
  /// several instances at once, then adds what it tuned).
  const TunedReference* find(const std::string& key) const;
  /// Keeps `reference` under `key` (a new key) and appends it to the file.
  const TunedReference& add(const std::string& key, TunedReference reference);
  /// Entries known (read or tuned).
  size_t size() const { return entries_.size(); }
  /// How many references were tuned and added since the file was read.
  int64_t tuned() const { return tuned_; }

 private:
  std::string path_;
  bool appends_ = true;
  std::map<std::string, TunedReference> entries_;
  int64_t tuned_ = 0;
};

/// The cache key of an instance: its name (its sampled shape), its parameter count, a fingerprint
/// of its data (the noise-free loss at the seed's initial point, 17 digits: two instances of one
/// shape differ there), the run length and the seed; fields separated by '|'.
std::string reference_key(const Task& task, int64_t steps, uint64_t seed);

}  // namespace flt::metatrain
