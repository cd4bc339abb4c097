#include "flt/metatrain/batched_tasks.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <mutex>

#include "batched_ops.h"
#include "flt/metatrain/datasets.h"
#include "tabular_name.h"

namespace flt::metatrain {
namespace {

using detail::affine;
using detail::conv3x3;
using detail::cross_entropy;
using detail::gather_rows;

// splitmix64: the engine's counter-based randomness (mini-batch rows, rescalings), so what an
// instance sees depends on its seed and the step's key alone, not on K or on the other instances.
uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

double unit(uint64_t x) {  // [0, 1)
  return static_cast<double>(mix(x) >> 11) * 0x1.0p-53;
}

at::Generator generator_of(uint64_t seed, uint64_t purpose) {
  return at::make_generator<at::CPUGeneratorImpl>(mix(seed * 4 + purpose));
}
enum Purpose : uint64_t { kShape = 1, kData = 2, kInit = 3 };

double uniform(at::Generator& gen) {
  return at::rand({1}, gen, at::kDouble).item<double>();
}
double log_uniform(at::Generator& gen, double lo, double hi) {
  return std::exp(std::log(lo) + (std::log(hi) - std::log(lo)) * uniform(gen));
}
int64_t uniform_int(at::Generator& gen, int64_t lo, int64_t hi) {
  return lo + at::randint(hi - lo + 1, {1}, gen).item<int64_t>();
}

/// A weight matrix ~ N(0, gain / fan_in) per instance. -> (K, rows, cols) or (K, shape...)
torch::Tensor fan_in_normal(const std::vector<at::Generator>& gens, std::vector<int64_t> shape,
                            int64_t fan_in, double gain = 1.0) {
  std::vector<torch::Tensor> parts;
  for (auto gen : gens)
    parts.push_back(at::randn(shape, gen) * std::sqrt(gain / static_cast<double>(fan_in)));
  return at::stack(parts);
}
torch::Tensor zeros_of(int64_t k, std::vector<int64_t> shape) {
  shape.insert(shape.begin(), k);
  return at::zeros(shape);
}

std::vector<at::Generator> instance_generators(const std::vector<uint64_t>& seeds,
                                               Purpose purpose) {
  std::vector<at::Generator> gens;
  for (auto seed : seeds) gens.push_back(generator_of(seed, purpose));
  return gens;
}

// ---- tabular ------------------------------------------------------------------------------------

class TabularBatch : public BatchedTask {
 public:
  TabularBatch(uint64_t shape_seed, std::vector<uint64_t> seeds, bool rescale)
      : BatchedTask(BatchedFamily::kTabular, shape_seed, std::move(seeds), rescale) {
    auto gen = generator_of(shape_seed, kShape);
    const int64_t rows = std::llround(log_uniform(gen, 128, 2048));
    features_ = std::llround(log_uniform(gen, 2, 32));
    classification_ = uniform(gen) < 0.7;
    classes_ = classification_ ? (uniform(gen) < 0.5 ? 2 : uniform_int(gen, 3, 6)) : 1;
    hidden_ = uniform(gen) < 0.3 ? 0 : int64_t{32} << uniform_int(gen, 0, 3);  // 32 .. 256
    // Most users standardise their columns; some train on raw scales.
    const bool raw_scales = uniform(gen) < 0.4;
    train_rows_ = rows - rows / 5;
    // Most users' tabular loops take mini-batches of 16 .. 64 rows, some the whole set.
    batch_ = uniform(gen) < 0.3 ? train_rows_
                                : std::min(int64_t{16} << uniform_int(gen, 0, 2), train_rows_);
    if (hidden_ > 0) {
      add_parameter({features_, hidden_});
      add_parameter({hidden_});
    }
    add_parameter({hidden_ > 0 ? hidden_ : features_, classes_});
    add_parameter({classes_});
    // Each instance: standard normal rows labelled by a random teacher of the student's shape,
    // its own separability, label noise and imbalance, then (raw scales) every column on its own
    // scale.
    std::vector<torch::Tensor> xs, ys;
    for (auto data_gen : instance_generators(this->seeds(), kData)) {
      const auto z = at::randn({rows, features_}, data_gen);
      const double separability = log_uniform(data_gen, 0.3, 3.0);
      auto h = z;
      if (hidden_ > 0)
        h = at::relu(at::matmul(z, at::randn({features_, hidden_}, data_gen) /
                                       std::sqrt(static_cast<double>(features_))));
      const int64_t width = hidden_ > 0 ? hidden_ : features_;
      auto out = at::matmul(h, at::randn({width, classes_}, data_gen)) /
                 std::sqrt(static_cast<double>(width));
      out = out / out.std().clamp_min(1e-12) * separability;
      torch::Tensor y;
      if (classification_) {
        const double flip = 0.2 * uniform(data_gen);
        const double imbalance = uniform(data_gen) < 0.5 ? 3.0 * uniform(data_gen) : 0.0;
        out.select(1, 0).add_(imbalance);
        y = out.argmax(1);
        y = at::where(at::rand({rows}, data_gen) < flip, at::randint(classes_, {rows}, data_gen),
                      y);
      } else {
        y = out.squeeze(1) / separability + 0.3 / separability * at::randn({rows}, data_gen);
      }
      xs.push_back(raw_scales ? z * at::pow(10.0, at::rand({features_}, data_gen) * 2.0 - 1.0) : z);
      ys.push_back(y);
    }
    const auto x = at::stack(xs), y = at::stack(ys);
    x_train_ = x.narrow(1, 0, train_rows_).contiguous();
    y_train_ = y.narrow(1, 0, train_rows_).contiguous();
    x_test_ = x.narrow(1, train_rows_, rows - train_rows_).contiguous();
    y_test_ = y.narrow(1, train_rows_, rows - train_rows_).contiguous();
  }

