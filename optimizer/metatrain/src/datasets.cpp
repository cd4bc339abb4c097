#include "flt/metatrain/datasets.h"

#include <c10/util/Exception.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <tuple>
#include <utility>

namespace flt::metatrain::data {

namespace fs = std::filesystem;

namespace {

constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";
constexpr const char* kSklearnDataDir = "/usr/lib/python3/dist-packages/sklearn/datasets/data";
constexpr const char* kLicenceDir = "/usr/share/common-licenses";
constexpr const char* kPythonLibParent = "/usr/lib";
/// The modules of Python's standard library that python_text reads, in this order.
constexpr const char* kPythonTextModules[] = {"argparse.py", "dataclasses.py", "difflib.py",
                                              "pathlib.py"};

std::string env_or(const char* variable, const char* fallback) {
  const char* value = std::getenv(variable);
  return value != nullptr && *value != '\0' ? value : fallback;
}

/// The whole content of a file, gunzipped when it is gzip (zlib reads plain files unchanged).
std::string read_file(const std::string& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  TORCH_CHECK(file != nullptr, "cannot open ", path);
  std::string content;
  char buffer[1 << 16];
  int n = 0;
  while ((n = gzread(file, buffer, sizeof(buffer))) > 0) content.append(buffer, n);
  int error = Z_OK;
  const char* message = gzerror(file, &error);
  const std::string reason = error == Z_OK || error == Z_STREAM_END ? "" : message;
  gzclose(file);
  TORCH_CHECK(n == 0 && reason.empty(), "cannot read ", path, ": ", reason);
  return content;
}

// ---- Fashion-MNIST ------------------------------------------------------------------------------

uint32_t big_endian(const std::string& bytes, size_t at) {
  const auto* b = reinterpret_cast<const unsigned char*>(bytes.data() + at);
  return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | uint32_t{b[3]};
}

/// An IDX file (http://yann.lecun.com/exdb/mnist/ format: magic 0x0000080D with D dimensions of
/// unsigned bytes, each dimension a big-endian uint32) -> uint8 tensor of those dimensions.
torch::Tensor read_idx(const std::string& path, int64_t dims) {
  const std::string bytes = read_file(path);
  const size_t header = 4 + 4 * dims;
  TORCH_CHECK(bytes.size() >= header, path, ": not an IDX file (", bytes.size(), " bytes)");
  const uint32_t magic = big_endian(bytes, 0);
  TORCH_CHECK(magic == 0x800u + static_cast<uint32_t>(dims), path,
              ": not an IDX file of unsigned bytes with ", dims, " dimensions (magic 0x", std::hex,
              magic, ")");
  std::vector<int64_t> shape;
  int64_t count = 1;
  for (int64_t d = 0; d < dims; ++d) {
    shape.push_back(big_endian(bytes, 4 + 4 * d));
    count *= shape.back();
  }
  TORCH_CHECK(bytes.size() == header + static_cast<size_t>(count), path, ": expected ", count,
              " data bytes after the header, found ", bytes.size() - header);
  auto out = torch::empty(shape, torch::kUInt8);
  std::copy(bytes.begin() + header, bytes.end(), out.data_ptr<uint8_t>());
  return out;
}

struct RawMnist {
  torch::Tensor train_images, train_labels, test_images, test_labels;  // uint8
  double mean = 0.0, std = 1.0;  // of the training pixels scaled to [0, 1]
};

const RawMnist& raw_fashion_mnist() {
  static std::mutex mutex;
  static std::map<std::string, RawMnist> cache;  // by folder
  const std::string dir = env_or("FLT_FASHION_MNIST_DIR", kFashionMnistDir);
  std::lock_guard<std::mutex> lock(mutex);
  auto found = cache.find(dir);
  if (found != cache.end()) return found->second;
  const auto file = [&](const char* name) {
    const std::string path = dir + "/" + name;
    TORCH_CHECK(fs::is_regular_file(path), "fashion_mnist: ", path,
                " not found (install the Debian package dataset-fashion-mnist, or point "
                "FLT_FASHION_MNIST_DIR at a folder holding the four IDX files)");
    return path;
  };
  RawMnist raw;
  raw.train_images = read_idx(file("train-images-idx3-ubyte.gz"), 3);
  raw.train_labels = read_idx(file("train-labels-idx1-ubyte.gz"), 1);
  raw.test_images = read_idx(file("t10k-images-idx3-ubyte.gz"), 3);
  raw.test_labels = read_idx(file("t10k-labels-idx1-ubyte.gz"), 1);
  TORCH_CHECK(raw.train_images.size(0) == raw.train_labels.size(0) &&
                  raw.test_images.size(0) == raw.test_labels.size(0),
              "fashion_mnist: images and labels differ in number in ", dir);
  const auto pixels = raw.train_images.to(torch::kDouble) / 255.0;
  raw.mean = pixels.mean().item<double>();
  raw.std = pixels.std().item<double>();
  return cache.emplace(dir, std::move(raw)).first->second;
}

torch::Tensor first(const torch::Tensor& t, int64_t limit) {
  return limit == 0 || limit >= t.size(0) ? t : t.slice(0, 0, limit);
}

// ---- tabular ------------------------------------------------------------------------------------

struct TabularSource {
  const char* name;
  const char* data_file;
  const char* target_file;  // nullptr: the label is the last column of data_file
  bool header;              // first line "n_samples,n_features,class names..."
  int64_t classes;          // 0 = regression
};

const std::vector<TabularSource>& tabular_sources() {
  static const std::vector<TabularSource> sources = {
      {"iris", "iris.csv", nullptr, true, 3},
      {"wine", "wine_data.csv", nullptr, true, 3},
      {"breast_cancer", "breast_cancer.csv", nullptr, true, 2},
      {"digits", "digits.csv.gz", nullptr, false, 10},
      {"diabetes", "diabetes_data_raw.csv.gz", "diabetes_target.csv.gz", false, 0},
  };
  return sources;
}

/// Rows of numbers separated by commas or blanks.
std::vector<std::vector<double>> parse_rows(const std::string& text, bool skip_header,
                                            const std::string& path) {
  std::vector<std::vector<double>> rows;
  std::istringstream lines(text);
  std::string line;
  int64_t number = 0;
  while (std::getline(lines, line)) {
    ++number;
    if (skip_header && number == 1) continue;
    std::replace(line.begin(), line.end(), ',', ' ');
    std::istringstream fields(line);
    std::vector<double> row;
    std::string field;
    while (fields >> field) {
      char* end = nullptr;
      row.push_back(std::strtod(field.c_str(), &end));
      TORCH_CHECK(end != field.c_str() && *end == '\0', path, ":", number, ": not a number: \"",
                  field, "\"");
    }
    if (row.empty()) continue;
    TORCH_CHECK(rows.empty() || row.size() == rows.front().size(), path, ":", number, ": ",
                row.size(), " fields, the first row has ", rows.front().size());
    rows.push_back(std::move(row));
  }
  TORCH_CHECK(!rows.empty(), path, ": no rows");
  return rows;
}

torch::Tensor to_tensor(const std::vector<std::vector<double>>& rows) {
  auto out = torch::empty({static_cast<int64_t>(rows.size()), static_cast<int64_t>(rows[0].size())},
                          torch::kDouble);
  auto* p = out.data_ptr<double>();
  for (const auto& row : rows) p = std::copy(row.begin(), row.end(), p);
  return out;
}

/// A permutation of 0..n-1 from a fixed seed: Fisher-Yates over std::mt19937_64, whose output the
/// C++ standard fixes (std::shuffle and torch::randperm may differ between libraries / versions).
torch::Tensor fixed_permutation(int64_t n, uint64_t seed) {
  std::mt19937_64 engine(seed);
  std::vector<int64_t> order(n);
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  for (int64_t i = n - 1; i > 0; --i) {
    std::swap(order[i], order[engine() % static_cast<uint64_t>(i + 1)]);
  }
  return torch::tensor(order, torch::kInt64);
}

/// (x - mean) / std with the training part's statistics (a constant column stays 0).
std::pair<torch::Tensor, torch::Tensor> standardise(const torch::Tensor& train,
                                                    const torch::Tensor& test) {
  const auto mean = train.mean(0, /*keepdim=*/true);
  auto std = train.std(0, /*unbiased=*/true, /*keepdim=*/true);
  std = torch::where(std > 1e-12, std, torch::ones_like(std));
  return {(train - mean) / std, (test - mean) / std};
}

Split load_tabular(const TabularSource& source, const std::string& dir) {
  const auto data_path = dir + "/" + source.data_file;
  auto data = to_tensor(parse_rows(read_file(data_path), source.header, data_path));
  torch::Tensor x, y;
  if (source.target_file == nullptr) {
    x = data.slice(1, 0, data.size(1) - 1);
    y = data.select(1, data.size(1) - 1);
  } else {
    const auto target_path = dir + "/" + source.target_file;
    y = to_tensor(parse_rows(read_file(target_path), false, target_path)).select(1, 0);
    TORCH_CHECK(y.size(0) == data.size(0), target_path, ": ", y.size(0), " targets for ",
                data.size(0), " rows of ", data_path);
    x = data;
  }
  const int64_t n = x.size(0);
  const int64_t n_train = (n * 4) / 5;
  const auto order = fixed_permutation(n, /*seed=*/20240601);
  const auto train_idx = order.slice(0, 0, n_train), test_idx = order.slice(0, n_train);
  Split split;
  split.name = source.name;
  split.classes = source.classes;
  auto [train_x, test_x] = standardise(x.index_select(0, train_idx), x.index_select(0, test_idx));
  split.train_x = train_x.to(torch::kFloat).contiguous();
  split.test_x = test_x.to(torch::kFloat).contiguous();
  if (source.classes > 0) {
    const auto labels = y.to(torch::kInt64);
    TORCH_CHECK(labels.min().item<int64_t>() >= 0 && labels.max().item<int64_t>() < source.classes,
                data_path, ": labels outside [0, ", source.classes, ")");
    split.train_y = labels.index_select(0, train_idx).contiguous();
    split.test_y = labels.index_select(0, test_idx).contiguous();
  } else {
    auto [train_y, test_y] = standardise(y.index_select(0, train_idx).unsqueeze(1),
                                         y.index_select(0, test_idx).unsqueeze(1));
    split.train_y = train_y.to(torch::kFloat).contiguous();
    split.test_y = test_y.to(torch::kFloat).contiguous();
  }
  return split;
}

}  // namespace

Split fashion_mnist(int64_t train_limit, int64_t test_limit) {
  TORCH_CHECK(train_limit >= 0 && test_limit >= 0,
              "fashion_mnist: limits must be >= 0 (0 = all), got train_limit = ", train_limit,
              ", test_limit = ", test_limit);
  const auto& raw = raw_fashion_mnist();
  static std::mutex mutex;
  static std::map<std::tuple<const RawMnist*, int64_t, int64_t>, Split> cache;
  std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_tuple(&raw, train_limit, test_limit);
  auto found = cache.find(key);
  if (found != cache.end()) return found->second;
  const auto images = [&](const torch::Tensor& t) {
    return ((t.to(torch::kFloat) / 255.0 - raw.mean) / raw.std).unsqueeze(1).contiguous();
  };
  Split split;
  split.name = "fashion-mnist";
  split.classes = 10;
  split.train_x = images(first(raw.train_images, train_limit));
  split.train_y = first(raw.train_labels, train_limit).to(torch::kInt64);
  split.test_x = images(first(raw.test_images, test_limit));
  split.test_y = first(raw.test_labels, test_limit).to(torch::kInt64);
  return cache.emplace(key, std::move(split)).first->second;
}

namespace {

/// A corpus of the files' concatenated bytes: newline and printable ASCII, every other byte the
/// unknown id; the first 90% to train on, the rest held out.
TextCorpus corpus_of(const std::vector<fs::path>& files) {
  std::string text;
  for (const auto& file : files) text += read_file(file.string());
  TextCorpus corpus;
  std::vector<int64_t> id_of(256, -1);
  corpus.alphabet.push_back('\n');
  for (int c = 32; c < 127; ++c) corpus.alphabet.push_back(static_cast<char>(c));
  for (size_t i = 0; i < corpus.alphabet.size(); ++i) {
    id_of[static_cast<unsigned char>(corpus.alphabet[i])] = static_cast<int64_t>(i);
  }
  const auto unknown = static_cast<int64_t>(corpus.alphabet.size());
  corpus.alphabet.push_back('\0');
  corpus.vocab = static_cast<int64_t>(corpus.alphabet.size());
  std::vector<int64_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const int64_t id = id_of[static_cast<unsigned char>(text[i])];
    ids[i] = id >= 0 ? id : unknown;
  }
  const auto stream = torch::tensor(ids, torch::kInt64);
  const int64_t n_train = stream.size(0) - stream.size(0) / 10;
  corpus.train = stream.slice(0, 0, n_train).clone();
  corpus.test = stream.slice(0, n_train).clone();
  return corpus;
}

}  // namespace

