#include "flt/metatrain/tasks.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <sstream>

#include "flt/attention/softmax.h"
#include "flt/metatrain/datasets.h"
#include "flt/metatrain/landscapes.h"
#include "tabular_name.h"

namespace flt::metatrain {

namespace {

int64_t uniform_int(at::Generator& gen, int64_t lo, int64_t hi) {
  return lo + at::randint(hi - lo + 1, {1}, gen).item<int64_t>();
}

/// Child generator for data drawn once at task creation (keeps `gen`'s stream for the caller).
at::Generator child(at::Generator& gen) {
  return at::make_generator<at::CPUGeneratorImpl>(
      static_cast<uint64_t>(at::randint(1LL << 62, {1}, gen).item<int64_t>()));
}

// ---- landscapes ------------------------------------------------------------------------------

/// The Rastrigin family's instances (landscapes.h's sampler): shift U(-1, 1)^n, always rotated,
/// scale log-uniform in [0.3, 3]. The family's own noise (TaskSampling::noise) replaces the
/// sampler's, which is off.
RastriginFamily mnemosyne_rastrigin_family() {
  RastriginFamily family;
  family.max_shift = 1.0;
  family.rotate_probability = 1.0;
  family.min_scale = 0.3;
  family.max_scale = 3.0;
  family.noise_probability = 0.0;
  family.two_funnel_probability = 0.0;
  return family;
}

class LandscapeTask : public Task {
 public:
  LandscapeTask(TaskFamily family, Landscape landscape, int64_t dims, at::Generator gen,
                double noise)
      : family_(family), landscape_(landscape), dims_(dims) {
    const auto info = landscape_info(landscape, dims);
    const bool rastrigin = family == TaskFamily::kRastrigin;
    const bool ackley = family == TaskFamily::kAckley;
    if (rastrigin) {
      // Shifted and rotated coordinates. The drawn scale multiplies the value here, not the
      // coordinates as in the swarm's tasks: the learned rule meets losses of many sizes.
      const auto task = sample_rastrigin_task(mnemosyne_rastrigin_family(), dims, gen);
      shift_ = task.shift.to(at::kFloat);
      rotation_ = task.rotation.to(at::kFloat);
      scale_ = task.scale;
    } else {
      shift_ = ackley ? at::rand({dims}, gen) * 2.0 - 1.0 : at::zeros({dims});
      rotation_ = at::eye(dims);
    }
    box_ = ackley                              ? 5.0
           : rastrigin                         ? info.upper
           : family == TaskFamily::kRosenbrock ? 2.0
                                               : info.upper;
    noise_ = noise * scale_ * (rastrigin ? 10.0 : 1.0);
  }
  std::string name() const override {
    std::ostringstream out;
    out << task_family_name(family_) << "(" << dims_ << ")";
    return out.str();
  }
  TaskFamily family() const override { return family_; }
  int64_t dim() const override { return dims_; }
  torch::Tensor initial(at::Generator gen) const override {
    const auto u = (at::rand({dims_}, gen) * 2.0 - 1.0) * box_;
    return shift_ + at::matmul(rotation_.t(), u);
  }
  torch::Tensor loss(const torch::Tensor& params, at::Generator gen) const override {
    const auto y = at::matmul(rotation_, params - shift_);
    if (noise_ <= 0.0) return scale_ * evaluate_landscape(landscape_, y);
    return scale_ * evaluate_noisy_landscape(landscape_, y, noise_ / scale_, gen);
  }
  torch::Tensor eval_loss(const torch::Tensor& params) const override {
    return scale_ * evaluate_landscape(landscape_, at::matmul(rotation_, params - shift_));
  }

 private:
  TaskFamily family_;
  Landscape landscape_;
  int64_t dims_;
  torch::Tensor shift_, rotation_;
  double scale_ = 1.0, box_ = 1.0, noise_ = 0.0;
};

class NoisyQuadraticTask : public Task {
 public:
  NoisyQuadraticTask(int64_t dims, at::Generator gen, double noise) : dims_(dims), noise_(noise) {
    curvature_ = at::exp(at::rand({dims}, gen) * std::log(1e4) - std::log(1e2));  // 1e-2 .. 1e2
    center_ = at::randn({dims}, gen);
  }
  std::string name() const override { return "noisy_quadratic(" + std::to_string(dims_) + ")"; }
  TaskFamily family() const override { return TaskFamily::kNoisyQuadratic; }
  int64_t dim() const override { return dims_; }
  torch::Tensor initial(at::Generator gen) const override {
    return center_ + at::randn({dims_}, gen) * 2.0;
  }
  torch::Tensor loss(const torch::Tensor& params, at::Generator gen) const override {
    const auto e = at::randn({dims_}, gen).to(params.scalar_type());
    return eval_loss(params) + noise_ * (e * params).sum();
  }
  torch::Tensor eval_loss(const torch::Tensor& params) const override {
    return 0.5 * (curvature_ * (params - center_).pow(2)).sum();
  }

