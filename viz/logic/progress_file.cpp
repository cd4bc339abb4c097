#include "logic/progress_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <system_error>

namespace flt::viz {
namespace {

constexpr const char* kHeader = "flt-lab progress 1";

}  // namespace

std::string default_progress_path() {
  // XDG Base Directory: a relative XDG_STATE_HOME is invalid and ignored
  const char* state = std::getenv("XDG_STATE_HOME");
  if (state != nullptr && state[0] == '/') return std::string(state) + "/flt-lab/progress";
  const char* home = std::getenv("HOME");
  if (home != nullptr && home[0] != '\0')
    return std::string(home) + "/.local/state/flt-lab/progress";
  return {};
}

std::string encode_progress(const LevelProgress& progress) {
  std::string text = std::string(kHeader) + "\nstars";
  for (int stars : progress.best_stars) text += " " + std::to_string(stars);
  return text + "\n";
}

LevelProgress decode_progress(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line) || line != kHeader) {
    throw std::invalid_argument("the first line must be '" + std::string(kHeader) + "', got '" +
                                line.substr(0, 40) + "'");
  }
  LevelProgress progress;
  bool seen = false;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::istringstream fields(line);
    std::string key;
    fields >> key;
    if (key != "stars") throw std::invalid_argument("unknown line '" + line.substr(0, 40) + "'");
    seen = true;
    std::string value;
    for (size_t level = 0; fields >> value; ++level) {
      if (value.size() != 1 || value[0] < '0' || value[0] > '3') {
        throw std::invalid_argument("stars of level " + std::to_string(level + 1) +
                                    " must be 0 to 3, got '" + value.substr(0, 20) + "'");
      }
      if (level < progress.best_stars.size()) progress.best_stars[level] = value[0] - '0';
    }
  }
  if (!seen) throw std::invalid_argument("no 'stars' line");
  return progress;
}

LevelProgress load_progress(const std::string& path, std::string* error) {
  error->clear();
  std::error_code ec;
  if (path.empty() || !std::filesystem::exists(path, ec)) return {};  // a first start
  const std::string prefix = "flt-lab: ignored the progress file " + path + ": ";
  std::ifstream in(path);
  if (!in) {
    *error = prefix + "could not open it (" + std::strerror(errno) + "); starting fresh";
    return {};
  }
  std::ostringstream text;
  text << in.rdbuf();
  try {
    return decode_progress(text.str());
  } catch (const std::invalid_argument& e) {
    *error = prefix + e.what() + "; starting fresh";
    return {};
  }
}

bool save_progress(const std::string& path, const LevelProgress& progress, std::string* error) {
  error->clear();
  const std::filesystem::path target(path);
  std::error_code ec;
  if (target.has_parent_path()) std::filesystem::create_directories(target.parent_path(), ec);
  if (ec) {
    *error = "flt-lab: could not save progress to " + path + ": " + ec.message();
    return false;
  }
  const std::string temporary = path + ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << encode_progress(progress);
    out.flush();
    if (!out) {
      *error = "flt-lab: could not save progress to " + path + ": cannot write " + temporary;
      std::filesystem::remove(temporary, ec);
      return false;
    }
  }
  std::filesystem::rename(temporary, target, ec);  // atomic within one file system
  if (ec) {
    *error = "flt-lab: could not save progress to " + path + ": " + ec.message();
    std::filesystem::remove(temporary, ec);
    return false;
  }
  return true;
}

}  // namespace flt::viz
