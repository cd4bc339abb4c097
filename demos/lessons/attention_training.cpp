// Lesson 8: every attention variant in the same small models, trained the same way, at its
// defaults: a character language model on English text and a classifier of small images read as
// token sequences. Each variant trains at the best learning rate of a small grid (chosen on a seed
// of its own: a fixed rate favours whichever variant it happens to suit), then over three seeds:
// held-out loss, time per step and the memory a forward pass keeps for backward. The papers claim
// each variant close to softmax attention (FLT and FourierFormer: ahead of it); this is where a
// user sees whether that holds at this scale.

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
constexpr int64_t kImageSide = 7, kImageTokens = kImageSide * kImageSide, kGreyLevels = 16,
                  kClasses = 10;

/// Every variant at its defaults; those without a position signal of their own read learned
/// absolute positions (as the transformer's default for them would need), FLT once with them and
/// once with its relative encoding alone (over (row, column) on the image task: `image_options`).
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

/// The options a variant trains with on the image task: FLT's relative encoding over the pixels'
/// (row, column) positions (`pixel_positions`), as the FLT paper encodes image patches.
fa::AttentionOptions image_options(const Variant& variant) {
  if (const auto* flt_options = std::get_if<fa::FLTAttentionOptions>(&variant.options)) {
    return fa::FLTAttentionOptions(*flt_options).position_dim(2);
  }
  return variant.options;
}

/// (row, column) of each of the 49 tokens: (49, 2) float.
torch::Tensor pixel_positions() {
  const auto index = torch::arange(kImageTokens, torch::kFloat);
  return torch::stack({(index / kImageSide).floor(), index.remainder(kImageSide)}, 1);
}

/// Learning rates each variant is tried at (Adam, cosine decay to 10%, clip 1): half-decades
/// around the rate that suits softmax attention at this budget.
const std::vector<double> kLearningRates = {3e-3, 1e-2, 3e-2};

/// One variant's results on one task, over seeds.
struct Measured {
  std::vector<double> held_out;  ///< held-out cross-entropy per seed (NaN: non-finite training)
  std::vector<double> curve;     ///< the first seed's smoothed training loss per step
  double seconds_per_step = 0.0, forward_bytes = 0.0;
  int non_finite = 0;
  std::vector<double> attention_keys;  ///< text: effective keys per query per seed (CharLmRun)
  double lr = 0.0;                     ///< the learning rate chosen on the tuning seed
  std::vector<double> tuning_losses;   ///< the tuning seed's held-out loss at each rate
};

// ---- image-like task: Fashion-MNIST at 7x7, 16 grey levels, as 49 tokens ------------------------

struct TokenImages {
  torch::Tensor train_x, train_y, test_x, test_y;  ///< tokens (N, 49) int64, classes (N)
};

