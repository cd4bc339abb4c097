#include "logic/interaction.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

namespace flt::viz {

int KeyPresses::take(int key) {
  const auto it = counts_.find(key);
  if (it == counts_.end()) return 0;
  const int count = it->second;
  counts_.erase(it);
  return count;
}

std::string fit_text(const std::string& text, float max_width,
                     const std::function<float(const std::string&)>& width_of) {
  if (width_of(text) <= max_width) return text;
  // the longest prefix (whole UTF-8 characters) that fits with the ellipsis
  size_t lo = 0, hi = text.size();
  const auto fits = [&](size_t n) { return width_of(text.substr(0, n) + "...") <= max_width; };
  while (lo < hi) {
    const size_t mid = (lo + hi + 1) / 2;
    if (fits(mid)) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  while (lo > 0 && (static_cast<unsigned char>(text[lo]) & 0xC0) == 0x80) --lo;
  while (lo > 0 && text[lo - 1] == ' ') --lo;
  return text.substr(0, lo) + "...";
}

float Toast::alpha(double now) const {
  const double left = seconds - (now - shown_at);
  if (left <= 0) return 0.0f;
  return static_cast<float>(std::min(1.0, left / 0.5));
}

std::string default_export_path(const std::string& dir, const std::string& scene,
                                const std::string& what, const std::string& extension,
                                std::time_t when) {
  std::tm local{};
  localtime_r(&when, &local);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &local);
  std::string name = "flt-lab-" + scene;
  if (!what.empty()) name += "-" + what;
  return (dir.empty() ? std::string() : dir + "/") + name + "-" + stamp + "." + extension;
}

std::string export_target(const std::string& folder, const std::string& name, std::string* error) {
  namespace fs = std::filesystem;
  error->clear();
  if (folder.empty()) {
    *error = "Choose a folder to export to (it is empty)";
    return {};
  }
  if (name.empty()) {
    *error = "Type a file name to export to (it is empty)";
    return {};
  }
  if (name.find('/') != std::string::npos) {
    *error = "The file name '" + name +
             "' holds a folder separator '/': type a name only, and choose the folder above";
    return {};
  }
  if (name == "." || name == "..") {
    *error = "'" + name + "' is not a file name";
    return {};
  }
  std::error_code ec;
  fs::path dir = fs::absolute(folder, ec).lexically_normal();
  if (ec) {
    *error = "The folder '" + folder + "' is not a valid path: " + ec.message();
    return {};
  }
  if (!dir.has_filename() && dir != dir.root_path()) dir = dir.parent_path();  // "out/" -> "out"
  const fs::path target = dir / name;
  // where it really lands: a name that is a link to elsewhere, or a folder that is, resolve there
  const fs::path real_dir = fs::weakly_canonical(dir, ec);
  fs::path real_target = ec ? fs::path() : fs::weakly_canonical(target, ec);
  std::error_code missing;  // a name not there yet is no error
  if (!ec && fs::is_symlink(fs::symlink_status(target, missing))) {  // even one to nothing yet
    const fs::path link = fs::read_symlink(target, ec);
    if (!ec) real_target = fs::weakly_canonical(link.is_absolute() ? link : dir / link, ec);
  }
  if (ec || real_target.parent_path() != real_dir) {
    *error = "'" + name + "' resolves to " + real_target.string() + ", outside the folder " +
             dir.string() + ": choose another name";
    return {};
  }
  return target.string();
}

}  // namespace flt::viz
