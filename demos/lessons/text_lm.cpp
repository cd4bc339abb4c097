// Lesson 3, FLT Sec. 5.1 in miniature: a character language model on English text with Performer
// attention, FLT with a Gaussian-mixture RPE and FLT with a local RPE. The paper (WikiText-103,
// 6 layers, E = 512): Performer 31.1, FLT Gaussian mixture 30.3, FLT local 30.1 validation
// perplexity: local RPE ahead, both FLT variants ahead of Performer.

#include <torch/types.h>
#include <torch/utils.h>

#include <algorithm>

#include "flt/attention/variants.h"
#include "lessons/common.h"

namespace flt::demos {

void run_text_lm(const LessonSettings& settings, LessonResult& result) {
  namespace fa = flt::attention;
  const bool quick = settings.quick;
  const TextCorpus& corpus = text_corpus();
  CharLmSetup setup;  // the default model: E 64, 4 heads, 2 layers
  setup.context = quick ? 48 : 96;
  setup.batch = quick ? 8 : 12;
  setup.steps = quick ? 60 : 300;
  setup.eval_batches = quick ? 8 : 32;
  // The FLT RPEs in token units: the mixture's f spans ~2 tokens at init, the boxes 1 and 2
  // tokens; p roughly matches g's width. All RPE parameters are learned, shared by the layers.
  const auto flt_base =
      fa::FLTAttentionOptions().features(64).rpe_features(32).proposal_sigma(0.25);
  struct Variant {
    std::string key, label;
    fa::AttentionOptions options;
    bool absolute_positions;
  };
  const std::vector<Variant> variants = {
      {"performer", "Performer (abs. positions)", fa::PerformerAttentionOptions().features(64),
       true},
      {"flt_gaussian_mixture", "FLT Gaussian-mixture RPE",
       fa::FLTAttentionOptions(flt_base)
           .family(fa::SpectrumFamily::kGaussianMixture)
           .rpe_scale(0.1),
       false},
      {"flt_local", "FLT local RPE",
       fa::FLTAttentionOptions(flt_base).family(fa::SpectrumFamily::kLocal).rpe_scale(1.0), false},
  };
  const double unigram = unigram_perplexity(corpus);
  result.setup = {
      "Characters of /usr/share/common-licenses (" + std::to_string(corpus.files.size()) +
          " files, " + std::to_string(corpus.train.size() / 1000) + "k train / " +
          std::to_string(corpus.valid.size() / 1000) + "k held-out chars, vocab " +
          std::to_string(corpus.vocab()) + "; the last 10% of every file is held out).",
      "Causal LM: " + std::to_string(setup.layers) +
          " layers, E = " + std::to_string(setup.embed_dim) +
          ", H = " + std::to_string(setup.heads) + ", context " + std::to_string(setup.context) +
          ", batch " + std::to_string(setup.batch) + ", " + std::to_string(setup.steps) +
          " Adam steps (lr 3e-3, cosine), one seed (" + std::to_string(settings.seed) + ").",
      "m = 64 features; FLT: r = 32, Gaussian proposal s = 0.25, RPE shared by the layers, no",
      "absolute positions; Performer: learned absolute positions (it has no other position "
      "signal).",
      "Trivial baseline: unigram perplexity " + format_number(unigram) + "."};
  result.csv_columns = {"variant", "step", "train_loss_smoothed", "valid_perplexity"};

  Progress progress(settings, static_cast<double>(variants.size() * setup.steps));
  PlotPanel curves{
      "training loss (smoothed) vs step", "step", "cross-entropy (nats)", false, false, {}};
  std::map<std::string, double> ppl;
  for (const auto& variant : variants) {
    CharLmSetup s = setup;
    s.absolute_positions = variant.absolute_positions;
    s.share_rpe = !variant.absolute_positions;
    progress.stage(variant.label);
    const auto run = train_char_lm(corpus, variant.options, s, settings.seed,
                                   [&](int64_t) { progress.advance(1, variant.label); });
    ppl[variant.key] = run.valid_perplexity;
    result.metrics["ppl_" + variant.key] = run.valid_perplexity;
    result.metrics["seconds_" + variant.key] = run.seconds;
    PlotSeries series{variant.label, {}, run.loss};
    for (size_t i = 0; i < run.loss.size(); ++i) {
      series.x.push_back(static_cast<double>(i + 1));
      if (i % 10 == 9 || i + 1 == run.loss.size()) {
        result.csv_rows.push_back(
            {variant.key, std::to_string(i + 1), format_number(run.loss[i]),
             i + 1 == run.loss.size() ? format_number(run.valid_perplexity) : ""});
      }
    }
    curves.series.push_back(series);
  }
  result.metrics["ppl_unigram"] = unigram;
  const double p = ppl["performer"], g = ppl["flt_gaussian_mixture"], l = ppl["flt_local"];
  result.table = {
      {"valid perplexity, Performer", "31.1 (WikiText-103)", format_number(p), "baseline"},
      {"valid perplexity, FLT Gaussian mixture", "30.3", format_number(g),
       g < p ? "agrees (below Performer)" : "disagrees (not below Performer)"},
      {"valid perplexity, FLT local", "30.1 (best)", format_number(l),
       l < std::min(p, g) ? "agrees (best)"
                          : (l < p ? "partly (below Performer, not best)" : "disagrees")},
      {"trivial baseline: unigram perplexity", "-", format_number(unigram),
       std::max({p, g, l}) < unigram ? "all models below it" : "a model is not below it"},
  };
  result.setup.push_back(
      "One seed: differences of a few percent are within seed noise at this scale.");
  result.panels = {curves};
}

}  // namespace flt::demos