 private:
  int64_t dims_;
  double noise_;
  torch::Tensor curvature_, center_;
};

// ---- small networks on synthetic data ----------------------------------------------------------

/// Slices a flat parameter vector into named shapes.
class FlatLayout {
 public:
  int64_t add(std::vector<int64_t> shape) {
    int64_t n = 1;
    for (auto s : shape) n *= s;
    shapes_.push_back(std::move(shape));
    sizes_.push_back(n);
    offsets_.push_back(total_);
    total_ += n;
    return static_cast<int64_t>(shapes_.size()) - 1;
  }
  torch::Tensor view(const torch::Tensor& flat, int64_t index) const {
    return flat.narrow(0, offsets_[index], sizes_[index]).view(shapes_[index]);
  }
  /// Default initial point: every matrix ~ N(0, 1/fan_in), vectors 0.
  torch::Tensor init(at::Generator& gen) const {
    std::vector<torch::Tensor> parts;
    for (const auto& shape : shapes_) {
      if (shape.size() == 1) {
        parts.push_back(at::zeros(shape));
      } else {
        parts.push_back(at::randn(shape, gen).flatten() / std::sqrt(static_cast<double>(shape[0])));
      }
    }
    return at::cat(parts);
  }
  int64_t total() const { return total_; }
  /// Number of entries of each tensor, in order (Task::segments).
  const std::vector<int64_t>& sizes() const { return sizes_; }

 private:
  std::vector<std::vector<int64_t>> shapes_;
  std::vector<int64_t> sizes_, offsets_;
  int64_t total_ = 0;
};

/// A network task: its parameters are one flat vector that `layout_` slices into tensors, which
/// also gives the task's size, its segments and its default initial point.
class LayoutTask : public Task {
 public:
  int64_t dim() const override { return layout_.total(); }
  std::vector<int64_t> segments() const override { return layout_.sizes(); }
  torch::Tensor initial(at::Generator gen) const override { return layout_.init(gen); }

 protected:
  FlatLayout layout_;
};

/// Cross-entropy of logits `out` (N, C) against class labels, or the mean squared error of a
/// one-output `out` (N, 1) against targets (N).
torch::Tensor supervised_loss(const torch::Tensor& out, const torch::Tensor& y,
                              bool classification) {
  if (classification) return at::cross_entropy_loss(out, y);
  return (out.squeeze(1) - y).pow(2).mean();
}

class MLPTask : public LayoutTask {
 public:
  MLPTask(bool classification, at::Generator gen, const TaskSampling& s)
      : classification_(classification), batch_(s.batch) {
    inputs_dim_ = uniform_int(gen, 4, 8);
    outputs_ = classification ? uniform_int(gen, 2, 4) : 1;
    const int64_t hidden = s.hidden;
    w1_ = layout_.add({inputs_dim_, hidden});
    b1_ = layout_.add({hidden});
    w2_ = layout_.add({hidden, outputs_});
    b2_ = layout_.add({outputs_});
    // Data: 256 points labelled by a random teacher network of the same shape.
    auto data_gen = child(gen);
    x_ = at::randn({256, inputs_dim_}, data_gen);
    const auto teacher = layout_.init(data_gen) * 2.0;
    const auto out = forward(teacher, x_);
    y_ = classification ? out.argmax(1) : out.squeeze(1) + 0.1 * at::randn({256}, data_gen);
  }
  std::string name() const override {
    return std::string(classification_ ? "mlp_classification" : "mlp_regression") + "(" +
           std::to_string(layout_.total()) + ")";
  }
  TaskFamily family() const override {
    return classification_ ? TaskFamily::kMLPClassification : TaskFamily::kMLPRegression;
  }
  torch::Tensor loss(const torch::Tensor& params, at::Generator gen) const override {
    const auto idx = at::randint(x_.size(0), {batch_}, gen);
    return objective(params, x_.index_select(0, idx), y_.index_select(0, idx));
  }
  torch::Tensor eval_loss(const torch::Tensor& params) const override {
    return objective(params, x_, y_);
  }