 protected:
  std::string describe() const override {
    return detail::tabular_name(train_rows_, features_, classification_ ? classes_ : 0, hidden_,
                                batch_);
  }
  std::vector<torch::Tensor> initial_weights() const override {
    auto gens = instance_generators(seeds(), kInit);
    const int64_t k = instances();
    std::vector<torch::Tensor> w;
    if (hidden_ > 0) {
      w.push_back(fan_in_normal(gens, {features_, hidden_}, features_, 2.0));
      w.push_back(zeros_of(k, {hidden_}));
    }
    const int64_t width = hidden_ > 0 ? hidden_ : features_;
    w.push_back(fan_in_normal(gens, {width, classes_}, width));
    w.push_back(zeros_of(k, {classes_}));
    return w;
  }
  torch::Tensor objective(const std::vector<torch::Tensor>& w, uint64_t key,
                          bool held_out) const override {
    torch::Tensor x = held_out ? x_test_ : x_train_, y = held_out ? y_test_ : y_train_;
    if (!held_out && batch_ < train_rows_) {
      const auto idx = batch_rows(key, batch_, train_rows_);
      x = gather_rows(x, idx);
      y = gather_rows(y, idx);
    }
    size_t i = 0;
    auto h = x;  // (K, B, F)
    if (hidden_ > 0) {
      h = at::relu(affine(h, w[0], w[1]));
      i = 2;
    }
    const auto out = affine(h, w[i], w[i + 1]);  // (K, B, C)
    if (classification_) return cross_entropy(out, y);
    return (out.squeeze(-1) - y).pow(2).mean(1);
  }