/// Each 28x28 image averaged over 4x4 blocks and quantised to 16 levels between the darkest and
/// brightest pixel of the training set.
const TokenImages& token_images(bool quick) {
  static const TokenImages full = [] {
    const auto split = metatrain::data::fashion_mnist(8000, 2000);
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

/// A SequenceClassifier (E 64, 4 heads, 2 layers) trained with Adam at `lr` (cosine to 10%,
/// gradient norm clipped at 1, as train_char_lm) on minibatches of 32; returns the held-out
/// cross-entropy.
CharLmRun train_image_classifier(const TokenImages& data, const Variant& variant, double lr_max,
                                 int64_t steps, uint64_t seed,
                                 const std::function<void()>& on_step) {
  namespace F = torch::nn::functional;
  Stopwatch watch;
  torch::manual_seed(seed);
  auto options = fa::TransformerOptions(kGreyLevels, 64, 4, 2)
                     .attention(image_options(variant))
                     .classes(kClasses)
                     .max_length(variant.absolute_positions ? kImageTokens : 0);
  fa::SequenceClassifier model(options);
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(lr_max));
  const auto positions = pixel_positions();
  std::mt19937_64 rng(seed * 7919 + 29);
  std::uniform_int_distribution<int64_t> pick(0, data.train_x.size(0) - 1);
  CharLmRun run;
  model->train();
  for (int64_t step = 0; step < steps; ++step) {
    const double lr = lr_max * (0.1 + 0.9 * 0.5 * (1.0 + std::cos(M_PI * step / steps)));
    for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
    std::vector<int64_t> rows(32);
    for (auto& r : rows) r = pick(rng);
    const auto index = torch::tensor(rows);
    const double heap_before = step == 0 ? heap_bytes_in_use() : 0.0;
    const auto loss =
        F::cross_entropy(model->forward(data.train_x.index_select(0, index), positions),
                         data.train_y.index_select(0, index));
    if (step == 0) run.forward_bytes = heap_bytes_in_use() - heap_before;
    if (!lesson_step(optimizer, loss, step, run)) break;
    on_step();
  }
  run.seconds = watch.seconds();
  if (run.diverged) return run;
  torch::NoGradGuard no_grad;
  model->eval();
  const double ce =
      F::cross_entropy(model->forward(data.test_x, positions), data.test_y).item<double>();
  run.valid_perplexity = std::exp(ce);  // the caller reads log(perplexity) = cross-entropy
  run.diverged = !std::isfinite(ce);
  return run;
}

void record(Measured& m, const CharLmRun& run, int64_t steps, bool first_seed) {
  m.held_out.push_back(run.diverged ? NAN : std::log(run.valid_perplexity));
  m.non_finite += run.diverged ? 1 : 0;
  if (std::isfinite(run.attention_keys)) m.attention_keys.push_back(run.attention_keys);
  if (first_seed) {
    m.curve = run.loss;
    m.seconds_per_step = run.seconds / static_cast<double>(steps);
    m.forward_bytes = run.forward_bytes;
  }
}

/// One task's rows: metrics, the paper | here | verdict table, CSV rows and the loss curves.
void report_task(const std::string& task, const std::vector<Measured>& measured,
                 const std::vector<Variant>& list, const LessonSettings& settings,
                 LessonResult& result, PlotPanel& panel) {
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
    result.metrics["learning_rate_" + key] = m.lr;
    int tuning_non_finite = 0;
    for (const double loss : m.tuning_losses) tuning_non_finite += std::isfinite(loss) ? 0 : 1;
    result.metrics["tuning_non_finite_" + key] = tuning_non_finite;
    // How many keys a query spreads its attention over: the sharpness a character model needs.
    std::string sharpness;
    if (!m.attention_keys.empty()) {
      const double keys = flt::detail::mean(m.attention_keys);
      result.metrics["attention_keys_" + key] = keys;
      sharpness = ", " + format_number(keys) + " keys";
    }
    char here[240];
    std::snprintf(here, sizeof(here), "%.3f +- %.3f (%+.1f%%) at lr %g, %.0f ms/step, %.1f MB%s%s",
                  mean, spread, 100.0 * relative, m.lr, 1e3 * m.seconds_per_step,
                  m.forward_bytes / 1e6, sharpness.c_str(),
                  tuning_non_finite > 0 ? " (a tuning rate went non-finite)" : "");
    std::string verdict = v == 0                       ? "baseline"
                          : m.non_finite > 0           ? "non-finite training"
                          : std::abs(relative) <= 0.05 ? "within 5% of softmax"
                          : relative < 0               ? "ahead of softmax by more than 5%"
                                                       : "more than 5% behind softmax";
    result.table.push_back({task + ": " + list[v].label,
                            v == 0 ? "-" : "close to softmax (each paper)", here, verdict});
    for (size_t s = 0; s < m.held_out.size(); ++s) {
      result.csv_rows.push_back({task, list[v].key, std::to_string(settings.seed + s),
                                 format_number(m.lr), format_number(m.held_out[s]),
                                 s == 0 ? format_number(m.seconds_per_step) : "",
                                 s == 0 ? format_number(m.forward_bytes / 1e6) : ""});
    }
    PlotSeries series{list[v].label, {}, m.curve};
    for (size_t i = 0; i < m.curve.size(); ++i) series.x.push_back(static_cast<double>(i + 1));
    panel.series.push_back(series);
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
  // One tuning run per rate (none in the quick version) and `seeds` runs at the chosen rate.
  const std::vector<double> rates = quick ? std::vector<double>{1e-2} : kLearningRates;
  const size_t tuning_runs = rates.size() > 1 ? rates.size() : 0;
  const uint64_t tuning_seed = settings.seed + 1000;

  result.setup = {
      "Text: a causal TransformerLM (2 layers, E 64, 4 heads) on the characters of "
      "/usr/share/common-licenses (the last 10% of every file held out), context " +
          std::to_string(text.context) + ", batch " + std::to_string(text.batch) + ", " +
          std::to_string(text.steps) + " Adam steps (cosine decay to 10% of the rate, clip 1).",
      "Images: a SequenceClassifier (2 layers, E 64, 4 heads, mean pooling) on Fashion-MNIST "
      "averaged to 7x7 and quantised to 16 grey levels (49 tokens), " +
          std::to_string(quick ? 500 : 8000) + " training / " + std::to_string(quick ? 250 : 2000) +
          " held-out images, batch 32, " + std::to_string(image_steps) + " Adam steps (the same).",
      std::string(quick ? "Learning rate 1e-2 for every variant (the full lesson chooses it)."
                        : "Each variant's learning rate is the best of 3e-3, 1e-2 and 3e-2 on each "
                          "task by held-out loss on a seed of its own (seed " +
                              std::to_string(tuning_seed) + "), then fixed for the seeds below."),
      "Each variant at its defaults; all but 'FLT, RPE alone' read learned absolute positions; "
      "on the images FLT's relative encoding reads (row, column). " +
          std::to_string(seeds) + " seed" + (seeds > 1 ? "s" : "") + " from " +
          std::to_string(settings.seed) +
          "; held-out cross-entropy is the mean over seeds; time per step and forward memory "
          "(heap bytes the first forward keeps for backward) from the first seed, one thread "
          "unless OMP_NUM_THREADS says otherwise. Text: 'keys' is the effective number of keys a "
          "query attends to (exp of its attention row's entropy; the later half of each "
          "held-out window, where " +
          std::to_string(text.context / 2) + " to " + std::to_string(text.context) +
          " keys are visible), averaged over layers, heads and seeds.",
  };
  result.csv_columns = {"task",
                        "variant",
                        "seed",
                        "learning_rate",
                        "held_out_cross_entropy",
                        "seconds_per_step",
                        "forward_megabytes"};

  Progress progress(settings, static_cast<double>(list.size() * (tuning_runs + seeds) *
                                                  (text.steps + image_steps)));
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
  // One training run of a variant on one task; the progress bar counts its steps.
  const auto train = [&](bool text_task, const Variant& variant, double lr, uint64_t seed) {
    const std::string label = variant.label + (text_task ? ", text" : ", images");
    progress.stage(label + ", lr " + format_number(lr) + ", seed " + std::to_string(seed));
    CharLmRun run;
    int64_t steps = image_steps;
    if (text_task) {
      CharLmSetup s = text;
      s.absolute_positions = variant.absolute_positions;
      s.lr = lr;
      s.measure_attention = true;
      steps = text.steps;
      run = train_char_lm(corpus, variant.options, s, seed,
                          [&](int64_t) { progress.advance(1, label); });
    } else {
      run = train_image_classifier(token_images(quick), variant, lr, image_steps, seed,
                                   [&] { progress.advance(1, label); });
    }
    progress.advance(static_cast<double>(steps) - static_cast<double>(run.loss.size()), label);
    return run;
  };
  std::vector<Measured> text_results(list.size()), image_results(list.size());
  for (size_t v = 0; v < list.size(); ++v) {
    for (const bool text_task : {true, false}) {
      Measured& m = (text_task ? text_results : image_results)[v];
      m.lr = rates.front();
      double best = INFINITY;
      for (size_t r = 0; r < tuning_runs; ++r) {
        const auto run = train(text_task, list[v], rates[r], tuning_seed);
        const double loss = run.diverged ? NAN : std::log(run.valid_perplexity);
        m.tuning_losses.push_back(loss);
        if (std::isfinite(loss) && loss < best) best = loss, m.lr = rates[r];
      }
      for (int seed = 0; seed < seeds; ++seed) {
        const auto run = train(text_task, list[v], m.lr, settings.seed + seed);
        record(m, run, text_task ? text.steps : image_steps, seed == 0);
      }
    }
  }

  report_task("text", text_results, list, settings, result, text_panel);
  report_task("images", image_results, list, settings, result, image_panel);
  result.panels = {text_panel, image_panel};
}

}  // namespace flt::demos
