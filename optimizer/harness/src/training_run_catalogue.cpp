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
  enum Kind { kFashionMnist, kFashionMnistDevelopment, kText, kTabular, kSynthetic };
  Kind kind;
  int64_t train = 0, test = 0;  ///< Fashion-MNIST: the images kept of each part
  /// Fashion-MNIST development: average-pool the images by this factor (2: 14x14); regress the
  /// (pooled) image itself instead of the class.
  int64_t pool = 1;
  bool autoencode = false;
  const char* set = nullptr;             ///< tabular: the data set (python3-sklearn ships it)
  data::TextCorpus (*text)() = nullptr;  ///< text: the corpus
  int64_t sequence_length = 0;           ///< text: the window a language model reads
  data::Split (*generate)() = nullptr;   ///< synthetic: the generator
};

DataSource fmnist(int64_t train, int64_t test) {
  return {DataSource::kFashionMnist, train, test};
}

/// Development runs' Fashion-MNIST: `train` training images from index 10,000 on, and the last
/// `test` images of the training file held out. Its first 10,000 training images and its test
/// images are left to checks from outside the project; meta-training reads 8x8 images of the
/// same range (batched_tasks.cpp).
DataSource fmnist_development(int64_t train, int64_t test, int64_t pool = 1,
                              bool autoencode = false) {
  DataSource source{DataSource::kFashionMnistDevelopment, train, test, pool, autoencode};
  return source;
}

DataSource text(data::TextCorpus (*corpus)(), int64_t sequence_length) {
  DataSource source{DataSource::kText};
  source.text = corpus;
  source.sequence_length = sequence_length;
  return source;
}

DataSource sklearn(const char* set) {
  DataSource source{DataSource::kTabular};
  source.set = set;
  return source;
}

DataSource synthetic(data::Split (*generate)()) {
  DataSource source{DataSource::kSynthetic};
  source.generate = generate;
  return source;
}

/// `n_train` training and the rest held-out rows of (x, y).
data::Split split_rows(const char* name, const torch::Tensor& x, const torch::Tensor& y,
                       int64_t n_train, int64_t classes = 0) {
  data::Split split;
  split.name = name;
  split.classes = classes;
  split.train_x = x.slice(0, 0, n_train).contiguous();
  split.test_x = x.slice(0, n_train).contiguous();
  split.train_y = y.slice(0, 0, n_train).contiguous();
  split.test_y = y.slice(0, n_train).contiguous();
  return split;
}

/// Standardised to mean 0 and standard deviation 1.
torch::Tensor standardised(const torch::Tensor& y) {
  return (y - y.mean()) / y.std();
}

/// y = sum_j sin(x . w_j) + 0.3 x_0 x_1 over 8 inputs, standardised, plus N(0, 0.1^2) noise: 2000
/// training and 1000 held-out points from a fixed generator (the same data for every seed).
data::Split smooth_regression() {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(123);
  const auto x = at::randn({3000, 8}, gen);
  const auto w = at::randn({8, 4}, gen);
  auto y = at::sin(x.matmul(w)).sum(1, true) + 0.3 * (x.select(1, 0) * x.select(1, 1)).unsqueeze(1);
  y = standardised(y) + 0.1 * at::randn(y.sizes(), gen);
  return split_rows("deep-tanh-regression", x, y, 2000);
}

/// Development: a linear target of 20 correlated inputs (x = z A, A's singular values spread over
/// two decades, so the least-squares problem is ill-conditioned), y standardised plus N(0, 0.5^2)
/// noise; 200 training and 300 held-out points.
data::Split ill_conditioned_regression() {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(2024);
  const auto q = std::get<0>(at::linalg_qr(at::randn({20, 20}, gen)));
  const auto spread = at::pow(10.0, at::linspace(0.0, -2.0, 20));
  const auto x = at::randn({500, 20}, gen).matmul(q * spread.unsqueeze(0)).matmul(q.t());
  const auto x_std = x / x.slice(0, 0, 200).std({0}, /*unbiased=*/true, /*keepdim=*/true);
  auto y = standardised(x_std.matmul(at::randn({20, 1}, gen)));
  y = y + 0.5 * at::randn(y.sizes(), gen);
  return split_rows("ill-conditioned-linreg", x_std, y, 200);
}

/// Development: a random teacher MLP 10-32-1 ReLU of 10 standard normal inputs, standardised, plus
/// N(0, 0.3^2) noise; 400 training and 1000 held-out points (a student larger than the teacher
/// overfits them).
data::Split teacher_regression() {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(2025);
  const auto x = at::randn({1400, 10}, gen);
  const auto w1 = at::randn({10, 32}, gen) / std::sqrt(10.0);
  const auto w2 = at::randn({32, 1}, gen) / std::sqrt(32.0);
  auto y = standardised(at::relu(x.matmul(w1)).matmul(w2));
  y = y + 0.3 * at::randn(y.sizes(), gen);
  return split_rows("teacher-regression", x, y, 400);
}

