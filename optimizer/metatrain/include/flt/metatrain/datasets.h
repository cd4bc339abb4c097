#pragma once
// Real data sets for training runs, read from files that Debian packages install: nothing is
// downloaded. Used by meta-training task families and by the held-out evaluation
// (training_runs.h).
//
//   auto mnist = flt::metatrain::data::fashion_mnist(/*train_limit=*/10000, /*test_limit=*/2000);
//   auto text = flt::metatrain::data::licence_text();
//   for (const auto& name : flt::metatrain::data::tabular_names()) auto set = tabular(name);
//
// Loaded data are cached in memory (thread-safe), so repeated calls are cheap; the returned tensors
// share that cache: treat them as read-only (index or clone them, never modify them in place).

#include <torch/types.h>

#include <string>
#include <vector>

namespace flt::metatrain::data {

/// A supervised data set split into training and held-out parts.
struct Split {
  std::string name;
  /// Inputs (N, ...) float32: images (N, 1, 28, 28), tabular rows (N, features).
  torch::Tensor train_x, test_x;
  /// Targets: class ids (N) int64 when `classes` > 0; regression targets (N, 1) float32 otherwise.
  torch::Tensor train_y, test_y;
  /// Number of classes; 0 = regression.
  int64_t classes = 0;
};

/// Fashion-MNIST (Debian package `dataset-fashion-mnist`): the gzip IDX files under
/// /usr/share/datasets/fashion-mnist (environment variable FLT_FASHION_MNIST_DIR overrides the
/// folder). Inputs (N, 1, 28, 28) float32, pixels scaled to [0, 1] then standardised by the mean
/// and standard deviation of all 60000 training images; targets (N) int64 in [0, 10). A limit keeps
/// the first `limit` examples of a part (the files are in random class order); 0 = all (60000
/// train, 10000 test). Throws naming the path and the package when a file is missing.
Split fashion_mnist(int64_t train_limit = 0, int64_t test_limit = 0);

/// A character-level text corpus: ids in [0, vocab), 1-D int64 streams.
struct TextCorpus {
  /// The first 90% of the stream, and the held-out last 10%.
  torch::Tensor train, test;
  /// Vocabulary size: the alphabet plus one id (the last) for every other byte.
  int64_t vocab = 0;
  /// alphabet[id] is the character of id for id < vocab - 1; alphabet[vocab - 1] = '\0' stands for
  /// the unknown bytes.
  std::vector<char> alphabet;
};

/// English text: the licences in /usr/share/common-licenses (present on every Debian system;
/// environment variable FLT_LICENCE_DIR overrides the folder, e.g. on a machine without it), the
/// regular files in name order (symbolic links, which only duplicate them, skipped), concatenated.
/// Alphabet: newline and the printable ASCII characters 32..126; any other byte (tab, form feed,
/// UTF-8) maps to the unknown id. On Debian 12: 237 K characters, 214 K training, 24 K held-out.
TextCorpus licence_text();

/// Source code as text: this repository's .h, .cpp and .md files under attention/, core/,
/// kernels/, optimizer/ and docs/ (the checkout the library was built from; the environment
/// variable FLT_SOURCE_TEXT_DIR names another), in path order, with the alphabet of licence_text.
/// Meta-training's character models read it (the held-out suite's text is the licences).
TextCorpus source_text();

/// Python source as text: four modules of Python's standard library (argparse, dataclasses,
/// difflib, pathlib; on Debian 12 292 K characters) from the newest /usr/lib/python3.N (the
/// environment variable FLT_PYTHON_TEXT_DIR names another folder), with the alphabet of
/// licence_text. The development runs' character models read it (training_runs.h); neither
/// meta-training nor the held-out suite does. Throws naming the missing file.
TextCorpus python_text();

/// The small tabular data sets that Debian's `python3-sklearn` package ships as CSV files (the
/// environment variable FLT_SKLEARN_DATA_DIR overrides their folder
/// /usr/lib/python3/dist-packages/sklearn/datasets/data): the names of those present, among
/// "iris", "wine", "breast_cancer", "digits" (classification) and "diabetes" (regression). Empty
/// when the package is not installed.
std::vector<std::string> tabular_names();

/// One of `tabular_names()`: rows (N, features) float32, split 80/20 by a fixed seeded permutation
/// (the same on every machine), features standardised by the training part's mean and standard
/// deviation (regression targets too, so a held-out MSE of 1 is the predict-the-mean baseline).
/// Throws naming the package when it is not installed, and the name when it is unknown.
Split tabular(const std::string& name);

}  // namespace flt::metatrain::data