 private:
  bool classification_ = true;
  int64_t features_ = 0, classes_ = 1, hidden_ = 0, batch_ = 0, train_rows_ = 0;
  torch::Tensor x_train_, y_train_, x_test_, y_test_;
};

// ---- 8x8 images ---------------------------------------------------------------------------------

/// Fashion-MNIST's training images from index 10,000 on, averaged down to 8x8 (the first 10,000
/// and the test images stay out of meta-training), and their labels. (N, 8, 8), (N)
std::pair<torch::Tensor, torch::Tensor> small_images() {
  static std::mutex mutex;
  static torch::Tensor images, labels;
  std::lock_guard<std::mutex> lock(mutex);
  if (!images.defined()) {
    const auto data = data::fashion_mnist();
    const int64_t n = data.train_x.size(0) - 10000;
    images = at::adaptive_avg_pool2d(data.train_x.narrow(0, 10000, n), {8, 8}).squeeze(1);
    images = ((images - images.mean()) / images.std()).contiguous();
    labels = data.train_y.narrow(0, 10000, n).contiguous();
  }
  return {images, labels};
}

/// Each instance's own random subset of the images: `train` to train on and `held_out` to score.
struct ImageSplit {
  torch::Tensor x_train, y_train, x_test, y_test;  // (K, N, 8, 8), (K, N)
};
ImageSplit draw_images(const std::vector<uint64_t>& seeds, int64_t train, int64_t held_out) {
  const auto [images, labels] = small_images();
  std::vector<torch::Tensor> xtr, ytr, xte, yte;
  for (auto gen : instance_generators(seeds, kData)) {
    const auto idx = at::randperm(images.size(0), gen).narrow(0, 0, train + held_out);
    const auto tr = idx.narrow(0, 0, train), te = idx.narrow(0, train, held_out);
    xtr.push_back(images.index_select(0, tr));
    ytr.push_back(labels.index_select(0, tr));
    xte.push_back(images.index_select(0, te));
    yte.push_back(labels.index_select(0, te));
  }
  return {at::stack(xtr), at::stack(ytr), at::stack(xte), at::stack(yte)};
}

// The same split with each image as a row of 64 pixels: (K, N, 64).
ImageSplit flattened(ImageSplit split) {
  split.x_train = split.x_train.flatten(2).contiguous();
  split.x_test = split.x_test.flatten(2).contiguous();
  return split;
}

class ImageConvBatch : public BatchedTask {
 public:
  ImageConvBatch(uint64_t shape_seed, std::vector<uint64_t> seeds, bool rescale)
      : BatchedTask(BatchedFamily::kImageConv, shape_seed, std::move(seeds), rescale) {
    auto gen = generator_of(shape_seed, kShape);
    train_ = int64_t{256} << uniform_int(gen, 0, 2);  // 256 .. 1024 images
    c1_ = int64_t{2} << uniform_int(gen, 0, 1);
    c2_ = int64_t{4} << uniform_int(gen, 0, 1);
    batch_ = int64_t{16} << uniform_int(gen, 0, 1);
    add_parameter({c1_, 1, 3, 3});
    add_parameter({c1_});
    add_parameter({c2_, c1_, 3, 3});
    add_parameter({c2_});
    add_parameter({c2_, 10});
    add_parameter({10});
    split_ = draw_images(this->seeds(), train_, 512);
  }

 protected:
  std::string describe() const override {
    return "image_conv(" + std::to_string(c1_) + "-" + std::to_string(c2_) + " channels, " +
           std::to_string(train_) + " images, batch " + std::to_string(batch_) + ")";
  }
  std::vector<torch::Tensor> initial_weights() const override {
    auto gens = instance_generators(seeds(), kInit);
    const int64_t k = instances();
    return {fan_in_normal(gens, {c1_, 1, 3, 3}, 9, 2.0),
            zeros_of(k, {c1_}),
            fan_in_normal(gens, {c2_, c1_, 3, 3}, 9 * c1_, 2.0),
            zeros_of(k, {c2_}),
            fan_in_normal(gens, {c2_, 10}, c2_),
            zeros_of(k, {10})};
  }
  torch::Tensor objective(const std::vector<torch::Tensor>& w, uint64_t key,
                          bool held_out) const override {
    torch::Tensor x = held_out ? split_.x_test : split_.x_train,
                  y = held_out ? split_.y_test : split_.y_train;
    if (!held_out) {
      const auto idx = batch_rows(key, batch_, train_);
      x = gather_rows(x, idx);
      y = gather_rows(y, idx);
    }
    auto h = at::relu(conv3x3(x.unsqueeze(-1), w[0], w[1], 1));  // (K, B, 8, 8, C1)
    h = at::relu(conv3x3(h, w[2], w[3], 2));                     // (K, B, 4, 4, C2)
    const auto pooled = h.mean({2, 3});                          // (K, B, C2)
    return cross_entropy(affine(pooled, w[4], w[5]), y);
  }

