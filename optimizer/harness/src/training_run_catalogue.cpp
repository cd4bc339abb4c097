// The held-out suite of real training runs (training_runs.h), as a table: each row names a model,
// its data, its loss and its loop's settings, and one factory makes a TrainingRun of any row.

#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>
#include <torch/nn/modules/rnn.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "flt/attention/transformer.h"
#include "flt/harness/training_runs.h"

namespace flt::harness {

using namespace flt::optim;
using namespace flt::metatrain;
namespace {

namespace nn = torch::nn;

// ---- data ---------------------------------------------------------------------------------------

/// Where a run's data come from.
struct DataSource {
  enum Kind { kFashionMnist, kLicenceText, kTabular, kSmoothRegression };
  Kind kind;
  int64_t train = 0, test = 0;  ///< Fashion-MNIST: the images kept of each part
  const char* set = nullptr;    ///< tabular: the data set (Debian's python3-sklearn ships it)
  int64_t sequence_length = 0;  ///< text: the window a language model reads
};

DataSource fmnist(int64_t train, int64_t test) {
  return {DataSource::kFashionMnist, train, test};
}

DataSource licence_text(int64_t sequence_length) {
  DataSource source{DataSource::kLicenceText};
  source.sequence_length = sequence_length;
  return source;
}

DataSource sklearn(const char* set) {
  DataSource source{DataSource::kTabular};
  source.set = set;
  return source;
}

/// y = sum_j sin(x . w_j) + 0.3 x_0 x_1 over 8 inputs, standardised, plus N(0, 0.1^2) noise: 2000
/// training and 1000 held-out points from a fixed generator (the same data for every seed).
DataSource smooth_regression() {
  return {DataSource::kSmoothRegression};
}

data::Split smooth_regression_split() {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(123);
  const auto x = at::randn({3000, 8}, gen);
  const auto w = at::randn({8, 4}, gen);
  auto y = at::sin(x.matmul(w)).sum(1, true) + 0.3 * (x.select(1, 0) * x.select(1, 1)).unsqueeze(1);
  y = (y - y.mean()) / y.std();
  y = y + 0.1 * at::randn(y.sizes(), gen);
  data::Split split;
  split.name = "deep-tanh-regression";
  split.train_x = x.slice(0, 0, 2000);
  split.test_x = x.slice(0, 2000);
  split.train_y = y.slice(0, 0, 2000);
  split.test_y = y.slice(0, 2000);
  return split;
}

void load(const DataSource& source, TrainingRun& run) {
  switch (source.kind) {
    case DataSource::kFashionMnist:
      run.split = data::fashion_mnist(source.train, source.test);
      return;
    case DataSource::kLicenceText:
      run.corpus = data::licence_text();
      run.sequence_length = source.sequence_length;
      return;
    case DataSource::kTabular: run.split = data::tabular(source.set); return;
    case DataSource::kSmoothRegression: run.split = smooth_regression_split(); return;
  }
}

// ---- models -------------------------------------------------------------------------------------

/// What a model is built for: its data's input width, output width (classes, regression targets
/// or the regression targets), whether the inputs are images (N, 1, 28, 28); for a language model
/// the vocabulary and the window.
struct DataShape {
  int64_t inputs = 0, outputs = 0;
  bool images = false;
  int64_t vocab = 0, length = 0;
};

DataShape shape_of(const TrainingRun& run) {
  DataShape shape;
  if (run.language_model()) {
    shape.vocab = run.corpus.vocab;
    shape.length = run.sequence_length;
    return shape;
  }
  const auto& x = run.split.train_x;
  shape.inputs = x.numel() / x.size(0);
  shape.outputs = run.split.classes > 0 ? run.split.classes : run.split.train_y.size(1);
  shape.images = x.dim() > 2;
  return shape;
}

/// Builds a model for data of `shape`, its weights from LibTorch's global generator.
using ModelRecipe = std::function<TrainableModel(const DataShape&)>;

TrainableModel sequential(nn::Sequential net) {
  return {net.ptr(), [net](const torch::Tensor& x) mutable { return net->forward(x); }};
}

/// Linear layers from the inputs through `hidden` to the outputs, `Activation` between them (none
/// without hidden layers: a linear model); images are flattened first.
template <typename Activation>
ModelRecipe mlp(std::vector<int64_t> hidden) {
  return [hidden](const DataShape& d) {
    std::vector<int64_t> widths = {d.inputs};
    widths.insert(widths.end(), hidden.begin(), hidden.end());
    widths.push_back(d.outputs);
    nn::Sequential net;
    if (d.images) net->push_back(nn::Flatten());
    for (size_t i = 0; i + 1 < widths.size(); ++i) {
      net->push_back(nn::Linear(widths[i], widths[i + 1]));
      if (i + 2 < widths.size()) net->push_back(Activation());
    }
    return sequential(net);
  };
}

/// conv8-pool-conv16-pool-linear, ReLU, on the 64 digit pixels read as one 8x8 image.
TrainableModel digits_cnn(const DataShape& d) {
  return sequential(nn::Sequential(
      nn::Unflatten(nn::UnflattenOptions(1, {1, 8, 8})),
      nn::Conv2d(nn::Conv2dOptions(1, 8, 3).padding(1)), nn::ReLU(), nn::MaxPool2d(2),
      nn::Conv2d(nn::Conv2dOptions(8, 16, 3).padding(1)), nn::ReLU(), nn::MaxPool2d(2),
      nn::Flatten(), nn::Linear(16 * 2 * 2, d.outputs)));
}

/// Character LM: embedding -> one recurrent layer (`Rnn`: nn::LSTM or nn::GRU) -> linear.
/// tokens (B, L) -> logits (B, L, V)
template <typename Rnn, typename RnnOptions>
struct RecurrentLanguageModel : nn::Module {
  RecurrentLanguageModel(int64_t vocab, int64_t embed, int64_t hidden)
      : embedding(register_module("embedding", nn::Embedding(vocab, embed))),
        rnn(register_module("rnn", Rnn(RnnOptions(embed, hidden).batch_first(true)))),
        head(register_module("head", nn::Linear(hidden, vocab))) {}
  torch::Tensor forward(const torch::Tensor& tokens) {
    return head(std::get<0>(rnn(embedding(tokens))));
  }
  nn::Embedding embedding;
  Rnn rnn;
  nn::Linear head;
};

/// Embedding 32, hidden 64.
template <typename Rnn, typename RnnOptions>
TrainableModel recurrent_lm(const DataShape& d) {
  auto model = std::make_shared<RecurrentLanguageModel<Rnn, RnnOptions>>(d.vocab, 32, 64);
  return {model, [model](const torch::Tensor& x) { return model->forward(x); }};
}

TrainableModel transformer_lm(const DataShape& d) {
  attention::TransformerLM model(
      attention::TransformerOptions(d.vocab, /*embed_dim=*/32, /*heads=*/2, /*layers=*/2)
          .max_length(d.length));
  return {model.ptr(), [model](const torch::Tensor& x) mutable { return model->forward(x); }};
}

// ---- the catalogue ------------------------------------------------------------------------------

/// One run: what TrainingRun holds, with the model and the data by recipe.
struct RunSpec {
  const char* name;
  const char* family;  ///< architecture / data, no commas (a CSV field)
  DataSource data;
  ModelRecipe model;
  LossKind loss;
  int64_t batch, steps, eval_every;
  int64_t eval_examples = 0;  ///< 0: every held-out example
};

constexpr auto kCrossEntropy = LossKind::kCrossEntropy;
constexpr auto kSquaredError = LossKind::kMeanSquaredError;

/// A batch larger than any of the tabular sets: every step sees the whole training part.
constexpr int64_t kFullBatch = 1 << 20;

const std::vector<RunSpec>& held_out_specs() {
  // Loops as users write them (plain step(), no loss or run length given to the optimizer), on
  // data that meta-training never sees: sklearn's small tabular sets (most runs: users' models are
  // small, and long full-batch runs on separable sets are where a fast optimizer overfits), a text
  // read by three character models, and one synthetic regression. Fashion-MNIST is not here: the
  // second design meta-trains on it.
  static const std::vector<RunSpec> specs = {
      // name, family, data, model, loss, batch, steps, eval_every, eval_examples
      {"text-gru", "char GRU embed 32 hidden 64 / licence text", licence_text(32),
       recurrent_lm<nn::GRU, nn::GRUOptions>, kCrossEntropy, 16, 1500, 50, 256},
      {"text-lstm", "char LSTM embed 32 hidden 64 / licence text", licence_text(32),
       recurrent_lm<nn::LSTM, nn::LSTMOptions>, kCrossEntropy, 16, 1500, 50, 256},
      {"text-transformer", "TransformerLM softmax 2 layers E32 2 heads / licence text",
       licence_text(32), transformer_lm, kCrossEntropy, 16, 1500, 50, 256},
      {"iris-logreg-full", "logistic regression full batch / iris", sklearn("iris"),
       mlp<nn::ReLU>({}), kCrossEntropy, kFullBatch, 2000, 50},
      {"wine-logreg-full", "logistic regression full batch / wine", sklearn("wine"),
       mlp<nn::ReLU>({}), kCrossEntropy, kFullBatch, 3000, 75},
      {"breast_cancer-logreg-full", "logistic regression full batch / breast_cancer",
       sklearn("breast_cancer"), mlp<nn::ReLU>({}), kCrossEntropy, kFullBatch, 3000, 75},
      {"digits-logreg-full", "logistic regression full batch / digits", sklearn("digits"),
       mlp<nn::ReLU>({}), kCrossEntropy, kFullBatch, 2000, 50},
      {"diabetes-linreg-full", "linear regression full batch / diabetes", sklearn("diabetes"),
       mlp<nn::ReLU>({}), kSquaredError, kFullBatch, 2000, 50},
      {"iris-mlp-tanh", "MLP 4-16-3 tanh / iris", sklearn("iris"), mlp<nn::Tanh>({16}),
       kCrossEntropy, 16, 1000, 25},
      {"wine-mlp", "MLP 13-32-32-3 ReLU / wine", sklearn("wine"), mlp<nn::ReLU>({32, 32}),
       kCrossEntropy, 16, 1000, 25},
      {"breast_cancer-mlp", "MLP 30-32-32-2 ReLU / breast_cancer", sklearn("breast_cancer"),
       mlp<nn::ReLU>({32, 32}), kCrossEntropy, 16, 1000, 25},
      {"breast_cancer-mlp-tanh", "MLP 30-64-2 tanh / breast_cancer", sklearn("breast_cancer"),
       mlp<nn::Tanh>({64}), kCrossEntropy, 32, 2000, 50},
      {"digits-mlp", "MLP 64-32-32-10 ReLU / digits", sklearn("digits"), mlp<nn::ReLU>({32, 32}),
       kCrossEntropy, 16, 1000, 25},
      {"digits-mlp-tanh", "MLP 64-64-10 tanh / digits", sklearn("digits"), mlp<nn::Tanh>({64}),
       kCrossEntropy, 32, 2000, 50},
      {"digits-cnn", "CNN conv8-pool-conv16-pool-linear ReLU / digits as 8x8 images",
       sklearn("digits"), digits_cnn, kCrossEntropy, 32, 1500, 50},
      {"digits-logreg", "logistic regression / digits", sklearn("digits"), mlp<nn::ReLU>({}),
       kCrossEntropy, 16, 1000, 25},
      {"diabetes-mlp", "MLP 10-32-32-1 ReLU / diabetes", sklearn("diabetes"),
       mlp<nn::ReLU>({32, 32}), kSquaredError, 16, 1000, 25},
      {"deep-tanh-regression",
       "MLP 8-64-64-64-64-1 tanh / smooth function of 8 inputs plus noise (synthetic)",
       smooth_regression(), mlp<nn::Tanh>({64, 64, 64, 64}), kSquaredError, 32, 3000, 100},
  };
  return specs;
}

/// The one factory: the row's data loaded, its model built on them.
TrainingRun make_run(const RunSpec& spec) {
  TrainingRun run;
  run.name = spec.name;
  run.family = spec.family;
  load(spec.data, run);
  run.loss = spec.loss;
  run.batch = spec.batch;
  run.steps = spec.steps;
  run.eval_every = spec.eval_every;
  run.eval_examples = spec.eval_examples;
  run.build = [model = spec.model, shape = shape_of(run)](uint64_t) { return model(shape); };
  return run;
}

/// Steps and intervals scaled, at least 10 steps and one interval.
TrainingRun scaled(TrainingRun run, double scale) {
  run.steps = std::max<int64_t>(10, static_cast<int64_t>(std::llround(run.steps * scale)));
  run.eval_every = std::max<int64_t>(1, static_cast<int64_t>(std::llround(run.eval_every * scale)));
  return run;
}

}  // namespace

std::vector<std::string> held_out_training_run_names() {
  std::vector<std::string> names;
  for (const auto& spec : held_out_specs()) names.emplace_back(spec.name);
  return names;
}

std::vector<TrainingRun> held_out_training_runs(double steps_scale,
                                                const std::vector<std::string>& only,
                                                std::vector<std::string>* skipped) {
  TORCH_CHECK(steps_scale > 0.0 && std::isfinite(steps_scale),
              "held_out_training_runs: steps_scale must be positive, got ", steps_scale);
  const auto all = held_out_training_run_names();
  for (const auto& name : only) {
    TORCH_CHECK(std::find(all.begin(), all.end(), name) != all.end(),
                "held_out_training_runs: unknown run \"", name, "\"");
  }
  const auto tabular = data::tabular_names();
  std::vector<TrainingRun> runs;
  for (const auto& spec : held_out_specs()) {
    if (!only.empty() && std::find(only.begin(), only.end(), spec.name) == only.end()) continue;
    if (spec.data.kind == DataSource::kTabular &&
        std::find(tabular.begin(), tabular.end(), spec.data.set) == tabular.end()) {
      if (skipped != nullptr) {
        skipped->push_back(std::string(spec.name) +
                           " (needs the Debian package python3-sklearn: apt-get install "
                           "python3-sklearn)");
      }
      continue;
    }
    runs.push_back(scaled(make_run(spec), steps_scale));
  }
  return runs;
}

TrainingRun quick_training_run() {
  return make_run({"quick-fmnist-mlp", "MLP 784-16-10 tanh / Fashion-MNIST 2k", fmnist(2000, 200),
                   mlp<nn::Tanh>({16}), kCrossEntropy, 32, 100, 10});
}

}  // namespace flt::harness
