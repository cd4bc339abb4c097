// Lesson 8: every attention variant in the same small models, trained the same way, at its
// defaults: a character language model on English text and a classifier of small images read as
// token sequences. Held-out loss over seeds, time per step and the memory a forward pass keeps for
// backward. The papers claim each variant close to softmax attention (FLT and FourierFormer: ahead
// of it); this is where a user sees whether that holds at this scale.

#include <torch/nn/functional/loss.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/adam.h>
#include <torch/types.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "flt/attention/transformer.h"
#include "flt/attention/variants.h"
#include "flt/detail/statistics.h"
#include "flt/metatrain/datasets.h"
#include "lessons/common.h"

namespace flt::demos {
namespace {

namespace fa = flt::attention;

/// The image task's sequences: 7x7 pixels of 16 grey levels, 10 classes.
constexpr int64_t kImageTokens = 49, kGreyLevels = 16, kClasses = 10;

/// Every variant at its defaults; those without a position signal of their own read learned
/// absolute positions (as the transformer's default for them would need), FLT once with them and
/// once with its relative encoding alone.
struct Variant {
  std::string key, label;
  fa::AttentionOptions options;
  bool absolute_positions;
};

std::vector<Variant> variants() {
  return {
      {"softmax", "softmax", fa::SoftmaxAttentionOptions(), true},
      {"linear", "linear (elu+1)", fa::LinearAttentionOptions(), true},
      {"performer", "Performer", fa::PerformerAttentionOptions(), true},
      {"fourier", "FourierFormer", fa::FourierAttentionOptions(), true},
      {"schoenbat", "SchoenbAt", fa::SchoenbAttentionOptions(), true},
      {"flt_absolute", "FLT + abs. positions", fa::FLTAttentionOptions(), true},
      {"flt_rpe", "FLT, RPE alone", fa::FLTAttentionOptions(), false},
  };
}

/// One variant's results on one task, over seeds.
struct Measured {
  std::vector<double> held_out;  ///< held-out cross-entropy per seed (NaN: non-finite training)
  std::vector<double> curve;     ///< the first seed's smoothed training loss per step
  double seconds_per_step = 0.0, forward_bytes = 0.0;
  int non_finite = 0;
};

// ---- image-like task: Fashion-MNIST at 7x7, 16 grey levels, as 49 tokens ------------------------

struct TokenImages {
  torch::Tensor train_x, train_y, test_x, test_y;  ///< tokens (N, 49) int64, classes (N)
};

/// Each 28x28 image averaged over 4x4 blocks and quantised to 16 levels between the darkest and
/// brightest pixel of the training set.
const TokenImages& token_images(bool quick) {
  static const TokenImages full = [] {
    const auto split = optim::data::fashion_mnist(8000, 2000);
    const auto lo = split.train_x.min(), hi = split.train_x.max();
    const auto tokens = [&](const torch::Tensor& x) {
      const auto small = torch::avg_pool2d(x, 4).flatten(1);  // (N, 49)
      return ((small - lo) / (hi - lo) * 15.999).floor().clamp(0, 15).to(torch::kInt64);
    };
    return TokenImages{tokens(split.train_x), split.train_y, tokens(split.test_x), split.test_y};
  }();
  static const TokenImages small = [] {
    return TokenImages{full.train_x.slice(0, 0, 500), full.train_y.slice(0, 0, 500),
                       full.test_x.slice(0, 0, 250), full.test_y.slice(0, 0, 250)};
  }();
  return quick ? small : full;
}

/// A SequenceClassifier (E 64, 4 heads, 2 layers) trained with Adam 3e-3 (cosine to 10%, gradient
/// norm clipped at 1, as train_char_lm) on minibatches of 32; returns the held-out cross-entropy.
CharLmRun train_image_classifier(const TokenImages& data, const Variant& variant, int64_t steps,
                                 uint64_t seed, const std::function<void()>& on_step) {
  namespace F = torch::nn::functional;
  Stopwatch watch;
  torch::manual_seed(seed);
  auto options = fa::TransformerOptions(kGreyLevels, 64, 4, 2)
                     .attention(variant.options)
                     .classes(kClasses)
                     .max_length(variant.absolute_positions ? kImageTokens : 0);
  fa::SequenceClassifier model(options);
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(3e-3));
  std::mt19937_64 rng(seed * 7919 + 29);
  std::uniform_int_distribution<int64_t> pick(0, data.train_x.size(0) - 1);
  CharLmRun run;
  model->train();
  for (int64_t step = 0; step < steps; ++step) {
    const double lr = 3e-3 * (0.1 + 0.9 * 0.5 * (1.0 + std::cos(M_PI * step / steps)));
    for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
    std::vector<int64_t> rows(32);
    for (auto& r : rows) r = pick(rng);
    const auto index = torch::tensor(rows);
    const double heap_before = step == 0 ? heap_bytes_in_use() : 0.0;
    const auto loss = F::cross_entropy(model->forward(data.train_x.index_select(0, index)),
                                       data.train_y.index_select(0, index));
    if (step == 0) run.forward_bytes = heap_bytes_in_use() - heap_before;
    if (!lesson_step(optimizer, loss, step, run)) break;
    on_step();
  }
  run.seconds = watch.seconds();
  if (run.diverged) return run;
  torch::NoGradGuard no_grad;
  model->eval();
  const double ce = F::cross_entropy(model->forward(data.test_x), data.test_y).item<double>();
  run.valid_perplexity = std::exp(ce);  // the caller reads log(perplexity) = cross-entropy
  run.diverged = !std::isfinite(ce);
  return run;
}

void record(Measured& m, const CharLmRun& run, int64_t steps, bool first_seed) {
  m.held_out.push_back(run.diverged ? NAN : std::log(run.valid_perplexity));
  m.non_finite += run.diverged ? 1 : 0;
  if (first_seed) {
    m.curve = run.loss;
    m.seconds_per_step = run.seconds / static_cast<double>(steps);
    m.forward_bytes = run.forward_bytes;
  }
}

}  // namespace