TextCorpus licence_text() {
  static std::mutex mutex;
  static TextCorpus cached;
  std::lock_guard<std::mutex> lock(mutex);
  if (cached.vocab > 0) return cached;
  std::vector<fs::path> files;
  const std::string dir = env_or("FLT_LICENCE_DIR", kLicenceDir);
  if (fs::is_directory(dir)) {
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (!entry.is_symlink() && entry.is_regular_file()) files.push_back(entry.path());
    }
  }
  TORCH_CHECK(!files.empty(), "licence_text: no licence files in ", dir,
              " (Debian's base-files package installs them)");
  std::sort(files.begin(), files.end());
  cached = corpus_of(files);
  return cached;
}

TextCorpus source_text() {
  static std::mutex mutex;
  static TextCorpus cached;
  std::lock_guard<std::mutex> lock(mutex);
  if (cached.vocab > 0) return cached;
  const std::string root = env_or("FLT_SOURCE_TEXT_DIR", FLT_SOURCE_DIR);
  std::vector<fs::path> files;
  for (const char* folder : {"attention", "core", "kernels", "optimizer", "docs"}) {
    const fs::path dir = fs::path(root) / folder;
    if (!fs::is_directory(dir)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(dir)) {
      const auto ext = entry.path().extension().string();
      if (!entry.is_symlink() && entry.is_regular_file() &&
          (ext == ".h" || ext == ".cpp" || ext == ".md"))
        files.push_back(entry.path());
    }
  }
  TORCH_CHECK(!files.empty(), "source_text: no .h, .cpp or .md files under ", root,
              "/{attention,core,kernels,optimizer,docs} (set FLT_SOURCE_TEXT_DIR to a checkout "
              "of FLT Lab)");
  std::sort(files.begin(), files.end());
  cached = corpus_of(files);
  return cached;
}

