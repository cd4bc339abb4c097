// Lesson 4, FourierFormer supplement Tables 7 and 8 on a small character LM: phi(x) = x^p for
// p = 1..6 (the paper: odd p does not converge, even p improves up to 4, little beyond) and the
// initial R = 1..5 (the paper: R_init = 1, 2, 3 best, 4 worse; 0.1 also worse), against the
// dot-product (softmax) baseline.

#include <torch/types.h>
#include <torch/utils.h>

#include <cmath>

#include "flt/attention/variants.h"
#include "lessons/common.h"

namespace flt::demos {

void run_fourier_ablation(const LessonSettings& settings, LessonResult& result) {
  namespace fa = flt::attention;
  const bool quick = settings.quick;
  const TextCorpus& corpus = text_corpus();
  CharLmSetup setup;
  setup.embed_dim = quick ? 32 : 48;
  setup.layers = quick ? 1 : 2;
  setup.context = quick ? 32 : 64;
  setup.batch = 8;
  setup.steps = quick ? 80 : 150;
  setup.lr = quick ? 1e-2 : 5e-3;
  setup.eval_batches = quick ? 8 : 16;
  setup.absolute_positions = true;  // as in the paper: only the attention changes

  struct Run {
    std::string key, label;
    fa::AttentionOptions options;
    double power = NAN, r_init = NAN;
  };
  std::vector<Run> runs = {{"softmax", "dot-product baseline", fa::SoftmaxAttentionOptions()}};
  for (int p = 1; p <= 6; ++p) {
    runs.push_back({"p" + std::to_string(p), "phi = x^" + std::to_string(p) + ", R_init 2",
                    fa::FourierAttentionOptions().power(p).r_init(2.0), double(p), 2.0});
  }
  for (double r : {1.0, 3.0, 4.0, 5.0}) {
    runs.push_back({"r" + format_number(r), "phi = x^4, R_init " + format_number(r),
                    fa::FourierAttentionOptions().power(4).r_init(r), 4.0, r});
  }
  const double unigram = unigram_perplexity(corpus);
  result.setup = {
      "Character LM on /usr/share/common-licenses (as in text-lm): " +
          std::to_string(setup.layers) + " layer(s), E = " + std::to_string(setup.embed_dim) +
          ", H = " + std::to_string(setup.heads) + ", context " + std::to_string(setup.context) +
          ", batch " + std::to_string(setup.batch) + ", " + std::to_string(setup.steps) +
          " Adam steps (lr " + format_number(setup.lr) +
          ", cosine), one seed, learned absolute positions.",
      "Fourier attention with a learnable scalar R (the paper's main setting). A run whose loss "
      "turns NaN is 'diverged'.",
      "Trivial baseline: unigram perplexity " + format_number(unigram) + "."};
  result.csv_columns = {"run", "power", "r_init", "valid_perplexity", "diverged", "seconds"};
  Progress progress(settings, static_cast<double>(runs.size() * setup.steps));
  std::map<std::string, double> ppl;
  std::map<std::string, bool> diverged;
  for (const auto& run : runs) {
    progress.stage(run.label);
    const auto out = train_char_lm(corpus, run.options, setup, settings.seed,
                                   [&](int64_t) { progress.advance(1, run.label); });
    // A diverged run stops early: count its missing steps as done.
    progress.advance(static_cast<double>(setup.steps - static_cast<int64_t>(out.loss.size())),
                     run.label);
    ppl[run.key] = out.valid_perplexity;
    diverged[run.key] = out.diverged;
    result.metrics["ppl_" + run.key] = out.valid_perplexity;
    result.csv_rows.push_back({run.key, std::isnan(run.power) ? "" : format_number(run.power),
                               std::isnan(run.r_init) ? "" : format_number(run.r_init),
                               format_number(out.valid_perplexity), out.diverged ? "1" : "0",
                               format_number(out.seconds)});
  }
  result.metrics["ppl_unigram"] = unigram;
  ppl["r2"] = ppl["p4"];
  const auto text = [&](const std::string& key) {
    return diverged[key] ? std::string("diverged") : format_number(ppl[key]);
  };
  const auto worse = [&](const std::string& a, const std::string& b) {  // a worse than b
    return diverged[a] || (!diverged[b] && ppl[a] > ppl[b]);
  };

  // Table 7: odd powers fail, even powers improve up to 4.
  const bool odd_fail = worse("p1", "p2") && worse("p3", "p4") && worse("p5", "p6");
  result.table.push_back({"softmax (dot-product) baseline", "33.15 valid PPL (WikiText-103)",
                          text("softmax"), "baseline"});
  result.table.push_back(
      {"odd p = 1, 3, 5", "do not converge", text("p1") + ", " + text("p3") + ", " + text("p5"),
       diverged["p1"] && diverged["p3"] && diverged["p5"] ? "agrees"
       : odd_fail && !(ppl["p1"] < unigram) && !(ppl["p3"] < unigram) && !(ppl["p5"] < unigram)
           ? "agrees in effect (no NaN, but not below the unigram baseline)"
       : odd_fail ? "partly (no NaN; worse than even p, but learns)"
                  : "disagrees (odd p trains as well)"});
  result.table.push_back(
      {"even p = 2, 4, 6", "32.09, 31.86, 31.84: better with p, small past 4",
       text("p2") + ", " + text("p4") + ", " + text("p6"),
       worse("p2", "p4") ? "agrees (p=4 ahead of p=2)" : "disagrees (p=2 not behind p=4)"});
  result.table.push_back({"Fourier p=4 vs softmax", "31.86 < 33.15 (Fourier better)",
                          text("p4") + " vs " + text("softmax"),
                          worse("softmax", "p4") ? "agrees" : "disagrees"});
  // Table 8: R_init 1-3 best, 4 worse (5 not in the paper).
  double best_mid = std::min({ppl["r1"], ppl["r2"], ppl["r3"]});
  result.table.push_back(
      {"R_init = 1, 2, 3, 4, 5", "31.89, 31.86, 31.90, 32.58, - (1-3 best, 4 worse)",
       text("r1") + ", " + text("r2") + ", " + text("r3") + ", " + text("r4") + ", " + text("r5"),
       ppl["r4"] > best_mid ? "agrees (4 worse than the best of 1-3)"
                            : "disagrees (4 not worse than 1-3)"});
  result.table.push_back(
      {"trivial baseline: unigram perplexity", "-", format_number(unigram), "reference"});
  result.setup.push_back("One seed: differences of a few percent are within seed noise here.");

  PlotPanel by_power{
      "valid perplexity vs p (phi = x^p, R_init 2)", "p", "perplexity", false, false, {}};
  PlotSeries fourier{"Fourier", {}, {}}, soft{"softmax", {}, {}, true};
  for (int p = 1; p <= 6; ++p) {
    fourier.x.push_back(p);
    fourier.y.push_back(ppl["p" + std::to_string(p)]);  // NaN where diverged: no point
  }
  soft.x = {1.0, 6.0};
  soft.y = {ppl["softmax"], ppl["softmax"]};
  by_power.series = {fourier, soft};
  PlotPanel by_r{"valid perplexity vs R_init (p = 4)", "R_init", "perplexity", false, false, {}};
  PlotSeries r_series{"Fourier p=4", {}, {}};
  for (double r : {1.0, 2.0, 3.0, 4.0, 5.0}) {
    r_series.x.push_back(r);
    r_series.y.push_back(ppl["r" + format_number(r)]);
  }
  PlotSeries soft_r{"softmax", {1.0, 5.0}, {ppl["softmax"], ppl["softmax"]}, true};
  by_r.series = {r_series, soft_r};
  result.panels = {by_power, by_r};
}

}  // namespace flt::demos