 private:
  torch::Tensor forward(const torch::Tensor& p, const torch::Tensor& x) const {
    const auto h = at::tanh(at::matmul(x, layout_.view(p, w1_)) + layout_.view(p, b1_));
    return at::matmul(h, layout_.view(p, w2_)) + layout_.view(p, b2_);
  }
  torch::Tensor objective(const torch::Tensor& p, const torch::Tensor& x,
                          const torch::Tensor& y) const {
    return supervised_loss(forward(p, x), y, classification_);
  }
  bool classification_;
  int64_t batch_, inputs_dim_ = 0, outputs_ = 0;
  int64_t w1_, b1_, w2_, b2_;
  torch::Tensor x_, y_;
};

/// A synthetic tabular problem shaped like a user's small run: rows 64-2048 and features 2-64
/// (log-uniform), 80% of the rows to train on and 20% held out; classification (2-6 classes,
/// optionally imbalanced) by a random teacher whose logit scale sets the separability (0.3-10,
/// log-uniform), with 0-20% of the labels flipped, or regression with noise; every feature on its
/// own scale (10^U(-1.5, 1.5): raw, unnormalised columns); a linear or logistic model or an MLP of
/// width 8-64; full batch or mini-batches of 16-128.
class TabularTask : public LayoutTask {
 public:
  TabularTask(at::Generator gen) {
    const auto log_uniform = [&](double lo, double hi) {
      return std::exp(std::log(lo) + (std::log(hi) - std::log(lo)) *
                                         at::rand({1}, gen, at::kDouble).item<double>());
    };
    const int64_t rows = static_cast<int64_t>(std::round(log_uniform(64, 2048)));
    features_ = static_cast<int64_t>(std::round(log_uniform(2, 64)));
    classification_ = at::rand({1}, gen).item<double>() < 0.7;
    classes_ = classification_
                   ? (at::rand({1}, gen).item<double>() < 0.5 ? 2 : uniform_int(gen, 3, 6))
                   : 1;
    hidden_ = at::rand({1}, gen).item<double>() < 0.5 ? 0 : int64_t{8} << uniform_int(gen, 0, 3);
    const int64_t batch = int64_t{16} << uniform_int(gen, 0, 3);
    const int64_t train_rows = rows - rows / 5;
    batch_ = at::rand({1}, gen).item<double>() < 0.5 ? train_rows : std::min(batch, train_rows);
    separability_ = log_uniform(0.3, 10.0);
    const double flip = classification_ ? 0.2 * at::rand({1}, gen).item<double>() : 0.0;
    const double imbalance = classification_ && at::rand({1}, gen).item<double>() < 0.5
                                 ? 3.0 * at::rand({1}, gen).item<double>()
                                 : 0.0;
    if (hidden_ > 0) {
      w1_ = layout_.add({features_, hidden_});
      b1_ = layout_.add({hidden_});
    }
    w2_ = layout_.add({hidden_ > 0 ? hidden_ : features_, classes_});
    b2_ = layout_.add({classes_});
    // The data: standard normal rows labelled by a teacher of the student's shape on them, then
    // each column put on its own scale (the student sees the raw columns).
    auto data_gen = child(gen);
    const auto z = at::randn({rows, features_}, data_gen);
    auto teacher = layout_.init(data_gen);
    auto out = forward(teacher, z);
    out = out / out.std().clamp_min(1e-12) * separability_;
    torch::Tensor y;
    if (classification_) {
      out.select(1, 0).add_(imbalance);  // class 0 more frequent
      y = out.argmax(1);
      const auto flipped = at::rand({rows}, data_gen) < flip;
      y = at::where(flipped, at::randint(classes_, {rows}, data_gen), y);
    } else {
      y = out.squeeze(1) / separability_ + 0.3 / separability_ * at::randn({rows}, data_gen);
    }
    const auto scales = at::pow(10.0, at::rand({features_}, data_gen) * 3.0 - 1.5);
    const auto x = z * scales;
    x_train_ = x.narrow(0, 0, train_rows), y_train_ = y.narrow(0, 0, train_rows);
    x_test_ = x.narrow(0, train_rows, rows - train_rows);
    y_test_ = y.narrow(0, train_rows, rows - train_rows);
  }
  std::string name() const override {
    return detail::tabular_name(x_train_.size(0), features_, classification_ ? classes_ : 0,
                                hidden_, batch_);
  }
  TaskFamily family() const override { return TaskFamily::kTabular; }
  torch::Tensor loss(const torch::Tensor& params, at::Generator gen) const override {
    if (batch_ >= x_train_.size(0)) return objective(params, x_train_, y_train_);
    const auto idx = at::randint(x_train_.size(0), {batch_}, gen);
    return objective(params, x_train_.index_select(0, idx), y_train_.index_select(0, idx));
  }
  torch::Tensor eval_loss(const torch::Tensor& params) const override {
    return objective(params, x_train_, y_train_);
  }
  bool has_validation() const override { return true; }
  /// The whole held-out split (at most 410 rows: no mini-batch needed).
  torch::Tensor validation_loss(const torch::Tensor& params, at::Generator) const override {
    return objective(params, x_test_, y_test_);
  }

