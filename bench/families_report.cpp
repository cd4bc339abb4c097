// Which users' runs the batched families cover, measured before a campaign draws from them: for
// each family, SHAPES shape seeds x INSTANCES instances, each shape run for its own length
// (log-spaced over 100 .. 3000 steps, the range of users' runs; the held-out suite's are 1000 ..
// 3000), AdamW with a half-cosine decay on a wide grid (1e-5 .. 1, half decades, every rate one row
// of a single batched run) and the untrained schedule (the hand rule, told the run's length) on the
// same instances and mini-batches. Per family it prints the tuned rates (lowest, median, highest,
// and how many sit at the grid's edge), where in the tuned run the held-out loss was lowest (as a
// fraction of the run: below 1, a shorter run would have done as well), the hand rule's final
// held-out loss over the tuned one, and untuned AdamW's (1e-3). Then the tuned rates of the
// held-out suite's real runs, from its tuning cache (AdamW-cosine rows, grid 1e-4 .. 1e-1):
// families whose tuned rates miss that range train a rule for runs users do not have.
//   build/bench/families_report [SHAPES=3] [INSTANCES=8] [STEPS=0: log-spaced 100 .. 3000]
//   [CSV=bench/eval-real-tuning.csv] [FAMILIES=all, or names separated by commas]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "bench_util.h"
#include "flt/metatrain/batched_run.h"
#include "flt/metatrain/batched_tasks.h"
#include "flt/metatrain/tuned_reference.h"

namespace fm = flt::metatrain;

namespace {

double quantile(std::vector<double> values, double q) {
  if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(values.begin(), values.end());
  return values[static_cast<size_t>(std::lround(q * static_cast<double>(values.size() - 1)))];
}

// A final loss within this factor of the best counts as as good: where the loss is flat in the
// rate, the argmin says little, and the lowest rate that is as good says what a run needs.
constexpr double kAsGood = 1.05;

struct RateSummary {
  std::vector<double> rates;        // the argmin of the final held-out loss
  std::vector<double> least_rates;  // the lowest rate within kAsGood of the best
  int at_edge = 0;
};

// The lowest of `rates` whose loss is within kAsGood of the lowest loss (losses finite or +inf).
double least_as_good(const std::vector<double>& rates, const std::vector<double>& losses) {
  const double best = *std::min_element(losses.begin(), losses.end());
  double least = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < rates.size(); ++i)
    if (losses[i] <= kAsGood * best) least = std::min(least, rates[i]);
  return least;
}

void print_rates(const char* what, const RateSummary& s, size_t runs) {
  std::printf("%-28s | %4zu | %8.0e %8.0e %8.0e | %8.0e %8.0e %8.0e | %2d of %zu\n", what, runs,
              quantile(s.rates, 0), quantile(s.rates, 0.5), quantile(s.rates, 1),
              quantile(s.least_rates, 0), quantile(s.least_rates, 0.5), quantile(s.least_rates, 1),
              s.at_edge, runs);
}

// The report's grid: 1e-5 .. 1 in half decades, wide enough that a family's tuned rate sits inside.
std::vector<double> wide_grid() {
  std::vector<double> grid;
  for (int i = -10; i <= 0; ++i) grid.push_back(std::pow(10.0, 0.5 * i));
  return grid;
}

// Shape s of `shapes`: its run length, log-spaced over 100 .. 3000 steps (both ends included).
int64_t run_length(int64_t s, int64_t shapes) {
  const double u = shapes > 1 ? static_cast<double>(s) / static_cast<double>(shapes - 1) : 0.5;
  return std::llround(100.0 * std::pow(30.0, u));
}

