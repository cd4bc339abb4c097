// Real data sets from Debian packages: shapes, label ranges, standardisation, the fixed split, the
// cache, and errors that name the missing path and the package.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "flt/metatrain/datasets.h"
#include "test_util.h"

namespace fd = flt::metatrain::data;
using namespace flt::testing;

namespace {

class Datasets : public flt::testing::SeededTest {};

/// Sets an environment variable for the scope of a test and restores it afterwards.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) had_ = true, old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had_)
      setenv(name_, old_.c_str(), 1);
    else
      unsetenv(name_);
  }

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

}  // namespace

TEST_F(Datasets, FashionMnist_ShapesLabelsAndLimits) {
  const auto split = fd::fashion_mnist(/*train_limit=*/1000, /*test_limit=*/300);
  EXPECT_EQ(split.name, "fashion-mnist");
  EXPECT_EQ(split.classes, 10);
  EXPECT_EQ(split.train_x.sizes(), (std::vector<int64_t>{1000, 1, 28, 28}));
  EXPECT_EQ(split.test_x.sizes(), (std::vector<int64_t>{300, 1, 28, 28}));
  EXPECT_EQ(split.train_x.scalar_type(), torch::kFloat);
  EXPECT_EQ(split.train_y.scalar_type(), torch::kInt64);
  EXPECT_EQ(split.train_y.sizes(), (std::vector<int64_t>{1000}));
  EXPECT_EQ(split.test_y.sizes(), (std::vector<int64_t>{300}));
  EXPECT_GE(split.train_y.min().item<int64_t>(), 0);
  EXPECT_EQ(split.train_y.max().item<int64_t>(), 9);
  // Every class occurs in the first 1000 (the files are in random class order).
  EXPECT_EQ(std::get<0>(at::_unique(split.train_y)).size(0), 10);

  const auto all = fd::fashion_mnist();
  EXPECT_EQ(all.train_x.size(0), 60000);
  EXPECT_EQ(all.test_x.size(0), 10000);
  // A limit keeps the first examples.
  EXPECT_TRUE(torch::equal(all.train_x.slice(0, 0, 1000), split.train_x));
  EXPECT_TRUE(torch::equal(all.test_y.slice(0, 0, 300), split.test_y));
}

TEST_F(Datasets, FashionMnist_StandardisedByTheTrainingStatistics) {
  const auto all = fd::fashion_mnist();
  EXPECT_NEAR(all.train_x.to(torch::kDouble).mean().item<double>(), 0.0, 1e-4);
  EXPECT_NEAR(all.train_x.to(torch::kDouble).std().item<double>(), 1.0, 1e-4);
  // The held-out part uses the same affine map: black pixels (0) map to the same value.
  EXPECT_NEAR(all.test_x.min().item<float>(), all.train_x.min().item<float>(), 1e-6);
  EXPECT_NEAR(all.test_x.max().item<float>(), all.train_x.max().item<float>(), 1e-6);
  // Known statistic of Fashion-MNIST's training pixels: mean 0.2860, std 0.3530 on [0, 1].
  EXPECT_NEAR(-all.train_x.min().item<float>(), 0.2860 / 0.3530, 1e-3);
}

TEST_F(Datasets, FashionMnist_CachedAndDeterministic) {
  const auto a = fd::fashion_mnist(500, 100);
  const auto b = fd::fashion_mnist(500, 100);
  EXPECT_EQ(a.train_x.data_ptr(), b.train_x.data_ptr());  // the same cached tensors
  EXPECT_TRUE(torch::equal(a.test_x, b.test_x));
  expect_error([] { fd::fashion_mnist(-1, 0); }, {"train_limit = -1"});
}

TEST_F(Datasets, FashionMnist_MissingFolderNamesThePathAndThePackage) {
  const std::string dir = "/nonexistent/flt-fashion-mnist";
  ScopedEnv env("FLT_FASHION_MNIST_DIR", dir);
  expect_error([] { fd::fashion_mnist(10, 10); },
               {dir + "/train-images-idx3-ubyte.gz", "dataset-fashion-mnist"});
}

TEST_F(Datasets, LicenceText_VocabularyAndHeldOutTail) {
  const auto corpus = fd::licence_text();
  EXPECT_EQ(corpus.vocab, 97);  // newline, printable ASCII 32..126, unknown
  EXPECT_EQ(static_cast<int64_t>(corpus.alphabet.size()), corpus.vocab);
  EXPECT_EQ(corpus.train.dim(), 1);
  EXPECT_EQ(corpus.train.scalar_type(), torch::kInt64);
  const int64_t total = corpus.train.size(0) + corpus.test.size(0);
  EXPECT_GT(total, 100000);
  EXPECT_EQ(corpus.test.size(0), total / 10);
  EXPECT_GE(torch::cat({corpus.train, corpus.test}).min().item<int64_t>(), 0);
  EXPECT_LT(torch::cat({corpus.train, corpus.test}).max().item<int64_t>(), corpus.vocab);
  // English: the space is the most frequent character and unknown bytes are rare.
  const auto counts = torch::bincount(corpus.train, {}, corpus.vocab);
  EXPECT_EQ(corpus.alphabet[counts.argmax().item<int64_t>()], ' ');
  EXPECT_LT(counts[corpus.vocab - 1].item<int64_t>(), corpus.train.size(0) / 100);
  // Decoding the first ids gives readable text.
  std::string head;
  for (int64_t i = 0; i < 200; ++i) head += corpus.alphabet[corpus.train[i].item<int64_t>()];
  EXPECT_NE(head.find("License"), std::string::npos) << head;
  const auto again = fd::licence_text();
  EXPECT_TRUE(torch::equal(again.train, corpus.train));
}