 private:
  torch::Tensor forward(const torch::Tensor& p, const torch::Tensor& x) const {
    auto h = x;
    if (hidden_ > 0) h = at::relu(at::matmul(x, layout_.view(p, w1_)) + layout_.view(p, b1_));
    return at::matmul(h, layout_.view(p, w2_)) + layout_.view(p, b2_);
  }
  torch::Tensor objective(const torch::Tensor& p, const torch::Tensor& x,
                          const torch::Tensor& y) const {
    return supervised_loss(forward(p, x), y, classification_);
  }
  bool classification_ = true;
  int64_t features_ = 0, classes_ = 1, hidden_ = 0, batch_ = 0;
  double separability_ = 1.0;
  int64_t w1_ = -1, b1_ = -1, w2_ = -1, b2_ = -1;
  torch::Tensor x_train_, y_train_, x_test_, y_test_;
};

/// Next-token prediction on sequences x_{t+1} = (x_t + step) mod V with occasional random tokens,
/// by one causal softmax-attention layer with tied embeddings (uses flt::attention).
class TransformerLMTask : public LayoutTask {
 public:
  TransformerLMTask(at::Generator gen, const TaskSampling& s) : batch_(s.batch / 4 + 1) {
    vocab_ = uniform_int(gen, 5, 8);
    width_ = 8;
    embed_ = layout_.add({vocab_, width_});
    position_ = layout_.add({kLength, width_});
    wq_ = layout_.add({width_, width_});
    wk_ = layout_.add({width_, width_});
    wv_ = layout_.add({width_, width_});
    wo_ = layout_.add({width_, width_});
    auto data_gen = child(gen);
    const int64_t step = uniform_int(data_gen, 1, vocab_ - 1);
    auto seqs = at::zeros({64, kLength + 1}, at::kLong);
    seqs.select(1, 0).copy_(at::randint(vocab_, {64}, data_gen));
    for (int64_t t = 1; t <= kLength; ++t) {
      const auto next = (seqs.select(1, t - 1) + step) % vocab_;
      const auto random = at::randint(vocab_, {64}, data_gen);
      const auto flip = at::rand({64}, data_gen) < 0.1;
      seqs.select(1, t).copy_(at::where(flip, random, next));
    }
    data_ = seqs;
  }
  std::string name() const override {
    return "transformer_lm(" + std::to_string(layout_.total()) + ")";
  }
  TaskFamily family() const override { return TaskFamily::kTransformerLM; }
  torch::Tensor loss(const torch::Tensor& params, at::Generator gen) const override {
    return objective(params, data_.index_select(0, at::randint(data_.size(0), {batch_}, gen)));
  }
  torch::Tensor eval_loss(const torch::Tensor& params) const override {
    return objective(params, data_);
  }