std::string python_text_dir() {
  const char* set = std::getenv("FLT_PYTHON_TEXT_DIR");
  if (set != nullptr && *set != '\0') return set;
  // The newest /usr/lib/python3.N that holds the modules (Debian 12: python3.11).
  std::string best;
  int best_minor = -1;
  if (fs::is_directory(kPythonLibParent)) {
    for (const auto& entry : fs::directory_iterator(kPythonLibParent)) {
      const auto name = entry.path().filename().string();
      int minor = -1;
      char tail = 0;
      if (std::sscanf(name.c_str(), "python3.%d%c", &minor, &tail) != 1) continue;
      if (minor > best_minor && fs::is_regular_file(entry.path() / kPythonTextModules[0])) {
        best = entry.path().string();
        best_minor = minor;
      }
    }
  }
  return best.empty() ? std::string(kPythonLibParent) + "/python3.N" : best;
}

TextCorpus python_text() {
  static std::mutex mutex;
  static std::map<std::string, TextCorpus> cache;  // by folder
  std::lock_guard<std::mutex> lock(mutex);
  const auto dir = python_text_dir();
  auto found = cache.find(dir);
  if (found != cache.end()) return found->second;
  std::vector<fs::path> files;
  for (const char* module : kPythonTextModules) {
    const auto path = fs::path(dir) / module;
    TORCH_CHECK(fs::is_regular_file(path), "python_text: ", path.string(),
                " not found: the text is Python's standard library (Debian's python3 package), "
                "or set FLT_PYTHON_TEXT_DIR");
    files.push_back(path);
  }
  return cache.emplace(dir, corpus_of(files)).first->second;
}

