#pragma once
// Summary statistics the harness, the programs and the benchmarks report. Internal: not installed.

#include <algorithm>
#include <cmath>
#include <vector>

namespace flt::detail {

/// The middle value, the mean of the two middle ones for an even count; NaN when empty.
inline double median(std::vector<double> values) {
  if (values.empty()) return NAN;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

}  // namespace flt::detail