 private:
  int64_t train_ = 0, c1_ = 0, c2_ = 0, batch_ = 0;
  ImageSplit split_;
};

class ImageMLPBatch : public BatchedTask {
 public:
  ImageMLPBatch(uint64_t shape_seed, std::vector<uint64_t> seeds, bool rescale)
      : BatchedTask(BatchedFamily::kImageMLP, shape_seed, std::move(seeds), rescale) {
    auto gen = generator_of(shape_seed, kShape);
    train_ = int64_t{256} << uniform_int(gen, 0, 2);   // 256 .. 1024 images
    hidden_ = int64_t{128} << uniform_int(gen, 0, 3);  // 128 .. 1024: width lowers the tuned rate
    batch_ = int64_t{16} << uniform_int(gen, 0, 2);
    add_parameter({64, hidden_});
    add_parameter({hidden_});
    add_parameter({hidden_, 10});
    add_parameter({10});
    split_ = flattened(draw_images(this->seeds(), train_, 512));
  }

 protected:
  std::string describe() const override {
    return "image_mlp(64-" + std::to_string(hidden_) + "-10, " + std::to_string(train_) +
           " images, batch " + std::to_string(batch_) + ")";
  }
  std::vector<torch::Tensor> initial_weights() const override {
    auto gens = instance_generators(seeds(), kInit);
    const int64_t k = instances();
    return {fan_in_normal(gens, {64, hidden_}, 64, 2.0), zeros_of(k, {hidden_}),
            fan_in_normal(gens, {hidden_, 10}, hidden_), zeros_of(k, {10})};
  }
  torch::Tensor objective(const std::vector<torch::Tensor>& w, uint64_t key,
                          bool held_out) const override {
    torch::Tensor x = held_out ? split_.x_test : split_.x_train,  // (K, N, 64)
        y = held_out ? split_.y_test : split_.y_train;
    if (!held_out) {
      const auto idx = batch_rows(key, batch_, train_);
      x = gather_rows(x, idx);
      y = gather_rows(y, idx);
    }
    return cross_entropy(affine(at::relu(affine(x, w[0], w[1])), w[2], w[3]), y);
  }

 private:
  int64_t train_ = 0, hidden_ = 0, batch_ = 0;
  ImageSplit split_;
};

class AutoencoderBatch : public BatchedTask {
 public:
  AutoencoderBatch(uint64_t shape_seed, std::vector<uint64_t> seeds, bool rescale)
      : BatchedTask(BatchedFamily::kAutoencoder, shape_seed, std::move(seeds), rescale) {
    auto gen = generator_of(shape_seed, kShape);
    train_ = int64_t{256} << uniform_int(gen, 0, 2);
    code_ = int64_t{4} << uniform_int(gen, 0, 2);  // 4 .. 16
    batch_ = int64_t{16} << uniform_int(gen, 0, 2);
    add_parameter({64, code_});
    add_parameter({code_});
    add_parameter({code_, 64});
    add_parameter({64});
    split_ = flattened(draw_images(this->seeds(), train_, 512));
  }

