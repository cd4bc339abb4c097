#include "lessons/common.h"

#include <malloc.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/adam.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <numeric>
#include <random>
#include <sstream>

#include "flt/attention/transformer.h"
#include "flt/detail/statistics.h"

namespace flt::demos {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr const char* kCorpusDir = "/usr/share/common-licenses";

/// A lesson whose run names its result by `key` and measures its wall time around `body`.
Lesson lesson(const std::string& key, const std::string& title, const std::string& paper,
              void (*body)(const LessonSettings&, LessonResult&)) {
  return {key, title, paper, [key, body](const LessonSettings& settings) {
            Stopwatch watch;
            LessonResult result;
            result.key = key;
            body(settings, result);
            result.seconds = watch.seconds();
            return result;
          }};
}

}  // namespace

const std::vector<Lesson>& lessons() {
  static const std::vector<Lesson> list = {
      lesson("rpe-error", "FLT Thm 4.2: max error of the RPE mask vs random features r",
             "FLT paper, Theorem 4.2", run_rpe_error),
      lesson("speed", "FLT Fig. 1: forward time and peak memory vs length",
             "FLT paper, Fig. 1 (Sec. 5.1)", run_speed),
      lesson("text-lm", "FLT Sec. 5.1 in miniature: character LM perplexity",
             "FLT paper, Table 1 (Sec. 5.1)", run_text_lm),
      lesson("fourier-ablation", "FourierFormer Tables 7 and 8: phi = x^p and the initial R",
             "FourierFormer supplement, Tables 7-8", run_fourier_ablation),
      lesson("density", "FourierFormer E.4: 1-D density estimation, Fourier vs Gaussian KDE",
             "FourierFormer supplement, E.4", run_density),
      lesson("schoenbat", "SchoenbAt Fig. 4 and 5: RMFA error vs features, speed-up vs length",
             "SchoenbAt paper, Fig. 4-5 (Sec. 4.1)", run_schoenbat),
      lesson("swarm", "FLT Fig. 3 (right): swarm optimizers on Rastrigin-like functions",
             "FLT paper, Fig. 3 right (Sec. 5.4)", run_swarm),
      lesson("attention-training",
             "Every variant trained in the same small models: held-out loss, time, memory",
             "each paper's claim of parity with softmax", run_attention_training),
  };
  return list;
}

const Lesson* find_lesson(const std::string& key) {
  for (const auto& lesson : lessons()) {
    if (lesson.key == key) return &lesson;
  }
  return nullptr;
}

std::string format_number(double value, int significant, double small, int scientific_digits) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char text[32];
  const double a = std::abs(value);
  if (a != 0.0 && (a < small || a >= 1e5)) {
    std::snprintf(text, sizeof(text), "%.*e", scientific_digits, value);
  } else {
    std::snprintf(text, sizeof(text), "%.*g", significant, value);
  }
  return text;
}

double log_log_slope(const std::vector<double>& x, const std::vector<double>& y) {
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  int n = 0;
  for (size_t i = 0; i < std::min(x.size(), y.size()); ++i) {
    if (!(x[i] > 0) || !(y[i] > 0) || !std::isfinite(x[i]) || !std::isfinite(y[i])) continue;
    const double lx = std::log(x[i]), ly = std::log(y[i]);
    sx += lx, sy += ly, sxx += lx * lx, sxy += lx * ly;
    ++n;
  }
  if (n < 2) return NAN;
  return (n * sxy - sx * sy) / (n * sxx - sx * sx);
}

double median_seconds(const std::function<void()>& fn, int runs) {
  fn();  // warm-up: first-call allocations and thread start-up
  std::vector<double> times;
  for (int i = 0; i < runs; ++i) {
    Stopwatch watch;
    fn();
    times.push_back(watch.seconds());
  }
  return flt::detail::median(times);
}

const TextCorpus& text_corpus() {
  static const TextCorpus corpus = [] {
    namespace fs = std::filesystem;
    TextCorpus c;
    std::vector<fs::path> paths;
    if (fs::is_directory(kCorpusDir)) {
      for (const auto& entry : fs::directory_iterator(kCorpusDir)) {
        if (entry.is_regular_file() && !entry.is_symlink()) paths.push_back(entry.path());
      }
    }
    std::sort(paths.begin(), paths.end());
    std::vector<std::string> texts;
    std::vector<int> seen(256, 0);
    for (const auto& path : paths) {
      std::ifstream in(path, std::ios::binary);
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (text.empty()) continue;
      for (unsigned char ch : text) seen[ch] = 1;
      texts.push_back(std::move(text));
      c.files.push_back(path.filename().string());
    }
    TORCH_CHECK(!texts.empty(), "text corpus: no text files in ", kCorpusDir,
                " (Debian's base-files ships them)");
    std::vector<int64_t> id(256, -1);
    for (int b = 0; b < 256; ++b) {
      if (seen[b]) {
        id[b] = static_cast<int64_t>(c.alphabet.size());
        c.alphabet.push_back(static_cast<char>(b));
      }
    }
    for (const auto& text : texts) {
      const size_t split = text.size() * 9 / 10;  // the tail of every file is held out
      for (size_t i = 0; i < text.size(); ++i) {
        (i < split ? c.train : c.valid).push_back(id[static_cast<unsigned char>(text[i])]);
      }
    }
    return c;
  }();
  return corpus;
}

double unigram_perplexity(const TextCorpus& corpus) {
  std::vector<double> counts(corpus.vocab(), 1.0);  // add-one: every symbol has some mass
  for (auto t : corpus.train) counts[t] += 1.0;
  const double total = std::accumulate(counts.begin(), counts.end(), 0.0);
  double nll = 0.0;
  for (auto t : corpus.valid) nll -= std::log(counts[t] / total);
  return std::exp(nll / static_cast<double>(corpus.valid.size()));
}