 private:
  static constexpr int64_t kLength = 8;
  torch::Tensor objective(const torch::Tensor& p, const torch::Tensor& seqs) const {
    const auto inputs = seqs.narrow(1, 0, kLength), targets = seqs.narrow(1, 1, kLength);
    const auto emb = layout_.view(p, embed_);
    const auto x = emb.index_select(0, inputs.reshape(-1)).view({-1, kLength, width_}) +
                   layout_.view(p, position_);
    const auto head = [&](int64_t w) { return at::matmul(x, layout_.view(p, w)).unsqueeze(1); };
    const auto attended =
        attention::softmax_attention(head(wq_), head(wk_), head(wv_), /*causal=*/true);
    const auto h = x + at::matmul(attended.squeeze(1), layout_.view(p, wo_));
    const auto logits = at::matmul(h, emb.t());  // (B, L, V)
    return at::cross_entropy_loss(logits.reshape({-1, vocab_}), targets.reshape(-1));
  }
  int64_t batch_, vocab_ = 0, width_ = 0;
  int64_t embed_, position_, wq_, wk_, wv_, wo_;
  torch::Tensor data_;
};

// ---- real data ---------------------------------------------------------------------------------

/// Classifiers on Fashion-MNIST: a ReLU MLP of random width (or none: logistic regression) trained
/// on a random subset of the training images with random batch size; held-out loss on test images.
class FashionTask : public LayoutTask {
 public:
  FashionTask(bool hidden_layer, at::Generator gen, const TaskSampling& s)
      : hidden_layer_(hidden_layer) {
    const auto data = data::fashion_mnist();
    auto data_gen = child(gen);
    // 256 to 8192 training images (log-uniform) and 2048 held-out ones per instance: different
    // instances see different data, and the small ones overfit within a horizon (up to 1000
    // epochs), which the held-out score punishes: a rule must learn to settle, not to memorise.
    train_count_ = int64_t{1} << uniform_int(gen, 8, 13);
    const auto train_idx = at::randperm(data.train_x.size(0), data_gen).narrow(0, 0, train_count_);
    const auto test_idx = at::randperm(data.test_x.size(0), data_gen).narrow(0, 0, 2048);
    train_x_ = data.train_x.index_select(0, train_idx).reshape({-1, 784});
    train_y_ = data.train_y.index_select(0, train_idx);
    test_x_ = data.test_x.index_select(0, test_idx).reshape({-1, 784});
    test_y_ = data.test_y.index_select(0, test_idx);
    batch_ = int64_t{1} << uniform_int(gen, 4, 7);  // 16 .. 128
    (void)s;
    if (hidden_layer_) {
      width_ = int64_t{1} << uniform_int(gen, 4, 6);  // 16 .. 64
      w1_ = layout_.add({784, width_});
      b1_ = layout_.add({width_});
      w2_ = layout_.add({width_, 10});
    } else {
      w2_ = layout_.add({784, 10});
    }
    b2_ = layout_.add({10});
  }
  std::string name() const override {
    return (hidden_layer_ ? "fashion_mlp(" + std::to_string(width_) + ", batch "
                          : "fashion_logistic(batch ") +
           std::to_string(batch_) + ", " + std::to_string(train_count_) + " images)";
  }
  TaskFamily family() const override {
    return hidden_layer_ ? TaskFamily::kFashionMLP : TaskFamily::kFashionLogistic;
  }
  torch::Tensor loss(const torch::Tensor& params, at::Generator gen) const override {
    const auto idx = at::randint(train_x_.size(0), {batch_}, gen);
    return objective(params, train_x_.index_select(0, idx), train_y_.index_select(0, idx));
  }
  bool has_validation() const override { return true; }
  torch::Tensor validation_loss(const torch::Tensor& params, at::Generator gen) const override {
    const auto idx = at::randint(test_x_.size(0), {128}, gen);
    return objective(params, test_x_.index_select(0, idx), test_y_.index_select(0, idx));
  }
  /// The held-out loss on all 2048 held-out images.
  torch::Tensor eval_loss(const torch::Tensor& params) const override {
    return objective(params, test_x_, test_y_);
  }