 protected:
  std::string describe() const override {
    return "autoencoder(64-" + std::to_string(code_) + "-64, " + std::to_string(train_) +
           " images, batch " + std::to_string(batch_) + ")";
  }
  std::vector<torch::Tensor> initial_weights() const override {
    auto gens = instance_generators(seeds(), kInit);
    const int64_t k = instances();
    return {fan_in_normal(gens, {64, code_}, 64), zeros_of(k, {code_}),
            fan_in_normal(gens, {code_, 64}, code_), zeros_of(k, {64})};
  }
  torch::Tensor objective(const std::vector<torch::Tensor>& w, uint64_t key,
                          bool held_out) const override {
    auto x = held_out ? split_.x_test : split_.x_train;  // (K, N, 64)
    if (!held_out) x = gather_rows(x, batch_rows(key, batch_, train_));
    const auto code = at::tanh(affine(x, w[0], w[1]));
    return (affine(code, w[2], w[3]) - x).pow(2).mean({1, 2});
  }

 private:
  int64_t train_ = 0, code_ = 0, batch_ = 0;
  ImageSplit split_;
};

// ---- character GRU --------------------------------------------------------------------------

class CharGRUBatch : public BatchedTask {
 public:
  CharGRUBatch(uint64_t shape_seed, std::vector<uint64_t> seeds, bool rescale)
      : BatchedTask(BatchedFamily::kCharGRU, shape_seed, std::move(seeds), rescale) {
    auto gen = generator_of(shape_seed, kShape);
    hidden_ = int64_t{8} << uniform_int(gen, 0, 1);
    length_ = int64_t{8} << uniform_int(gen, 0, 1);
    batch_ = int64_t{4} << uniform_int(gen, 0, 1);
    const auto corpus = data::source_text();
    vocab_ = corpus.vocab;
    add_parameter({vocab_, 3 * hidden_});   // input projection of each character, with its bias
    add_parameter({hidden_, 3 * hidden_});  // recurrent weights (reset, update, new)
    add_parameter({3 * hidden_});
    add_parameter({hidden_, vocab_});
    add_parameter({vocab_});
    // Each instance: its own 16k-character window of the training text, scored on 32 sequences
    // of its own window of the held-out text.
    constexpr int64_t kWindow = 16384, kHeldOut = 32;
    std::vector<torch::Tensor> train, test;
    for (auto data_gen : instance_generators(this->seeds(), kData)) {
      const int64_t start =
          at::randint(corpus.train.size(0) - kWindow, {1}, data_gen).item<int64_t>();
      train.push_back(corpus.train.narrow(0, start, kWindow));
      const int64_t need = kHeldOut * (length_ + 1);
      const int64_t at = at::randint(corpus.test.size(0) - need, {1}, data_gen).item<int64_t>();
      test.push_back(corpus.test.narrow(0, at, need).view({kHeldOut, length_ + 1}));
    }
    train_ = at::stack(train);  // (K, window)
    test_ = at::stack(test);    // (K, 32, length + 1)
  }

 protected:
  std::string describe() const override {
    return "char_gru(hidden " + std::to_string(hidden_) + ", length " + std::to_string(length_) +
           ", batch " + std::to_string(batch_) + ")";
  }
  std::vector<torch::Tensor> initial_weights() const override {
    auto gens = instance_generators(seeds(), kInit);
    const int64_t k = instances();
    return {fan_in_normal(gens, {vocab_, 3 * hidden_}, 1),
            fan_in_normal(gens, {hidden_, 3 * hidden_}, hidden_), zeros_of(k, {3 * hidden_}),
            fan_in_normal(gens, {hidden_, vocab_}, hidden_), zeros_of(k, {vocab_})};
  }
  torch::Tensor objective(const std::vector<torch::Tensor>& w, uint64_t key,
                          bool held_out) const override {
    torch::Tensor seqs;  // (K, B, length + 1)
    if (held_out) {
      seqs = test_;
    } else {
      const auto starts = batch_rows(key, batch_, train_.size(1) - length_);  // (K, B)
      const auto offsets = at::arange(length_ + 1, starts.options());
      seqs = train_.gather(1, (starts.unsqueeze(-1) + offsets).flatten(1))
                 .view({instances(), batch_, length_ + 1});
    }
    const int64_t k = instances(), b = seqs.size(1), h3 = 3 * hidden_;
    // Input projections of every position at once: rows of each instance's table. (K, B, L, 3H)
    const auto inputs = gather_rows(w[0], seqs.narrow(2, 0, length_).reshape({k, b * length_}))
                            .view({k, b, length_, h3});
    auto h = at::zeros({k, b, hidden_}, w[1].options());
    std::vector<torch::Tensor> states;
    for (int64_t t = 0; t < length_; ++t) {
      const auto recurrent = affine(h, w[1], w[2]);  // (K, B, 3H)
      const auto x = inputs.select(2, t).chunk(3, -1), r = recurrent.chunk(3, -1);
      const auto reset = at::sigmoid(x[0] + r[0]), update = at::sigmoid(x[1] + r[1]);
      const auto candidate = at::tanh(x[2] + reset * r[2]);
      h = candidate + update * (h - candidate);
      states.push_back(h);
    }
    const auto all = at::stack(states, 2).view({k, b * length_, hidden_});
    const auto logits = affine(all, w[3], w[4]);  // (K, B L, V)
    const auto targets = seqs.narrow(2, 1, length_).reshape({k, b * length_});
    return cross_entropy(logits, targets);
  }