// The held-out suite's tuned AdamW-cosine rate per run (task and signature) from its tuning cache:
// the grid point of the lowest median final held-out loss.
RateSummary suite_rates(const std::string& path, const std::vector<double>& grid) {
  std::ifstream in(path);
  RateSummary s;
  if (!in) {
    std::fprintf(stderr, "families_report: cannot read %s (the suite's rates are left out)\n",
                 path.c_str());
    return s;
  }
  std::map<std::string, std::pair<double, double>> best;  // run -> (loss, lr)
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>>
      all;  // run -> lrs, losses
  std::string line;
  std::getline(in, line);  // header: task,signature,contender,tuning_seeds,lr,median_final_held_out
  while (std::getline(in, line)) {
    std::vector<std::string> field;
    std::stringstream row(line);
    for (std::string f; std::getline(row, f, ',');) field.push_back(f);
    if (field.size() != 6 || field[2] != "adamw-cosine") continue;
    const double lr = std::stod(field[4]), loss = std::stod(field[5]);
    auto& b = best.try_emplace(field[0] + "|" + field[1], loss, lr).first->second;
    if (loss < b.first) b = {loss, lr};
    auto& a = all[field[0] + "|" + field[1]];
    a.first.push_back(lr);
    a.second.push_back(std::isfinite(loss) ? loss : std::numeric_limits<double>::infinity());
  }
  for (const auto& [run, b] : best) {
    s.rates.push_back(b.second);
    s.least_rates.push_back(least_as_good(all[run].first, all[run].second));
    if (b.second <= grid.front() * 1.01 || b.second >= grid.back() * 0.99) ++s.at_edge;
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  const auto info = flt::init(/*quiet=*/true);
  const int64_t shapes = argc > 1 ? std::stoll(argv[1]) : 3;
  const int64_t instances = argc > 2 ? std::stoll(argv[2]) : 8;
  const int64_t fixed_steps = argc > 3 ? std::stoll(argv[3]) : 0;
  const std::string csv = argc > 4 ? argv[4] : "bench/eval-real-tuning.csv";
  std::vector<fm::BatchedFamily> families;
  if (argc > 5 && std::string(argv[5]) != "all") {
    std::stringstream names(argv[5]);
    for (std::string name; std::getline(names, name, ',');)
      families.push_back(fm::batched_family_from_name(name));
  } else {
    families = fm::all_batched_families();
  }
  const auto grid = wide_grid();
  const int64_t g = static_cast<int64_t>(grid.size());
  const auto untuned = std::find(grid.begin(), grid.end(), 1e-3) - grid.begin();
  std::printf("machine: %s\n", flt::bench::machine_line(info).c_str());
  std::string lengths;
  for (int64_t s = 0; s < shapes; ++s)
    lengths +=
        (s ? ", " : "") + std::to_string(fixed_steps > 0 ? fixed_steps : run_length(s, shapes));
  std::printf(
      "%lld shapes x %lld instances a family, the shapes' runs %s steps, rescaling off; "
      "AdamW-cosine on %lld rates 1e-5 .. 1 as rows of one batched run\n\n",
      static_cast<long long>(shapes), static_cast<long long>(instances), lengths.c_str(),
      static_cast<long long>(g));
  std::printf("%-28s | %4s | %26s | %26s | %9s | %-21s | %-32s | %-20s\n", "family", "runs",
              "tuned lr: lowest median top", "least as good: low med top", "at edge",
              "lowest held-out at", "hand rule / tuned: median worst <=1.05x",
              "AdamW 1e-3 / tuned: median worst");
  RateSummary all;
  for (const auto family : families) {
    RateSummary s;
    std::vector<double> hand_ratio, untuned_ratio, lowest_fraction;
    for (int64_t shape = 0; shape < shapes; ++shape) {
      fm::EpisodeSpec spec;
      spec.steps = fixed_steps > 0 ? fixed_steps : run_length(shape, shapes);
      spec.seed = 1;
      spec.known_length = true;
      std::vector<uint64_t> seeds, rows;
      for (int64_t n = 0; n < instances; ++n) {
        seeds.push_back(static_cast<uint64_t>(1000 * (shape + 1) + n));
        for (int64_t i = 0; i < g; ++i) rows.push_back(seeds.back());
      }
      const uint64_t shape_seed = static_cast<uint64_t>(shape + 1);
      auto lrs = torch::tensor(grid, torch::kDouble).repeat({instances});
      const auto tuning = fm::make_batched_task(family, shape_seed, rows);
      torch::Tensor lowest_at;
      const auto by_rate = fm::batched_adamw_cosine_final_losses(*tuning, spec, lrs, &lowest_at)
                               .view({instances, g});
      lowest_at = lowest_at.view({instances, g});
      const auto task = fm::make_batched_task(family, shape_seed, seeds);
      const auto hand =
          fm::batched_schedule_final_losses(*task, spec, flt::optim::LearnedSchedule());
      std::vector<double> shape_rates;
      for (int64_t n = 0; n < instances; ++n) {
        const auto row = by_rate[n];
        const int64_t best = row.argmin().item<int64_t>();
        const double tuned = row[best].item<double>();
        if (!std::isfinite(tuned) || tuned <= 0) continue;  // every rate diverged: no reference
        s.rates.push_back(grid[best]);
        shape_rates.push_back(grid[best]);
        std::vector<double> losses(g);
        for (int64_t i = 0; i < g; ++i) {
          const double loss = row[i].item<double>();
          losses[i] = std::isfinite(loss) ? loss : std::numeric_limits<double>::infinity();
        }
        s.least_rates.push_back(least_as_good(grid, losses));
        lowest_fraction.push_back(lowest_at[n][best].item<double>());
        if (best == 0 || best == g - 1) ++s.at_edge;
        hand_ratio.push_back(hand[n].item<double>() / tuned);
        untuned_ratio.push_back(row[untuned].item<double>() / tuned);
      }
      // Each shape on stderr: which of a family's shapes want which rates.
      std::fprintf(stderr, "  %s, %lld steps: tuned lr median %.0e (of %zu)\n",
                   task->name().c_str(), static_cast<long long>(spec.steps),
                   quantile(shape_rates, 0.5), shape_rates.size());
    }
    const auto within =
        std::count_if(hand_ratio.begin(), hand_ratio.end(), [](double r) { return r <= 1.05; });
    char hand_text[64], untuned_text[64], lowest_text[64];
    std::snprintf(lowest_text, sizeof(lowest_text), "%4.2f %4.2f %4.2f",
                  quantile(lowest_fraction, 0), quantile(lowest_fraction, 0.5),
                  quantile(lowest_fraction, 1));
    std::snprintf(hand_text, sizeof(hand_text), "%6.2f %8.2f %7ld of %zu",
                  quantile(hand_ratio, 0.5), quantile(hand_ratio, 1), static_cast<long>(within),
                  hand_ratio.size());
    std::snprintf(untuned_text, sizeof(untuned_text), "%6.2f %8.2f", quantile(untuned_ratio, 0.5),
                  quantile(untuned_ratio, 1));
    std::printf(
        "%-28s | %4zu | %8.0e %8.0e %8.0e | %8.0e %8.0e %8.0e | %2d of %-3zu | %-21s | %-32s | "
        "%-20s\n",
        fm::batched_family_name(family).c_str(), s.rates.size(), quantile(s.rates, 0),
        quantile(s.rates, 0.5), quantile(s.rates, 1), quantile(s.least_rates, 0),
        quantile(s.least_rates, 0.5), quantile(s.least_rates, 1), s.at_edge, s.rates.size(),
        lowest_text, hand_text, untuned_text);
    std::fflush(stdout);
    all.rates.insert(all.rates.end(), s.rates.begin(), s.rates.end());
    all.least_rates.insert(all.least_rates.end(), s.least_rates.begin(), s.least_rates.end());
    all.at_edge += s.at_edge;
  }
  std::printf(
      "\ntuned AdamW-cosine rates: runs | argmin: lowest median top | lowest within 1.05x of the "
      "best: lowest median top | at the grid's edge\n");
  print_rates(
      families.size() == fm::all_batched_families().size() ? "every family" : "these families", all,
      all.rates.size());
  const auto suite = suite_rates(csv, fm::default_reference_grid());
  if (!suite.rates.empty())
    print_rates("the held-out suite's real runs", suite, suite.rates.size());
  return 0;
}
