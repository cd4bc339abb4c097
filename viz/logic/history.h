#pragma once
// A run's history at doubling intervals, as Live Training keeps its learned spectra and its
// schedule trace: a record is taken every `interval` steps; when more than a capacity of records
// are kept, the interval doubles and the records off the new grid go, so the whole run stays in
// view in bounded memory.

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace flt::viz {

class HistoryGrid {
 public:
  HistoryGrid() = default;
  explicit HistoryGrid(int64_t first_interval) : interval_(first_interval) {}
  int64_t interval() const { return interval_; }
  /// Whether a record of `step` belongs on the grid.
  bool due(int64_t step) const { return step % interval_ == 0; }
  /// The records to keep of those taken at `steps` (in order): every one while there are at most
  /// `capacity`; else the interval doubles and those on the new grid stay, and the newest too
  /// when `keep_newest`.
  std::vector<size_t> thin(const std::vector<int64_t>& steps, size_t capacity, bool keep_newest) {
    std::vector<size_t> kept;
    const bool full = steps.size() > capacity;
    if (full) interval_ *= 2;
    for (size_t i = 0; i < steps.size(); ++i)
      if (!full || due(steps[i]) || (keep_newest && i + 1 == steps.size())) kept.push_back(i);
    return kept;
  }

 private:
  int64_t interval_ = 1;
};

/// records[kept[0]], records[kept[1]], ... in that order.
template <class T>
void keep_only(std::vector<T>& records, const std::vector<size_t>& kept) {
  std::vector<T> out;
  out.reserve(kept.size());
  for (size_t i : kept) out.push_back(std::move(records[i]));
  records = std::move(out);
}

}  // namespace flt::viz