namespace {

// A batch of `batch` windows of context + 1 tokens starting at `starts`. -> (batch, context + 1)
torch::Tensor windows(const std::vector<int64_t>& data, const std::vector<int64_t>& starts,
                      int64_t context) {
  auto out = torch::empty({static_cast<int64_t>(starts.size()), context + 1}, torch::kLong);
  auto a = out.accessor<int64_t, 2>();
  for (size_t b = 0; b < starts.size(); ++b) {
    for (int64_t i = 0; i <= context; ++i) a[b][i] = data[starts[b] + i];
  }
  return out;
}

}  // namespace

bool lesson_step(torch::optim::Optimizer& optimizer, const torch::Tensor& loss, int64_t step,
                 CharLmRun& run) {
  const double value = loss.item<double>();
  if (!std::isfinite(value)) {
    run.diverged = true;
    run.diverged_step = step;
    return false;
  }
  optimizer.zero_grad();
  loss.backward();
  std::vector<torch::Tensor> parameters;
  for (const auto& group : optimizer.param_groups()) {
    parameters.insert(parameters.end(), group.params().begin(), group.params().end());
  }
  torch::nn::utils::clip_grad_norm_(parameters, 1.0);
  optimizer.step();
  run.loss.push_back(run.loss.empty() ? value : 0.9 * run.loss.back() + 0.1 * value);
  return true;
}

double heap_bytes_in_use() {
  const struct mallinfo2 info = mallinfo2();
  return static_cast<double>(info.uordblks + info.hblkhd);
}

CharLmRun train_char_lm(const TextCorpus& corpus, const attention::AttentionOptions& attention,
                        const CharLmSetup& setup, uint64_t seed,
                        const std::function<void(int64_t)>& on_step) {
  namespace F = torch::nn::functional;
  Stopwatch watch;
  torch::manual_seed(seed);
  auto options =
      attention::TransformerOptions(corpus.vocab(), setup.embed_dim, setup.heads, setup.layers)
          .attention(attention)
          .share_rpe(setup.share_rpe);
  if (setup.absolute_positions) options.max_length(setup.context);
  attention::TransformerLM model(options);
  CharLmRun run;
  for (const auto& p : model->parameters()) run.parameters += p.numel();
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(setup.lr));
  std::mt19937_64 rng(seed * 7919 + 17);
  const int64_t train_span = static_cast<int64_t>(corpus.train.size()) - setup.context - 1;
  std::uniform_int_distribution<int64_t> pick(0, train_span);
  const auto loss_of = [&](const torch::Tensor& batch) {
    const auto inputs = batch.slice(1, 0, setup.context);
    const auto targets = batch.slice(1, 1, setup.context + 1);
    const auto logits = model->forward(inputs);  // (B, L, V)
    return F::cross_entropy(logits.reshape({-1, corpus.vocab()}), targets.reshape({-1}));
  };
  model->train();
  for (int64_t step = 0; step < setup.steps; ++step) {
    // Half-cosine decay to 10% of the learning rate over the run.
    const double lr =
        setup.lr *
        (0.1 + 0.9 * 0.5 * (1.0 + std::cos(kPi * step / std::max<int64_t>(1, setup.steps))));
    for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
    std::vector<int64_t> starts(setup.batch);
    for (auto& s : starts) s = pick(rng);
    const auto batch = windows(corpus.train, starts, setup.context);
    const double heap_before = step == 0 ? heap_bytes_in_use() : 0.0;
    const auto loss = loss_of(batch);
    if (step == 0) run.forward_bytes = heap_bytes_in_use() - heap_before;
    if (!lesson_step(optimizer, loss, step, run)) break;
    if (on_step) on_step(step);
  }
  if (run.diverged) {
    run.valid_perplexity = NAN;
  } else {
    // Validation: evenly spaced windows over the held-out text, the same for every model.
    torch::NoGradGuard no_grad;
    model->eval();
    const int64_t span = static_cast<int64_t>(corpus.valid.size()) - setup.context - 1;
    const int64_t count = setup.eval_batches * setup.batch;
    double total = 0.0;
    for (int64_t b = 0; b < setup.eval_batches; ++b) {
      std::vector<int64_t> starts(setup.batch);
      for (int64_t i = 0; i < setup.batch; ++i) starts[i] = (b * setup.batch + i) * span / count;
      total += loss_of(windows(corpus.valid, starts, setup.context)).item<double>();
    }
    const double mean = total / static_cast<double>(setup.eval_batches);
    if (setup.measure_attention) {
      std::vector<int64_t> starts(setup.batch);
      for (int64_t i = 0; i < setup.batch; ++i) starts[i] = i * span / count;
      const auto inputs = windows(corpus.valid, starts, setup.context).slice(1, 0, setup.context);
      double keys = 0.0;
      const auto maps = model->attention_maps(inputs);
      for (const auto& map : maps) {
        const auto rows = map.slice(2, setup.context / 2).to(torch::kDouble).clamp_min(0.0);
        const auto p = rows / rows.sum(-1, true);
        const auto entropy = -at::xlogy(p, p).sum(-1);
        keys += entropy.exp().mean().item<double>();
      }
      run.attention_keys = keys / static_cast<double>(maps.size());
    }
    run.valid_perplexity = std::isfinite(mean) ? std::exp(mean) : NAN;
    run.diverged = !std::isfinite(mean);
  }
  run.seconds = watch.seconds();
  return run;
}

}  // namespace flt::demos
