#pragma once
// The memory ablation's figure, drawn from the campaigns' own logs: for each seed, theta's
// validation score minus the hand rule's on the same validation set, one curve per memory, with the
// stop rule's margin. A score is a mean log of final held-out loss over tuned AdamW-cosine's, so
// the difference is theta's mean log loss ratio to the hand rule: below 0, theta is ahead.

#include <c10/util/Exception.h>
#include <flt/detail/raster_plot.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace flt::tools {

/// One campaign's validations: the generation after which each ran and theta's lead over the hand
/// rule there (theta's score minus the hand rule's).
struct ValidationCurve {
  std::vector<double> generation, difference;
};

/// Reads a campaign's log.tsv (columns generation, ..., validation, validation_hand_rule, ...;
/// "nan" where no validation ran). Throws naming the file and line on a malformed row.
inline ValidationCurve read_validation_curve(const std::string& log_path) {
  std::ifstream in(log_path);
  TORCH_CHECK(in, "cannot read ", log_path);
  ValidationCurve curve;
  std::string line;
  std::getline(in, line);  // header
  for (int number = 2; std::getline(in, line); ++number) {
    std::istringstream fields(line);
    std::string cell;
    std::vector<std::string> cells;
    while (cells.size() < 6 && std::getline(fields, cell, '\t')) cells.push_back(cell);
    TORCH_CHECK(cells.size() == 6, log_path, " line ", number,
                " has fewer than 6 tab-separated columns");
    const double theta = std::strtod(cells[4].c_str(), nullptr);
    const double hand_rule = std::strtod(cells[5].c_str(), nullptr);
    if (!std::isfinite(theta) || !std::isfinite(hand_rule)) continue;
    curve.generation.push_back(std::strtod(cells[0].c_str(), nullptr));
    curve.difference.push_back(theta - hand_rule);
  }
  return curve;
}

/// Draws every campaign folder MEMORY-sSEED under `folder` that has a log.tsv: a panel per seed, a
/// curve per memory, guides at 0 (the hand rule) and at -`margin` (the stop rule's bar). Prints a
/// line per campaign (its validations, theta's best and worst difference); returns how many.
inline int plot_ablation(const std::string& folder, const std::string& png, double margin) {
  namespace fs = std::filesystem;
  TORCH_CHECK(fs::is_directory(folder), "--plot-ablation: ", folder,
              " is not a folder of campaigns");
  const std::vector<std::string> memories = {"flt", "ema", "none"};
  std::map<int, std::map<std::string, ValidationCurve>> seeds;  // seed -> memory -> curve
  int drawn = 0;
  for (const auto& entry : fs::directory_iterator(folder)) {
    const std::string name = entry.path().filename().string();
    const auto dash = name.rfind("-s");
    if (dash == std::string::npos || !fs::exists(entry.path() / "log.tsv")) continue;
    const std::string memory = name.substr(0, dash), seed = name.substr(dash + 2);
    if (std::find(memories.begin(), memories.end(), memory) == memories.end() || seed.empty() ||
        seed.find_first_not_of("0123456789") != std::string::npos)
      continue;
    seeds[std::stoi(seed)][memory] = read_validation_curve((entry.path() / "log.tsv").string());
    ++drawn;
  }
  for (const auto& [seed, curves] : seeds) {
    for (const auto& [memory, curve] : curves) {
      std::printf("%s-s%d\t%zu validations", memory.c_str(), seed, curve.generation.size());
      if (!curve.difference.empty()) {
        const auto& d = curve.difference;
        const size_t best = std::min_element(d.begin(), d.end()) - d.begin();
        std::printf("\ttheta - hand rule: best %.4g (generation %g), worst %.4g", d[best],
                    curve.generation[best], *std::max_element(d.begin(), d.end()));
      }
      std::printf("\n");
    }
  }
  TORCH_CHECK(drawn > 0, "--plot-ablation: ", folder,
              " has no campaign folders (MEMORY-sSEED with a log.tsv)");
  const int panel_w = 420, panel_h = 320;
  detail::Canvas canvas(panel_w * static_cast<int>(seeds.size()), panel_h);
  int column = 0;
  for (const auto& [seed, curves] : seeds) {
    std::vector<detail::XySeries> series;
    double first = INFINITY, last = -INFINITY;
    for (size_t m = 0; m < memories.size(); ++m) {
      const auto found = curves.find(memories[m]);
      if (found == curves.end() || found->second.generation.empty()) continue;
      const auto& curve = found->second;
      series.push_back({memories[m], curve.generation, curve.difference, detail::series_color(m)});
      first = std::min(first, curve.generation.front());
      last = std::max(last, curve.generation.back());
    }
    if (!std::isfinite(first)) first = 0, last = 1;
    series.push_back({"hand rule", {first, last}, {0.0, 0.0}, {0, 0, 0}, true});
    series.push_back({"stop rule's bar", {first, last}, {-margin, -margin}, {150, 150, 150}, true});
    detail::plot_xy_panel(
        canvas, column * panel_w, 0, panel_w, panel_h, "seed " + std::to_string(seed), "generation",
        "theta's validation score - hand rule's (below 0: theta ahead)", series, false, false);
    ++column;
  }
  TORCH_CHECK(canvas.save(png), "cannot write ", png);
  return drawn;
}

}  // namespace flt::tools
