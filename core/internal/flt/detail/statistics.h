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

/// The arithmetic mean; NaN when empty (or when a value is NaN).
inline double mean(const std::vector<double>& values) {
  if (values.empty()) return NAN;
  double sum = 0.0;
  for (double v : values) sum += v;
  return sum / static_cast<double>(values.size());
}

/// The sample standard deviation (n - 1 in the denominator); NaN for fewer than two values.
inline double sample_std(const std::vector<double>& values) {
  if (values.size() < 2) return NAN;
  const double m = mean(values);
  double sum = 0.0;
  for (double v : values) sum += (v - m) * (v - m);
  return std::sqrt(sum / static_cast<double>(values.size() - 1));
}

}  // namespace flt::detail
