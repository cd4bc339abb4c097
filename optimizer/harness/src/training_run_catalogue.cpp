// The held-out suite of real training runs (training_runs.h), as a table: each row names a model,
// its data, its loss and its loop's settings, and one factory makes a TrainingRun of any row.

#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/modules/pooling.h>
#include <torch/nn/modules/rnn.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "flt/attention/transformer.h"
#include "flt/harness/training_runs.h"

namespace flt::optim {
namespace {

namespace nn = torch::nn;

// ---- data ---------------------------------------------------------------------------------------

/// Where a run's data come from.
struct DataSource {
  enum Kind { kFashionMnist, kLicenceText, kTabular, kSmoothRegression };
  Kind kind;
  int64_t train = 0, test = 0;  ///< Fashion-MNIST: the images kept of each part
  bool reconstruct = false;     ///< Fashion-MNIST: the targets are the inputs (an autoencoder)
  const char* set = nullptr;    ///< tabular: the data set (Debian's python3-sklearn ships it)
  int64_t sequence_length = 0;  ///< text: the window a language model reads
};

DataSource fmnist(int64_t train, int64_t test) {
  return {DataSource::kFashionMnist, train, test};
}

/// Targets are the (standardised) inputs: a held-out MSE of 1 is predicting the mean pixel.
DataSource fmnist_reconstruction(int64_t train, int64_t test) {
  return {DataSource::kFashionMnist, train, test, /*reconstruct=*/true};
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
      if (source.reconstruct) {
        run.split.train_y = run.split.train_x.reshape({run.split.train_x.size(0), -1});
        run.split.test_y = run.split.test_x.reshape({run.split.test_x.size(0), -1});
        run.split.classes = 0;
      }
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
/// or the reconstruction), whether the inputs are images (N, 1, 28, 28); for a language model the
/// vocabulary and the window.
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

TrainableModel layernorm_mlp(const DataShape& d) {
  return sequential(nn::Sequential(nn::Flatten(), nn::Linear(d.inputs, 128),
                                   nn::LayerNorm(nn::LayerNormOptions({128})), nn::ReLU(),
                                   nn::Linear(128, 64), nn::ReLU(), nn::Linear(64, d.outputs)));
}

TrainableModel zero_init_linear(const DataShape& d) {
  nn::Linear linear(d.inputs, d.outputs);
  torch::NoGradGuard no_grad;
  linear->weight.zero_();
  linear->bias.zero_();
  return sequential(nn::Sequential(nn::Flatten(), linear));
}

/// conv8-pool-conv16-pool-linear, ReLU, on 28x28 images.
TrainableModel small_cnn(const DataShape& d) {
  return sequential(nn::Sequential(
      nn::Conv2d(nn::Conv2dOptions(1, 8, 3).padding(1)), nn::ReLU(), nn::MaxPool2d(2),
      nn::Conv2d(nn::Conv2dOptions(8, 16, 3).padding(1)), nn::ReLU(), nn::MaxPool2d(2),
      nn::Flatten(), nn::Linear(16 * 7 * 7, d.outputs)));
}

/// conv16-BatchNorm-pool-conv16-BatchNorm-pool-linear, ReLU, on 28x28 images.
TrainableModel batchnorm_cnn(const DataShape& d) {
  return sequential(nn::Sequential(
      nn::Conv2d(nn::Conv2dOptions(1, 16, 3).padding(1)), nn::BatchNorm2d(16), nn::ReLU(),
      nn::MaxPool2d(2), nn::Conv2d(nn::Conv2dOptions(16, 16, 3).padding(1)), nn::BatchNorm2d(16),
      nn::ReLU(), nn::MaxPool2d(2), nn::Flatten(), nn::Linear(16 * 7 * 7, d.outputs)));
}

/// Character LM: embedding -> one-layer LSTM -> linear. tokens (B, L) -> logits (B, L, V)
struct LstmLanguageModel : nn::Module {
  LstmLanguageModel(int64_t vocab, int64_t embed, int64_t hidden)
      : embedding(register_module("embedding", nn::Embedding(vocab, embed))),
        lstm(register_module("lstm", nn::LSTM(nn::LSTMOptions(embed, hidden).batch_first(true)))),
        head(register_module("head", nn::Linear(hidden, vocab))) {}
  torch::Tensor forward(const torch::Tensor& tokens) {
    return head(std::get<0>(lstm(embedding(tokens))));
  }
  nn::Embedding embedding;
  nn::LSTM lstm;
  nn::Linear head;
};

TrainableModel lstm_lm(const DataShape& d) {
  auto model = std::make_shared<LstmLanguageModel>(d.vocab, /*embed=*/32, /*hidden=*/64);
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

const std::vector<RunSpec>& held_out_specs() {
  // The last six were added after the rule was made (2026-11-25), as a check an outside user would
  // run: model kinds and loops that neither meta-training nor the runs above use (normalisation
  // layers, a reconstruction loss, zero initialisation, a small data set trained long enough to
  // overfit, a deep tanh network).
  static const std::vector<RunSpec> specs = {
      // name, family, data, model, loss, batch, steps, eval_every, eval_examples
      // (a held-out pass of the CNN costs about 30 training steps)
      {"fmnist-cnn", "CNN conv8-pool-conv16-pool-linear ReLU / Fashion-MNIST 12k",
       fmnist(12000, 2000), small_cnn, kCrossEntropy, 32, 1500, 75, 1000},
      {"fmnist-mlp-tanh", "MLP 784-64-32-10 tanh / Fashion-MNIST 12k", fmnist(12000, 2000),
       mlp<nn::Tanh>({64, 32}), kCrossEntropy, 128, 1500, 50, 2000},
      {"text-lstm", "char LSTM embed 32 hidden 64 / licence text", licence_text(32), lstm_lm,
       kCrossEntropy, 16, 1500, 50, 256},
      {"text-transformer", "TransformerLM softmax 2 layers E32 2 heads / licence text",
       licence_text(32), transformer_lm, kCrossEntropy, 16, 1500, 50, 256},
      {"wine-mlp", "MLP 13-32-32-3 ReLU / wine", sklearn("wine"), mlp<nn::ReLU>({32, 32}),
       kCrossEntropy, 16, 1000, 25},
      {"breast_cancer-mlp", "MLP 30-32-32-2 ReLU / breast_cancer", sklearn("breast_cancer"),
       mlp<nn::ReLU>({32, 32}), kCrossEntropy, 16, 1000, 25},
      {"digits-mlp", "MLP 64-32-32-10 ReLU / digits", sklearn("digits"), mlp<nn::ReLU>({32, 32}),
       kCrossEntropy, 16, 1000, 25},
      {"diabetes-mlp", "MLP 10-32-32-1 ReLU / diabetes", sklearn("diabetes"),
       mlp<nn::ReLU>({32, 32}), kSquaredError, 16, 1000, 25},
      {"digits-logreg", "logistic regression / digits", sklearn("digits"), mlp<nn::ReLU>({}),
       kCrossEntropy, 16, 1000, 25},
      {"diabetes-linreg", "linear regression / diabetes", sklearn("diabetes"), mlp<nn::ReLU>({}),
       kSquaredError, 16, 1000, 25},
      {"fmnist-mlp-layernorm", "MLP 784-128-LayerNorm-64-10 ReLU / Fashion-MNIST 8k",
       fmnist(8000, 2000), layernorm_mlp, kCrossEntropy, 64, 2000, 100},
      {"fmnist-autoencoder",
       "autoencoder 784-128-32-128-784 ReLU (MSE reconstruction) / Fashion-MNIST 8k",
       fmnist_reconstruction(8000, 2000), mlp<nn::ReLU>({128, 32, 128}), kSquaredError, 64, 2000,
       100},
      {"fmnist-logreg-zero-init", "softmax regression initialised at zero / Fashion-MNIST 8k",
       fmnist(8000, 2000), zero_init_linear, kCrossEntropy, 128, 2000, 100},
      {"fmnist-cnn-batchnorm",
       "CNN conv16-BatchNorm-pool-conv16-BatchNorm-pool-linear ReLU / Fashion-MNIST 8k",
       fmnist(8000, 2000), batchnorm_cnn, kCrossEntropy, 32, 1500, 100, 1000},
      {"fmnist-mlp-small-data", "MLP 784-128-128-10 ReLU / Fashion-MNIST 3k (32 epochs: overfits)",
       fmnist(3000, 2000), mlp<nn::ReLU>({128, 128}), kCrossEntropy, 32, 3000, 100},
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

}  // namespace flt::optim