std::vector<std::string> tabular_names() {
  const std::string dir = env_or("FLT_SKLEARN_DATA_DIR", kSklearnDataDir);
  std::vector<std::string> names;
  for (const auto& source : tabular_sources()) {
    const bool present =
        fs::is_regular_file(dir + "/" + source.data_file) &&
        (source.target_file == nullptr || fs::is_regular_file(dir + "/" + source.target_file));
    if (present) names.emplace_back(source.name);
  }
  return names;
}

Split tabular(const std::string& name) {
  const std::string dir = env_or("FLT_SKLEARN_DATA_DIR", kSklearnDataDir);
  const auto& sources = tabular_sources();
  const auto source = std::find_if(sources.begin(), sources.end(),
                                   [&](const TabularSource& s) { return name == s.name; });
  if (source == sources.end()) {
    std::string known;
    for (const auto& s : sources) known += std::string(known.empty() ? "" : ", ") + s.name;
    TORCH_CHECK(false, "tabular: unknown data set \"", name, "\" (known: ", known, ")");
  }
  const auto names = tabular_names();
  TORCH_CHECK(std::find(names.begin(), names.end(), name) != names.end(), "tabular: ", dir, "/",
              source->data_file,
              " not found: the tabular data sets come from the Debian package python3-sklearn "
              "(apt-get install python3-sklearn), or set FLT_SKLEARN_DATA_DIR");
  static std::mutex mutex;
  static std::map<std::pair<std::string, std::string>, Split> cache;  // by (folder, name)
  std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_pair(dir, name);
  auto found = cache.find(key);
  if (found == cache.end()) found = cache.emplace(key, load_tabular(*source, dir)).first;
  return found->second;
}

}  // namespace flt::metatrain::data