 private:
  int64_t hidden_ = 0, length_ = 0, batch_ = 0, vocab_ = 0;
  torch::Tensor train_, test_;
};

// ---- factorization --------------------------------------------------------------------------

class FactorizationBatch : public BatchedTask {
 public:
  FactorizationBatch(uint64_t shape_seed, std::vector<uint64_t> seeds, bool rescale)
      : BatchedTask(BatchedFamily::kFactorization, shape_seed, std::move(seeds), rescale) {
    auto gen = generator_of(shape_seed, kShape);
    rows_ = int64_t{64} << uniform_int(gen, 0, 2);  // 64 .. 256
    cols_ = int64_t{64} << uniform_int(gen, 0, 2);
    rank_ = int64_t{4} << uniform_int(gen, 0, 2);  // 4 .. 16
    // Users start factors near the target's scale or well below it.
    init_gain_ = log_uniform(gen, 0.1, 1.0);
    // As users' matrix completion: 256 .. 1024 cells a step, the observed ones scored.
    batch_ = int64_t{256} << uniform_int(gen, 0, 2);
    add_parameter({rows_, rank_});
    add_parameter({cols_, rank_});
    std::vector<torch::Tensor> targets, observed;
    for (auto data_gen : instance_generators(this->seeds(), kData)) {
      const int64_t true_rank = uniform_int(data_gen, 1, rank_);
      const auto m = at::matmul(at::randn({rows_, true_rank}, data_gen),
                                at::randn({true_rank, cols_}, data_gen)) /
                     std::sqrt(static_cast<double>(true_rank));
      const double noise = 0.3 * uniform(data_gen), fraction = 0.2 + 0.6 * uniform(data_gen);
      targets.push_back(m + noise * at::randn({rows_, cols_}, data_gen));
      observed.push_back((at::rand({rows_, cols_}, data_gen) < fraction).to(at::kFloat));
    }
    target_ = at::stack(targets);
    train_mask_ = at::stack(observed);
    test_mask_ = 1.0 - train_mask_;
  }