 private:
  torch::Tensor objective(const torch::Tensor& p, const torch::Tensor& x,
                          const torch::Tensor& y) const {
    auto h = x;
    if (hidden_layer_) h = at::relu(at::matmul(h, layout_.view(p, w1_)) + layout_.view(p, b1_));
    return at::cross_entropy_loss(at::matmul(h, layout_.view(p, w2_)) + layout_.view(p, b2_), y);
  }
  bool hidden_layer_;
  int64_t batch_ = 32, width_ = 0, train_count_ = 0;
  int64_t w1_ = 0, b1_ = 0, w2_ = 0, b2_ = 0;
  torch::Tensor train_x_, train_y_, test_x_, test_y_;
};

/// A character-level GRU language model on English text: embedding, one GRU layer (gates r, z, n
/// as in torch::nn::GRU), a linear read-out; windows of 24 characters from the training stream,
/// held-out windows from the held-out stream.
class TextGRUTask : public LayoutTask {
 public:
  TextGRUTask(at::Generator gen, const TaskSampling& s) {
    const auto text = data::licence_text();
    train_ = text.train;
    test_ = text.test;
    vocab_ = text.vocab;
    hidden_ = int64_t{1} << uniform_int(gen, 5, 6);  // 32 or 64
    batch_ = std::max<int64_t>(8, s.batch / 2);
    embed_ = layout_.add({vocab_, kEmbedding});
    w_ih_ = layout_.add({kEmbedding, 3 * hidden_});
    w_hh_ = layout_.add({hidden_, 3 * hidden_});
    b_ih_ = layout_.add({3 * hidden_});
    w_out_ = layout_.add({hidden_, vocab_});
    b_out_ = layout_.add({vocab_});
    auto data_gen = child(gen);
    eval_starts_ = at::randint(test_.size(0) - kLength - 1, {64}, data_gen);
  }
  std::string name() const override { return "text_gru(" + std::to_string(hidden_) + ")"; }
  TaskFamily family() const override { return TaskFamily::kTextGRU; }
  torch::Tensor loss(const torch::Tensor& params, at::Generator gen) const override {
    return objective(params,
                     windows(train_, at::randint(train_.size(0) - kLength - 1, {batch_}, gen)));
  }
  bool has_validation() const override { return true; }
  torch::Tensor validation_loss(const torch::Tensor& params, at::Generator gen) const override {
    return objective(params, windows(test_, at::randint(test_.size(0) - kLength - 1, {16}, gen)));
  }
  torch::Tensor eval_loss(const torch::Tensor& params) const override {
    return objective(params, windows(test_, eval_starts_));
  }