/// Development: two interleaved spirals in the plane (1.5 turns each, radius 0.2-1, N(0, 0.08^2)
/// jitter), 2 classes; 300 training and 1000 held-out points.
data::Split two_spirals() {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(2026);
  const int64_t n = 1300;
  const auto label = at::randint(0, 2, {n}, gen, at::kLong);
  const auto t = at::rand({n}, gen);
  const auto angle = 3.0 * M_PI * t + M_PI * label.to(at::kFloat);
  const auto radius = 0.2 + 0.8 * t;
  auto x = at::stack({radius * at::cos(angle), radius * at::sin(angle)}, 1);
  x = x + 0.08 * at::randn(x.sizes(), gen);
  return split_rows("two-spirals", x / x.std(), label, 300, 2);
}

void load(const DataSource& source, TrainingRun& run) {
  switch (source.kind) {
    case DataSource::kFashionMnist:
      run.split = data::fashion_mnist(source.train, source.test);
      return;
    case DataSource::kFashionMnistDevelopment: {
      const auto all = data::fashion_mnist();
      const int64_t n = all.train_x.size(0);
      TORCH_CHECK(10000 + source.train + source.test <= n, run.name, ": needs ",
                  10000 + source.train + source.test, " Fashion-MNIST training images, found ", n);
      const auto pooled = [&](const torch::Tensor& images) {
        return source.pool == 1 ? images.contiguous()
                                : at::avg_pool2d(images, source.pool).contiguous();
      };
      run.split.name = "fashion-mnist development";
      run.split.train_x = pooled(all.train_x.narrow(0, 10000, source.train));
      run.split.test_x = pooled(all.train_x.narrow(0, n - source.test, source.test));
      if (source.autoencode) {
        run.split.train_y = run.split.train_x.flatten(1);
        run.split.test_y = run.split.test_x.flatten(1);
      } else {
        run.split.classes = all.classes;
        run.split.train_y = all.train_y.narrow(0, 10000, source.train);
        run.split.test_y = all.train_y.narrow(0, n - source.test, source.test);
      }
      return;
    }
    case DataSource::kText:
      run.corpus = source.text();
      run.sequence_length = source.sequence_length;
      return;
    case DataSource::kTabular: run.split = data::tabular(source.set); return;
    case DataSource::kSynthetic: run.split = source.generate(); return;
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

/// conv8-pool-conv16-pool-linear, ReLU, on one-channel `side` x `side` images; flat inputs (the 64
/// digit pixels) are read as one image first.
ModelRecipe small_cnn(int64_t side) {
  return [side](const DataShape& d) {
    // Initialised last layer first: the order in which the held-out suite's recorded results drew
    // these weights (GCC evaluated the arguments of the nn::Sequential constructor right to left).
    const int64_t pooled = side / 2 / 2;
    nn::Linear head(16 * pooled * pooled, d.outputs);
    nn::Conv2d conv2(nn::Conv2dOptions(8, 16, 3).padding(1));
    nn::Conv2d conv1(nn::Conv2dOptions(1, 8, 3).padding(1));
    nn::Sequential net;
    if (!d.images) net->push_back(nn::Unflatten(nn::UnflattenOptions(1, {1, side, side})));
    net->push_back(conv1);
    net->push_back(nn::ReLU());
    net->push_back(nn::MaxPool2d(2));
    net->push_back(conv2);
    net->push_back(nn::ReLU());
    net->push_back(nn::MaxPool2d(2));
    net->push_back(nn::Flatten());
    net->push_back(head);
    return sequential(net);
  };
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
      {"text-gru", "char GRU embed 32 hidden 64 / licence text", text(data::licence_text, 32),
       recurrent_lm<nn::GRU, nn::GRUOptions>, kCrossEntropy, 16, 1500, 50, 256},
      {"text-lstm", "char LSTM embed 32 hidden 64 / licence text", text(data::licence_text, 32),
       recurrent_lm<nn::LSTM, nn::LSTMOptions>, kCrossEntropy, 16, 1500, 50, 256},
      {"text-transformer", "TransformerLM softmax 2 layers E32 2 heads / licence text",
       text(data::licence_text, 32), transformer_lm, kCrossEntropy, 16, 1500, 50, 256},
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
       sklearn("digits"), small_cnn(8), kCrossEntropy, 32, 1500, 50},
      {"digits-logreg", "logistic regression / digits", sklearn("digits"), mlp<nn::ReLU>({}),
       kCrossEntropy, 16, 1000, 25},
      {"diabetes-mlp", "MLP 10-32-32-1 ReLU / diabetes", sklearn("diabetes"),
       mlp<nn::ReLU>({32, 32}), kSquaredError, 16, 1000, 25},
      {"deep-tanh-regression",
       "MLP 8-64-64-64-64-1 tanh / smooth function of 8 inputs plus noise (synthetic)",
       synthetic(smooth_regression), mlp<nn::Tanh>({64, 64, 64, 64}), kSquaredError, 32, 3000, 100},
  };
  return specs;
}