 protected:
  std::string describe() const override {
    return "factorization(" + std::to_string(rows_) + "x" + std::to_string(cols_) + ", rank " +
           std::to_string(rank_) + ", batch " + std::to_string(batch_) + ")";
  }
  std::vector<torch::Tensor> initial_weights() const override {
    auto gens = instance_generators(seeds(), kInit);
    return {fan_in_normal(gens, {rows_, rank_}, rank_, init_gain_),
            fan_in_normal(gens, {cols_, rank_}, rank_, init_gain_)};
  }
  torch::Tensor objective(const std::vector<torch::Tensor>& w, uint64_t key,
                          bool held_out) const override {
    const int64_t k = instances(), cells = rows_ * cols_;
    if (held_out)
      return ((at::bmm(w[0], w[1].transpose(1, 2)) - target_).pow(2) * test_mask_).sum({1, 2}) /
             test_mask_.sum({1, 2}).clamp_min(1.0);
    const auto idx = batch_rows(key, batch_, cells);                    // (K, B) cells, row-major
    const auto rows = gather_rows(w[0], at::div(idx, cols_, "floor"));  // (K, B, rank)
    const auto cols = gather_rows(w[1], at::remainder(idx, cols_));
    const auto target = gather_rows(target_.view({k, cells}), idx);  // (K, B)
    const auto mask = gather_rows(train_mask_.view({k, cells}), idx);
    const auto error = ((rows * cols).sum(-1) - target).pow(2) * mask;
    return error.sum(1) / mask.sum(1).clamp_min(1.0);
  }