void run_attention_training(const LessonSettings& settings, LessonResult& result) {
  const bool quick = settings.quick;
  const int seeds = quick ? 1 : 3;
  const TextCorpus& corpus = text_corpus();
  CharLmSetup text;  // E 64, 4 heads, 2 layers
  text.context = quick ? 32 : 64;
  text.batch = quick ? 8 : 16;
  text.steps = quick ? 20 : 800;
  text.eval_batches = quick ? 4 : 32;
  const int64_t image_steps = quick ? 20 : 600;
  const auto list = variants();

  result.setup = {
      "Text: a causal TransformerLM (2 layers, E 64, 4 heads) on the characters of "
      "/usr/share/common-licenses (the last 10% of every file held out), context " +
          std::to_string(text.context) + ", batch " + std::to_string(text.batch) + ", " +
          std::to_string(text.steps) + " Adam steps (lr 3e-3, cosine to 10%, clip 1).",
      "Images: a SequenceClassifier (2 layers, E 64, 4 heads, mean pooling) on Fashion-MNIST "
      "averaged to 7x7 and quantised to 16 grey levels (49 tokens), " +
          std::to_string(quick ? 500 : 8000) + " training / " + std::to_string(quick ? 250 : 2000) +
          " held-out images, batch 32, " + std::to_string(image_steps) + " Adam steps (the same).",
      "Each variant at its defaults; all but 'FLT, RPE alone' read learned absolute positions. " +
          std::to_string(seeds) + " seed" + (seeds > 1 ? "s" : "") + " from " +
          std::to_string(settings.seed) +
          "; held-out cross-entropy is the mean over seeds; time per step and forward memory "
          "(heap bytes the first forward keeps for backward) from the first seed, one thread "
          "unless OMP_NUM_THREADS says otherwise.",
  };
  result.csv_columns = {
      "task", "variant", "seed", "held_out_cross_entropy", "seconds_per_step", "forward_megabytes"};

  Progress progress(settings,
                    static_cast<double>(list.size() * seeds * (text.steps + image_steps)));
  PlotPanel text_panel{"text: training loss (smoothed, first seed)",
                       "step",
                       "cross-entropy (nats)",
                       false,
                       false,
                       {}};
  PlotPanel image_panel{"images: training loss (smoothed, first seed)",
                        "step",
                        "cross-entropy (nats)",
                        false,
                        false,
                        {}};
  std::vector<Measured> text_results(list.size()), image_results(list.size());
  for (size_t v = 0; v < list.size(); ++v) {
    const auto& variant = list[v];
    CharLmSetup s = text;
    s.absolute_positions = variant.absolute_positions;
    for (int seed = 0; seed < seeds; ++seed) {
      progress.stage(variant.label + ", text, seed " + std::to_string(seed));
      const auto run = train_char_lm(corpus, variant.options, s, settings.seed + seed,
                                     [&](int64_t) { progress.advance(1, variant.label); });
      record(text_results[v], run, text.steps, seed == 0);
      progress.advance(static_cast<double>(text.steps) - static_cast<double>(run.loss.size()),
                       variant.label);
      progress.stage(variant.label + ", images, seed " + std::to_string(seed));
      const auto image =
          train_image_classifier(token_images(quick), variant, image_steps, settings.seed + seed,
                                 [&] { progress.advance(1, variant.label); });
      record(image_results[v], image, image_steps, seed == 0);
      progress.advance(static_cast<double>(image_steps) - static_cast<double>(image.loss.size()),
                       variant.label);
    }
  }

  const auto add_task = [&](const std::string& task, const std::vector<Measured>& measured,
                            PlotPanel& panel) {
    const double softmax = flt::detail::mean(measured[0].held_out);
    for (size_t v = 0; v < list.size(); ++v) {
      const auto& m = measured[v];
      const double mean = flt::detail::mean(m.held_out);
      const double spread = m.held_out.size() > 1 ? flt::detail::sample_std(m.held_out) : 0.0;
      const double relative = mean / softmax - 1.0;
      const std::string key = task + "_" + list[v].key;
      result.metrics["cross_entropy_" + key] = mean;
      result.metrics["non_finite_" + key] = m.non_finite;
      result.metrics["ms_per_step_" + key] = 1e3 * m.seconds_per_step;
      result.metrics["forward_mb_" + key] = m.forward_bytes / 1e6;
      char here[160];
      std::snprintf(here, sizeof(here), "%.3f +- %.3f (%+.1f%%), %.0f ms/step, %.1f MB", mean,
                    spread, 100.0 * relative, 1e3 * m.seconds_per_step, m.forward_bytes / 1e6);
      std::string verdict = v == 0                       ? "baseline"
                            : m.non_finite > 0           ? "non-finite training"
                            : std::abs(relative) <= 0.05 ? "within 5% of softmax"
                            : relative < 0               ? "ahead of softmax by more than 5%"
                                                         : "more than 5% behind softmax";
      result.table.push_back({task + ": " + list[v].label,
                              v == 0 ? "-" : "close to softmax (each paper)", here, verdict});
      for (size_t s = 0; s < m.held_out.size(); ++s) {
        result.csv_rows.push_back({task, list[v].key, std::to_string(settings.seed + s),
                                   format_number(m.held_out[s]),
                                   s == 0 ? format_number(m.seconds_per_step) : "",
                                   s == 0 ? format_number(m.forward_bytes / 1e6) : ""});
      }
      PlotSeries series{list[v].label, {}, m.curve};
      for (size_t i = 0; i < m.curve.size(); ++i) series.x.push_back(static_cast<double>(i + 1));
      panel.series.push_back(series);
    }
  };
  add_task("text", text_results, text_panel);
  add_task("images", image_results, image_panel);
  result.panels = {text_panel, image_panel};
}

}  // namespace flt::demos
