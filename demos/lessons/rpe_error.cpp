// Lesson 1, FLT Theorem 4.2: with r random features, the RPE mask estimate N^ is within
// eps = O(c sqrt(log(L / delta) / r)) of N in max norm, c = sup |g| / p. So the max error falls as
// r^{-1/2} and grows with the length only as sqrt(log L). Measured here for spectra whose c is
// finite (Gaussian mixture, smooth local with a Cauchy proposal, Gaussian kernel) and for the box
// (local k = 1), whose g / p is unbounded for any proposal: the theorem says nothing there.

#include <torch/types.h>
#include <torch/utils.h>

#include <cmath>

#include "flt/attention/flt.h"
#include "lessons/common.h"

namespace flt::demos {
namespace {

namespace fa = flt::attention;

struct FamilyCase {
  std::string key, label;
  fa::SpectrumFamily family;
  int64_t smoothness;
  double scale;  // RpeSpectrumOptions::scale
  fa::ProposalKind proposal;
  double proposal_sigma;
};

// Widths in token units: f spans a few tokens, p roughly matches g's width (c stays small).
std::vector<FamilyCase> family_cases() {
  return {
      {"gaussian_mixture", "Gaussian mixture", fa::SpectrumFamily::kGaussianMixture, 1, 0.1,
       fa::ProposalKind::kGaussian, 0.2},
      {"local_smooth", "local k=2 (Cauchy p)", fa::SpectrumFamily::kLocal, 2, 1.0,
       fa::ProposalKind::kCauchy, 0.5},
      {"gaussian_kernel", "Gaussian kernel", fa::SpectrumFamily::kGaussianKernel, 1, 3.0,
       fa::ProposalKind::kGaussian, 0.1},
      {"local_box", "local box k=1", fa::SpectrumFamily::kLocal, 1, 2.5,
       fa::ProposalKind::kGaussian, 0.25},
  };
}

fa::FLTAttention make_module(const FamilyCase& c, int64_t r, uint64_t seed) {
  return fa::FLTAttention(fa::FLTAttentionOptions()
                              .heads(1)
                              .head_dim(4)
                              .features(4)
                              .rpe_features(r)
                              .family(c.family)
                              .smoothness(c.smoothness)
                              .rpe_scale(c.scale)
                              .proposal(c.proposal)
                              .proposal_sigma(c.proposal_sigma)
                              .seed(seed));
}

// Token indices 0..L-1 as 1-D positions. -> (L, 1) double
torch::Tensor token_positions(int64_t length) {
  return torch::arange(length, torch::kDouble).view({length, 1});
}

// Mean over seeds of max_ij |N^_ij - N_ij|, in double.
double mean_max_error(const FamilyCase& c, int64_t r, int64_t length, int seeds, uint64_t seed) {
  const auto positions = token_positions(length);
  double total = 0.0;
  torch::Tensor exact;
  for (int s = 0; s < seeds; ++s) {
    auto module = make_module(c, r, seed * 1000 + s);
    module->to(torch::kDouble);
    if (!exact.defined()) exact = module->exact_mask(positions);  // f has no randomness
    total += (module->approximate_mask(positions) - exact).abs().max().item<double>();
  }
  return total / seeds;
}

// c = sup |g| / p over a fine grid of frequencies (inf when g / p overflows: the box).
double importance_bound(const FamilyCase& c) {
  auto module = make_module(c, 4, 0);
  module->to(torch::kDouble);
  const auto xi = torch::linspace(-40.0, 40.0, 80001, torch::kDouble).view({-1, 1});
  const auto g = module->spectrum(xi)[0].abs(), p = module->proposal_density(xi);
  // Where both underflow the ratio is 0 (g decays faster); where only p does, it is unbounded.
  const auto ratio = at::where(p > 0, g / p, at::where(g > 0, INFINITY, 0.0));
  return ratio.max().item<double>();
}

}  // namespace

void run_rpe_error(const LessonSettings& settings, LessonResult& result) {
  torch::NoGradGuard no_grad;
  const bool quick = settings.quick;
  const std::vector<int64_t> rs = quick ? std::vector<int64_t>{4, 16, 64, 256, 1024}
                                        : std::vector<int64_t>{4, 16, 64, 256, 1024, 4096};
  const std::vector<int64_t> lengths = quick ? std::vector<int64_t>{16, 64, 256, 1024}
                                             : std::vector<int64_t>{16, 64, 256, 1024, 4096};
  const int seeds = quick ? 4 : 10;
  const int64_t sweep_length = 256, sweep_r = 256;
  const auto cases = family_cases();
  result.setup = {
      "1-D token positions 0..L-1; N_ij = f(i - j) against N^ = N1 N2^T from r frequencies.",
      "Error = max_ij |N^_ij - N_ij|, mean over " + std::to_string(seeds) +
          " draws; r sweep at L = " + std::to_string(sweep_length) +
          ", L sweep at r = " + std::to_string(sweep_r) + ".",
      "Trivial baseline: N^ = 0 (error max |f| = f(0) = 1 for every family here).",
      "c = sup |g| / p on a grid |xi| <= 40 (Thm 4.2 needs it finite)."};
  result.csv_columns = {"sweep", "family", "r", "L", "max_error", "baseline_error"};

  Progress progress(settings, static_cast<double>(cases.size() * (rs.size() + lengths.size())));
  PlotPanel by_r{
      "max-norm error of N^ vs r (L = 256)", "random features r", "max error", true, true, {}};
  PlotPanel by_l{"max-norm error of N^ vs L (r = 256)", "length L", "max error", true, false, {}};
  for (const auto& c : cases) {
    const double c_bound = importance_bound(c);
    PlotSeries series_r{c.label, {}, {}};
    for (int64_t r : rs) {
      progress.stage(c.label + ", r = " + std::to_string(r));
      const double e = mean_max_error(c, r, sweep_length, seeds, settings.seed);
      series_r.x.push_back(static_cast<double>(r));
      series_r.y.push_back(e);
      result.csv_rows.push_back(
          {"r", c.key, std::to_string(r), std::to_string(sweep_length), format_number(e), "1"});
      progress.advance(1, c.label);
    }
    PlotSeries series_l{c.label, {}, {}};
    for (int64_t length : lengths) {
      progress.stage(c.label + ", L = " + std::to_string(length));
      const double e = mean_max_error(c, sweep_r, length, seeds, settings.seed + 7);
      series_l.x.push_back(static_cast<double>(length));
      series_l.y.push_back(e);
      result.csv_rows.push_back(
          {"L", c.key, std::to_string(sweep_r), std::to_string(length), format_number(e), "1"});
      progress.advance(1, c.label);
    }
    const double slope = log_log_slope(series_r.x, series_r.y);
    // The rate is asymptotic (r >> c^2 log L / eps^2): also fit the three largest r alone.
    const size_t m = rs.size();
    const double tail_slope = log_log_slope({series_r.x.begin() + (m - 3), series_r.x.end()},
                                            {series_r.y.begin() + (m - 3), series_r.y.end()});
    // sqrt(log L) growth, checked over the last two lengths (x4): at short lengths the max runs
    // over few offsets further apart than the estimate's correlation length, so it grows faster
    // there (the full-range factor is in the CSV and the plot).
    const size_t n = lengths.size();
    const double growth = series_l.y[n - 1] / series_l.y[n - 2];
    const double predicted = std::sqrt(std::log(static_cast<double>(lengths[n - 1])) /
                                       std::log(static_cast<double>(lengths[n - 2])));
    const double full_growth = series_l.y.back() / series_l.y.front();
    result.metrics["slope_" + c.key] = slope;
    result.metrics["tail_slope_" + c.key] = tail_slope;
    result.metrics["growth_" + c.key] = growth;
    result.metrics["c_" + c.key] = c_bound;
    result.metrics["error_r_max_" + c.key] = series_r.y.back();
    const bool finite_c = std::isfinite(c_bound) && c_bound < 1e6;
    const std::string c_text = finite_c ? "c = " + format_number(c_bound) : "c = inf";
    result.table.push_back(
        {"slope of max error vs r, " + c.label + " (" + c_text + ")",
         finite_c ? "-1/2 (Thm 4.2)" : "no guarantee (c = inf)",
         format_number(slope) + " (r >= " + std::to_string(rs[m - 3]) + ": " +
             format_number(tail_slope) + ")",
         finite_c ? (slope > -0.6 && slope < -0.4 ? "agrees"
                                                  : (tail_slope > -0.6 && tail_slope < -0.4
                                                         ? "agrees for large r (slower before)"
                                                         : "disagrees"))
                  : (tail_slope > -0.4 ? "as expected: slower than r^-1/2" : "converges anyway")});
    result.metrics["full_growth_" + c.key] = full_growth;
    result.table.push_back(
        {"error growth L = " + std::to_string(lengths[n - 2]) + " -> " +
             std::to_string(lengths[n - 1]) + ", " + c.label,
         "sqrt(log L) ratio " + format_number(predicted),
         format_number(growth) + "x (from L = " + std::to_string(lengths.front()) + ": " +
             format_number(full_growth) + "x)",
         finite_c ? verdict(std::abs(growth - predicted) < 0.25 * predicted) : "n/a"});
    result.table.push_back({"max error at r = " + std::to_string(rs.back()) + ", " + c.label,
                            "-> 0", format_number(series_r.y.back()) + " (baseline N^=0: 1)",
                            series_r.y.back() < 0.5 ? "below baseline" : "not below baseline"});
    by_r.series.push_back(series_r);
    by_l.series.push_back(series_l);
  }
  // Guides: r^{-1/2} through the first family's first point; the trivial baseline.
  PlotSeries guide{"r^-1/2", {}, {}, true};
  for (int64_t r : rs) {
    guide.x.push_back(static_cast<double>(r));
    guide.y.push_back(by_r.series[0].y[0] * std::sqrt(static_cast<double>(rs[0]) / r));
  }
  by_r.series.push_back(guide);
  by_r.series.push_back({"baseline N^=0",
                         {static_cast<double>(rs.front()), static_cast<double>(rs.back())},
                         {1.0, 1.0},
                         true});
  result.panels = {by_r, by_l};
}

}  // namespace flt::demos