 private:
  static constexpr int64_t kLength = 24, kEmbedding = 16;
  static torch::Tensor windows(const torch::Tensor& stream, const torch::Tensor& starts) {
    return stream.index_select(0, (starts.unsqueeze(1) + at::arange(kLength + 1)).reshape(-1))
        .view({starts.size(0), kLength + 1});
  }
  torch::Tensor objective(const torch::Tensor& p, const torch::Tensor& seqs) const {
    const int64_t b = seqs.size(0), hd = hidden_;
    const auto x = layout_.view(p, embed_).index_select(0, seqs.narrow(1, 0, kLength).reshape(-1));
    const auto gates_x =
        (at::matmul(x, layout_.view(p, w_ih_)) + layout_.view(p, b_ih_)).view({b, kLength, 3 * hd});
    const auto w_hh = layout_.view(p, w_hh_);
    auto h = at::zeros({b, hd}, p.options());
    std::vector<torch::Tensor> outputs;
    for (int64_t t = 0; t < kLength; ++t) {
      const auto gx = gates_x.select(1, t), gh = at::matmul(h, w_hh);
      const auto r = at::sigmoid(gx.narrow(1, 0, hd) + gh.narrow(1, 0, hd));
      const auto z = at::sigmoid(gx.narrow(1, hd, hd) + gh.narrow(1, hd, hd));
      const auto n = at::tanh(gx.narrow(1, 2 * hd, hd) + r * gh.narrow(1, 2 * hd, hd));
      h = (1 - z) * n + z * h;
      outputs.push_back(h);
    }
    const auto logits = at::matmul(at::stack(outputs, 1), layout_.view(p, w_out_)) +
                        layout_.view(p, b_out_);  // (B, L, V)
    return at::cross_entropy_loss(logits.reshape({-1, vocab_}),
                                  seqs.narrow(1, 1, kLength).reshape(-1));
  }
  torch::Tensor train_, test_, eval_starts_;
  int64_t vocab_ = 0, hidden_ = 32, batch_ = 16;
  int64_t embed_, w_ih_, w_hh_, b_ih_, w_out_, b_out_;
};

}  // namespace

std::string task_family_name(TaskFamily family) {
  switch (family) {
    case TaskFamily::kRastrigin: return "rastrigin";
    case TaskFamily::kAckley: return "ackley";
    case TaskFamily::kRosenbrock: return "rosenbrock";
    case TaskFamily::kNoisyQuadratic: return "noisy_quadratic";
    case TaskFamily::kMLPClassification: return "mlp_classification";
    case TaskFamily::kMLPRegression: return "mlp_regression";
    case TaskFamily::kTransformerLM: return "transformer_lm";
    case TaskFamily::kFashionMLP: return "fashion_mlp";
    case TaskFamily::kFashionLogistic: return "fashion_logistic";
    case TaskFamily::kTextGRU: return "text_gru";
    case TaskFamily::kTabular: return "tabular";
  }
  return "?";
}

std::vector<TaskFamily> shipped_recipe_families() {
  return {TaskFamily::kRastrigin,         TaskFamily::kAckley,
          TaskFamily::kRosenbrock,        TaskFamily::kNoisyQuadratic,
          TaskFamily::kMLPClassification, TaskFamily::kMLPRegression,
          TaskFamily::kTransformerLM,     TaskFamily::kFashionMLP,
          TaskFamily::kFashionLogistic,   TaskFamily::kTextGRU};
}

std::vector<TaskFamily> all_task_families() {
  auto families = shipped_recipe_families();
  families.push_back(TaskFamily::kTabular);
  return families;
}

std::vector<TaskFamily> real_task_families() {
  return {TaskFamily::kFashionMLP, TaskFamily::kFashionLogistic, TaskFamily::kTextGRU};
}

TaskFamily task_family_from_name(const std::string& name) {
  for (auto f : all_task_families()) {
    if (task_family_name(f) == name) return f;
  }
  TORCH_CHECK(
      false, "unknown task family \"", name,
      "\" (expected rastrigin, ackley, rosenbrock, noisy_quadratic, mlp_classification, "
      "mlp_regression, transformer_lm, fashion_mlp, fashion_logistic, text_gru or tabular)");
}

std::unique_ptr<Task> sample_task_with_dim(TaskFamily family, int64_t dims, at::Generator gen,
                                           const TaskSampling& s) {
  TORCH_CHECK(dims >= 2, "sample_task: landscape dimension must be >= 2, got ", dims);
  switch (family) {
    case TaskFamily::kRastrigin:
      return std::make_unique<LandscapeTask>(family, Landscape::kRastrigin, dims, gen, s.noise);
    case TaskFamily::kAckley:
      return std::make_unique<LandscapeTask>(family, Landscape::kAckley, dims, gen, s.noise);
    case TaskFamily::kRosenbrock:
      return std::make_unique<LandscapeTask>(family, Landscape::kRosenbrock, dims, gen, 0.0);
    case TaskFamily::kNoisyQuadratic:
      return std::make_unique<NoisyQuadraticTask>(dims, gen, s.noise);
    default: break;
  }
  TORCH_CHECK(false, "sample_task_with_dim: ", task_family_name(family),
              " is not a landscape family");
}

std::unique_ptr<Task> sample_task(TaskFamily family, at::Generator gen, const TaskSampling& s) {
  TORCH_CHECK(s.min_dim >= 2 && s.max_dim >= s.min_dim,
              "sample_task: need 2 <= min_dim <= max_dim, got ", s.min_dim, " and ", s.max_dim);
  TORCH_CHECK(s.batch > 0 && s.hidden > 0, "sample_task: batch and hidden must be positive, got ",
              s.batch, " and ", s.hidden);
  switch (family) {
    case TaskFamily::kMLPClassification: return std::make_unique<MLPTask>(true, gen, s);
    case TaskFamily::kMLPRegression: return std::make_unique<MLPTask>(false, gen, s);
    case TaskFamily::kTransformerLM: return std::make_unique<TransformerLMTask>(gen, s);
    case TaskFamily::kFashionMLP: return std::make_unique<FashionTask>(true, gen, s);
    case TaskFamily::kFashionLogistic: return std::make_unique<FashionTask>(false, gen, s);
    case TaskFamily::kTextGRU: return std::make_unique<TextGRUTask>(gen, s);
    case TaskFamily::kTabular: return std::make_unique<TabularTask>(gen);
    default: return sample_task_with_dim(family, uniform_int(gen, s.min_dim, s.max_dim), gen, s);
  }
}

}  // namespace flt::metatrain
