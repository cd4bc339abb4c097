#pragma once
// Checks shared by the demos' command lines (CLI11): each error names the flag and the value.

#include <c10/util/Exception.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace flt::detail {

/// A whole base-10 integer >= `min`. CLI11 2.1's own conversion reads "010" as octal and reports
/// "3x" as out of the range 0 to 1.8e308; this check rejects "3x" as "expected an integer" and
/// hands CLI11 the canonical decimal.
inline CLI::Validator integer_at_least(int64_t min) {
  return CLI::Validator(
      [min](std::string& text) -> std::string {
        char* end = nullptr;
        errno = 0;
        const long long n = std::strtoll(text.c_str(), &end, 10);
        if (text.empty() || *end != '\0' || errno == ERANGE) {
          return "expected an integer, got " + text;
        }
        if (n < min) return "expected an integer >= " + std::to_string(min) + ", got " + text;
        text = std::to_string(n);
        return {};
      },
      ">=" + std::to_string(min));
}

/// A name the library's parser accepts (e.g. flt::optim::memory_from_name): its error, which
/// names the value and the choices, becomes the flag's.
template <typename Parse>
CLI::Validator library_name(Parse parse) {
  return CLI::Validator(
      [parse](std::string& name) -> std::string {
        try {
          parse(name);
          return {};
        } catch (const c10::Error& e) {
          return e.what_without_backtrace();
        }
      },
      "");
}

}  // namespace flt::detail