TEST_F(Datasets, PythonText_CodeWithTheLicenceAlphabet) {
  const auto corpus = fd::python_text();
  EXPECT_EQ(corpus.vocab, 97);
  EXPECT_EQ(corpus.alphabet, fd::licence_text().alphabet);
  const int64_t total = corpus.train.size(0) + corpus.test.size(0);
  EXPECT_GT(total, 200000);
  EXPECT_EQ(corpus.test.size(0), total / 10);
  // Python: the first module is argparse, and the held-out tail is pathlib's.
  std::string head, tail;
  for (int64_t i = 0; i < 2000; ++i) head += corpus.alphabet[corpus.train[i].item<int64_t>()];
  for (int64_t i = 0; i < 2000; ++i) tail += corpus.alphabet[corpus.test[i].item<int64_t>()];
  EXPECT_NE(head.find("argparse"), std::string::npos) << head;
  EXPECT_NE(tail.find("def "), std::string::npos) << tail;
}

TEST_F(Datasets, PythonText_MissingFolderNamesTheFileAndTheVariable) {
  const std::string dir = "/nonexistent/flt-python";
  ScopedEnv env("FLT_PYTHON_TEXT_DIR", dir);
  expect_error([] { fd::python_text(); }, {dir + "/argparse.py", "FLT_PYTHON_TEXT_DIR"});
}

TEST_F(Datasets, Tabular_ShapesStandardisationAndFixedSplit) {
  const auto names = fd::tabular_names();
  // One policy with the Fashion-MNIST tests: the setup (scripts/setup.sh) installs both data
  // packages, so a missing one is a failure, not a skip.
  ASSERT_FALSE(names.empty()) << "the Debian package python3-sklearn is not installed";
  for (const auto& name : names) {
    SCOPED_TRACE(name);
    const auto split = fd::tabular(name);
    EXPECT_EQ(split.name, name);
    const int64_t n = split.train_x.size(0) + split.test_x.size(0);
    EXPECT_EQ(split.train_x.size(0), (n * 4) / 5);
    EXPECT_EQ(split.train_x.size(1), split.test_x.size(1));
    EXPECT_EQ(split.train_x.scalar_type(), torch::kFloat);
    const auto mean = split.train_x.mean(0), std = split.train_x.std(0);
    EXPECT_LT(mean.abs().max().item<float>(), 1e-4);
    // Features are unit-variance except constant columns (digits' blank border pixels) left at 0.
    EXPECT_TRUE(((std - 1).abs().lt(1e-3) | std.lt(1e-6)).all().item<bool>());
    if (split.classes > 0) {
      EXPECT_EQ(split.train_y.scalar_type(), torch::kInt64);
      EXPECT_EQ(split.train_y.dim(), 1);
      EXPECT_GE(split.train_y.min().item<int64_t>(), 0);
      EXPECT_EQ(split.train_y.max().item<int64_t>(), split.classes - 1);
    } else {
      EXPECT_EQ(split.train_y.sizes(), (std::vector<int64_t>{split.train_x.size(0), 1}));
      EXPECT_NEAR(split.train_y.mean().item<float>(), 0.0, 1e-4);
      EXPECT_NEAR(split.train_y.std().item<float>(), 1.0, 1e-3);
    }
  }
  if (std::find(names.begin(), names.end(), "iris") != names.end()) {
    const auto iris = fd::tabular("iris");
    EXPECT_EQ(iris.train_x.sizes(), (std::vector<int64_t>{120, 4}));
    EXPECT_EQ(iris.classes, 3);
  }
}

TEST_F(Datasets, Tabular_SplitDoesNotDependOnTheGlobalSeed) {
  const auto names = fd::tabular_names();
  // One policy with the Fashion-MNIST tests: the setup (scripts/setup.sh) installs both data
  // packages, so a missing one is a failure, not a skip.
  ASSERT_FALSE(names.empty()) << "the Debian package python3-sklearn is not installed";
  // Read the files again under another folder key (the same files), with another global seed.
  const std::string dir = "/usr/lib/python3/dist-packages/sklearn/datasets/data/.";
  const auto a = fd::tabular(names.front());
  torch::manual_seed(7);
  ScopedEnv env("FLT_SKLEARN_DATA_DIR", dir);
  const auto b = fd::tabular(names.front());
  EXPECT_NE(a.train_x.data_ptr(), b.train_x.data_ptr());
  EXPECT_TRUE(torch::equal(a.train_x, b.train_x));
  EXPECT_TRUE(torch::equal(a.test_y, b.test_y));
}

TEST_F(Datasets, Tabular_AbsentPackageAndUnknownNameAreReported) {
  {
    ScopedEnv env("FLT_SKLEARN_DATA_DIR", "/nonexistent/sklearn-data");
    EXPECT_TRUE(fd::tabular_names().empty());
    expect_error([] { fd::tabular("wine"); }, {"/nonexistent/sklearn-data", "python3-sklearn"});
  }
  expect_error([] { fd::tabular("wines"); }, {"\"wines\"", "breast_cancer"});
}