const std::vector<RunSpec>& development_specs() {
  // Runs of the held-out suite's kinds on data neither it nor any outside check reads: Fashion-
  // MNIST from index 10,000 on (small sets for the tabular runs' late overfitting, 14x14 images for
  // the CNN and the autoencoder), Python's standard library for the character models, and three
  // synthetic sets. A design is chosen on these; the held-out suite then tests it once.
  static const std::vector<RunSpec> specs = {
      // name, family, data, model, loss, batch, steps, eval_every, eval_examples
      {"python-gru", "char GRU embed 32 hidden 64 / Python source", text(data::python_text, 32),
       recurrent_lm<nn::GRU, nn::GRUOptions>, kCrossEntropy, 16, 1500, 50, 256},
      {"python-lstm", "char LSTM embed 32 hidden 64 / Python source", text(data::python_text, 32),
       recurrent_lm<nn::LSTM, nn::LSTMOptions>, kCrossEntropy, 16, 1500, 50, 256},
      {"python-transformer", "TransformerLM softmax 2 layers E32 2 heads / Python source",
       text(data::python_text, 32), transformer_lm, kCrossEntropy, 16, 1500, 50, 256},
      {"fmnist-logreg-full", "logistic regression full batch / Fashion-MNIST 500",
       fmnist_development(500, 2000), mlp<nn::ReLU>({}), kCrossEntropy, kFullBatch, 2000, 50},
      {"ill-conditioned-linreg-full",
       "linear regression full batch / 20 correlated inputs (synthetic)",
       synthetic(ill_conditioned_regression), mlp<nn::ReLU>({}), kSquaredError, kFullBatch, 2000,
       50},
      {"spirals-mlp-tanh", "MLP 2-32-32-2 tanh / two spirals (synthetic)", synthetic(two_spirals),
       mlp<nn::Tanh>({32, 32}), kCrossEntropy, 16, 2000, 50},
      {"fmnist-mlp", "MLP 784-32-32-10 ReLU / Fashion-MNIST 1000", fmnist_development(1000, 2000),
       mlp<nn::ReLU>({32, 32}), kCrossEntropy, 16, 1000, 25},
      {"fmnist-mlp-tanh", "MLP 196-64-10 tanh / Fashion-MNIST 14x14 4000",
       fmnist_development(4000, 2000, 2), mlp<nn::Tanh>({64}), kCrossEntropy, 32, 2000, 50},
      {"fmnist-cnn", "CNN conv8-pool-conv16-pool-linear ReLU / Fashion-MNIST 14x14 4000",
       fmnist_development(4000, 2000, 2), small_cnn(14), kCrossEntropy, 32, 1500, 50},
      {"fmnist-logreg", "logistic regression / Fashion-MNIST 4000", fmnist_development(4000, 2000),
       mlp<nn::ReLU>({}), kCrossEntropy, 16, 1000, 25},
      {"fmnist-autoencoder", "MLP autoencoder 196-64-16-64-196 ReLU / Fashion-MNIST 14x14 4000",
       fmnist_development(4000, 2000, 2, /*autoencode=*/true), mlp<nn::ReLU>({64, 16, 64}),
       kSquaredError, 32, 1500, 50},
      {"teacher-mlp", "MLP 10-64-64-1 ReLU / a random ReLU teacher plus noise (synthetic)",
       synthetic(teacher_regression), mlp<nn::ReLU>({64, 64}), kSquaredError, 16, 1000, 25},
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

std::vector<std::string> names_of(const std::vector<RunSpec>& specs) {
  std::vector<std::string> names;
  for (const auto& spec : specs) names.emplace_back(spec.name);
  return names;
}

/// The runs of `specs` that `only` names (all when empty), scaled; runs whose data set is not
/// installed are left out and listed in `skipped`.
std::vector<TrainingRun> select_runs(const std::vector<RunSpec>& specs, const char* who,
                                     double steps_scale, const std::vector<std::string>& only,
                                     std::vector<std::string>* skipped) {
  TORCH_CHECK(steps_scale > 0.0 && std::isfinite(steps_scale), who,
              ": steps_scale must be positive, got ", steps_scale);
  const auto all = names_of(specs);
  for (const auto& name : only) {
    TORCH_CHECK(std::find(all.begin(), all.end(), name) != all.end(), who, ": unknown run \"", name,
                "\"");
  }
  const auto tabular = data::tabular_names();
  std::vector<TrainingRun> runs;
  for (const auto& spec : specs) {
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

}  // namespace

std::vector<std::string> held_out_training_run_names() {
  return names_of(held_out_specs());
}

std::vector<TrainingRun> held_out_training_runs(double steps_scale,
                                                const std::vector<std::string>& only,
                                                std::vector<std::string>* skipped) {
  return select_runs(held_out_specs(), "held_out_training_runs", steps_scale, only, skipped);
}

std::vector<std::string> development_training_run_names() {
  return names_of(development_specs());
}

std::vector<TrainingRun> development_training_runs(double steps_scale,
                                                   const std::vector<std::string>& only) {
  return select_runs(development_specs(), "development_training_runs", steps_scale, only, nullptr);
}

TrainingRun quick_training_run() {
  return make_run({"quick-fmnist-mlp", "MLP 784-16-10 tanh / Fashion-MNIST 2k", fmnist(2000, 200),
                   mlp<nn::Tanh>({16}), kCrossEntropy, 32, 100, 10});
}

}  // namespace flt::harness
