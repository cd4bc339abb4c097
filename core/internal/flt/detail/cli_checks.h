#pragma once
// Checks and flags shared by the command lines (CLI11): each error names the flag and the value.

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

/// The flags of a program whose ranks meet through c10d (RANK, WORLD_SIZE, MASTER_ADDR and
/// MASTER_PORT come from the environment, as torchrun sets them): --rendezvous and --timeout, the
/// seconds a rank waits for the others to join and in each `collective` (what the program's
/// ranks do together, for the help text).
inline void add_rendezvous_flags(CLI::App& app, std::string& method, int& timeout_seconds,
                                 const std::string& collective) {
  app.add_option("--rendezvous", method,
                 "where the ranks meet when WORLD_SIZE > 1: file://PATH (a new file every rank "
                 "can open), or empty for MASTER_ADDR:MASTER_PORT");
  app.add_option("--timeout", timeout_seconds,
                 "seconds a rank waits for the others (to join, and in each " + collective +
                     ") before it stops with an error")
      ->capture_default_str()
      ->check(integer_at_least(1));
}

}  // namespace flt::detail
