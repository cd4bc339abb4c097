#pragma once
// Strict number parsing for the demos' command lines: the whole argument must be the number, so
// "3e-3x" or "abc" is reported (naming the flag and the value) instead of thrown as std::stod's
// unnamed std::invalid_argument.

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

namespace flt::demos {

inline std::optional<int64_t> parse_integer(const std::string& text) {
  char* end = nullptr;
  const long long n = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0') return std::nullopt;
  return static_cast<int64_t>(n);
}

inline std::optional<double> parse_number(const std::string& text) {
  char* end = nullptr;
  const double x = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0') return std::nullopt;
  return x;
}

}  // namespace flt::demos