 private:
  int64_t rows_ = 0, cols_ = 0, rank_ = 0, batch_ = 0;
  double init_gain_ = 0.1;
  torch::Tensor target_, train_mask_, test_mask_;
};

}  // namespace

// ---- the engine ---------------------------------------------------------------------------------

std::string batched_family_name(BatchedFamily family) {
  switch (family) {
    case BatchedFamily::kTabular: return "tabular";
    case BatchedFamily::kImageConv: return "image_conv";
    case BatchedFamily::kImageMLP: return "image_mlp";
    case BatchedFamily::kAutoencoder: return "autoencoder";
    case BatchedFamily::kCharGRU: return "char_gru";
    case BatchedFamily::kFactorization: return "factorization";
  }
  TORCH_CHECK(false, "batched_family_name: unknown family ", static_cast<int>(family));
}

std::vector<BatchedFamily> all_batched_families() {
  return {BatchedFamily::kTabular,     BatchedFamily::kImageConv, BatchedFamily::kImageMLP,
          BatchedFamily::kAutoencoder, BatchedFamily::kCharGRU,   BatchedFamily::kFactorization};
}

BatchedFamily batched_family_from_name(const std::string& name) {
  std::string known;
  for (auto family : all_batched_families()) {
    if (batched_family_name(family) == name) return family;
    known += (known.empty() ? "" : ", ") + batched_family_name(family);
  }
  TORCH_CHECK(false, "unknown batched task family \"", name, "\" (known: ", known, ")");
}

BatchedTask::BatchedTask(BatchedFamily family, uint64_t shape_seed, std::vector<uint64_t> seeds,
                         bool rescale)
    : family_(family), shape_seed_(shape_seed), seeds_(std::move(seeds)), rescale_(rescale) {
  TORCH_CHECK(!seeds_.empty(), "BatchedTask: at least one instance seed is needed");
}

std::string BatchedTask::name() const {
  return describe() + " x " + std::to_string(instances());
}

int64_t BatchedTask::add_parameter(std::vector<int64_t> shape) {
  shapes_.push_back(std::move(shape));
  return static_cast<int64_t>(shapes_.size()) - 1;
}

int64_t BatchedTask::instance_dim() const {
  int64_t total = 0;
  for (const auto& shape : shapes_) {
    int64_t n = 1;
    for (auto s : shape) n *= s;
    total += n;
  }
  return total;
}

torch::Tensor BatchedTask::batch_rows(uint64_t key, int64_t batch, int64_t rows) const {
  TORCH_CHECK(batch > 0 && rows > 0, "BatchedTask::batch_rows: batch (", batch, ") and rows (",
              rows, ") must be positive");
  auto out = torch::empty({instances(), batch}, torch::kInt64);
  auto* idx = out.data_ptr<int64_t>();
  for (int64_t k = 0; k < instances(); ++k) {
    const uint64_t stream = mix(seeds_[static_cast<size_t>(k)] ^ mix(key));
    for (int64_t j = 0; j < batch; ++j)
      idx[k * batch + j] =
          static_cast<int64_t>(unit(stream + static_cast<uint64_t>(j)) * static_cast<double>(rows));
  }
  return out;
}

std::vector<torch::Tensor> BatchedTask::weights_of(const std::vector<torch::Tensor>& params) const {
  TORCH_CHECK(params.size() == shapes_.size(), "BatchedTask ", name(), ": expected ",
              shapes_.size(), " parameter tensors, got ", params.size());
  if (scales_.empty()) {
    for (size_t i = 0; i < shapes_.size(); ++i) {
      auto scale = torch::ones({instances()}, torch::kFloat);
      if (rescale_)
        for (int64_t k = 0; k < instances(); ++k)
          scale.data_ptr<float>()[k] = static_cast<float>(
              std::pow(10.0, 6.0 * unit(mix(seeds_[static_cast<size_t>(k)]) + i) - 3.0));
      scales_.push_back(scale);
    }
  }
  std::vector<torch::Tensor> weights;
  for (size_t i = 0; i < params.size(); ++i) {
    auto expected = shapes_[i];
    expected.insert(expected.begin(), instances());
    TORCH_CHECK(params[i].sizes() == at::IntArrayRef(expected), "BatchedTask ", name(),
                ": parameter ", i, " must be ", at::IntArrayRef(expected), ", got ",
                params[i].sizes());
    if (!rescale_) {
      weights.push_back(params[i]);
      continue;
    }
    std::vector<int64_t> view(expected.size(), 1);
    view[0] = instances();
    weights.push_back(params[i] / scales_[i].view(view));
  }
  return weights;
}

std::vector<torch::Tensor> BatchedTask::initial() const {
  auto weights = initial_weights();
  std::vector<torch::Tensor> params;
  const auto unit_weights = weights_of(weights);  // checks shapes, makes the scales
  for (size_t i = 0; i < weights.size(); ++i) {
    if (!rescale_) {
      params.push_back(weights[i].contiguous());
      continue;
    }
    std::vector<int64_t> view(weights[i].dim(), 1);
    view[0] = instances();
    params.push_back((weights[i] * scales_[i].view(view)).contiguous());
  }
  (void)unit_weights;
  return params;
}

torch::Tensor BatchedTask::loss(const std::vector<torch::Tensor>& params, uint64_t key) const {
  return objective(weights_of(params), key, /*held_out=*/false);
}

torch::Tensor BatchedTask::validation_loss(const std::vector<torch::Tensor>& params) const {
  return objective(weights_of(params), 0, /*held_out=*/true);
}

std::unique_ptr<BatchedTask> BatchedTask::instance(int64_t k) const {
  TORCH_CHECK(k >= 0 && k < instances(), "BatchedTask::instance: k must be in [0, ", instances(),
              "), got ", k);
  return make_batched_task(family_, shape_seed_, {seeds_[static_cast<size_t>(k)]}, rescale_);
}

std::unique_ptr<BatchedTask> make_batched_task(BatchedFamily family, uint64_t shape_seed,
                                               std::vector<uint64_t> seeds, bool rescale) {
  switch (family) {
    case BatchedFamily::kTabular:
      return std::make_unique<TabularBatch>(shape_seed, std::move(seeds), rescale);
    case BatchedFamily::kImageConv:
      return std::make_unique<ImageConvBatch>(shape_seed, std::move(seeds), rescale);
    case BatchedFamily::kImageMLP:
      return std::make_unique<ImageMLPBatch>(shape_seed, std::move(seeds), rescale);
    case BatchedFamily::kAutoencoder:
      return std::make_unique<AutoencoderBatch>(shape_seed, std::move(seeds), rescale);
    case BatchedFamily::kCharGRU:
      return std::make_unique<CharGRUBatch>(shape_seed, std::move(seeds), rescale);
    case BatchedFamily::kFactorization:
      return std::make_unique<FactorizationBatch>(shape_seed, std::move(seeds), rescale);
  }
  TORCH_CHECK(false, "make_batched_task: unknown family ", static_cast<int>(family));
}

}  // namespace flt::metatrain
