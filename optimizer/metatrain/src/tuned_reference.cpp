#include "flt/metatrain/tuned_reference.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/optim/adamw.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>

namespace flt::metatrain {

at::Generator run_stream(uint64_t seed, RunStream purpose) {
  return at::make_generator<at::CPUGeneratorImpl>(seed * 2 + static_cast<uint64_t>(purpose));
}

double held_out_loss(const Task& task, const torch::Tensor& params, at::Generator& gen) {
  torch::NoGradGuard no_grad;
  return (task.has_validation() ? task.validation_loss(params, gen) : task.eval_loss(params))
      .item<double>();
}

std::vector<double> default_reference_grid() {
  return {1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1};
}

double adamw_cosine_final_loss(const Task& task, int64_t steps, double lr, uint64_t seed) {
  TORCH_CHECK(steps > 0, "adamw_cosine_final_loss: steps must be positive, got ", steps);
  TORCH_CHECK(std::isfinite(lr) && lr > 0, "adamw_cosine_final_loss: lr must be positive, got ",
              lr);
  auto init = run_stream(seed, RunStream::kInitialPoint),
       batches = run_stream(seed, RunStream::kBatches);
  auto params = task.initial(init).to(at::kFloat).requires_grad_(true);
  torch::optim::AdamW adamw({params}, torch::optim::AdamWOptions(lr).weight_decay(1e-2));
  auto& group_options = static_cast<torch::optim::AdamWOptions&>(adamw.param_groups()[0].options());
  for (int64_t t = 0; t < steps; ++t) {
    group_options.lr(lr * 0.5 * (1.0 + std::cos(M_PI * static_cast<double>(t) / steps)));
    adamw.zero_grad();
    const auto loss = task.loss(params, batches);
    if (!std::isfinite(loss.item<double>())) return std::numeric_limits<double>::infinity();
    loss.backward();
    adamw.step();
  }
  const double final_loss = held_out_loss(task, params.detach(), batches);
  return std::isfinite(final_loss) ? final_loss : std::numeric_limits<double>::infinity();
}

TunedReference tune_adamw_cosine(const Task& task, int64_t steps, uint64_t seed,
                                 const std::vector<double>& grid) {
  TORCH_CHECK(!grid.empty(), "tune_adamw_cosine: the grid is empty");
  TunedReference best;
  best.final_loss = std::numeric_limits<double>::infinity();
  for (double lr : grid) {
    const double loss = adamw_cosine_final_loss(task, steps, lr, seed);
    best.by_lr.push_back(loss);
    if (loss < best.final_loss) best.final_loss = loss, best.lr = lr;
  }
  TORCH_CHECK(std::isfinite(best.final_loss),
              "tune_adamw_cosine: every learning rate of the grid "
              "diverged on ",
              task.name());
  return best;
}

double reference_score(double candidate_loss, double reference_loss) {
  TORCH_CHECK(std::isfinite(reference_loss) && reference_loss >= 0,
              "reference_score: the reference loss must be finite and >= 0, got ", reference_loss);
  if (!(candidate_loss <= std::numeric_limits<double>::max()))
    return kReferenceScoreClip;  // NaN, inf
  // Losses are float32: below its smallest normal number a loss is 0 (a run that fits exactly,
  // which a tuned reference can), and two such losses are level.
  const double floor = std::numeric_limits<float>::min();
  return std::clamp(std::log(std::max(candidate_loss, floor) / std::max(reference_loss, floor)),
                    -kReferenceScoreClip, kReferenceScoreClip);
}

std::string reference_key(const Task& task, int64_t steps, uint64_t seed) {
  auto init = run_stream(seed, RunStream::kInitialPoint);
  const auto start = task.initial(init).to(at::kFloat);
  double fingerprint = 0.0;
  {
    torch::NoGradGuard no_grad;
    fingerprint = task.eval_loss(start).item<double>();
  }
  char text[64];
  std::snprintf(text, sizeof(text), "%.17g", fingerprint);
  std::ostringstream key;
  key << task.name() << '|' << task.dim() << '|' << text << '|' << steps << '|' << seed;
  return key.str();
}

ReferenceCache::ReferenceCache(std::string path, bool appends)
    : path_(std::move(path)), appends_(appends) {
  if (path_.empty()) return;
  std::ifstream file(path_);
  if (!file) return;  // a new cache
  std::string line;
  for (int64_t number = 1; std::getline(file, line); ++number) {
    if (line.empty()) continue;
    std::istringstream fields(line);
    std::string key, lr, loss, grid;
    const bool ok = std::getline(fields, key, '\t') && std::getline(fields, lr, '\t') &&
                    std::getline(fields, loss, '\t') && std::getline(fields, grid);
    TORCH_CHECK(ok, "ReferenceCache: ", path_, " line ", number,
                " is not key<TAB>lr<TAB>loss<TAB>grid losses");
    TunedReference reference;
    try {
      reference.lr = std::stod(lr);
      reference.final_loss = std::stod(loss);
      std::istringstream values(grid);
      std::string value;
      while (values >> value) reference.by_lr.push_back(std::stod(value));
    } catch (const std::exception&) {
      TORCH_CHECK(false, "ReferenceCache: ", path_, " line ", number, " has a malformed number");
    }
    entries_[key] = std::move(reference);
  }
}

const TunedReference* ReferenceCache::find(const std::string& key) const {
  const auto found = entries_.find(key);
  return found == entries_.end() ? nullptr : &found->second;
}

const TunedReference& ReferenceCache::add(const std::string& key, TunedReference reference) {
  TORCH_CHECK(entries_.count(key) == 0, "ReferenceCache: ", key, " is already known");
  ++tuned_;
  if (!path_.empty() && appends_) {
    std::ofstream file(path_, std::ios::app);
    TORCH_CHECK(file, "ReferenceCache: cannot append to ", path_);
    char number[32];
    std::snprintf(number, sizeof(number), "%.17g", reference.lr);
    file << key << '\t' << number;
    std::snprintf(number, sizeof(number), "%.17g", reference.final_loss);
    file << '\t' << number << '\t';
    for (size_t i = 0; i < reference.by_lr.size(); ++i) {
      std::snprintf(number, sizeof(number), "%.17g", reference.by_lr[i]);
      file << (i ? " " : "") << number;
    }
    file << '\n';
  }
  return entries_.emplace(key, std::move(reference)).first->second;
}

const TunedReference& ReferenceCache::get(const Task& task, int64_t steps, uint64_t seed) {
  const auto key = reference_key(task, steps, seed);
  if (const auto* known = find(key)) return *known;
  return add(key, tune_adamw_cosine(task, steps, seed));
}

}  // namespace flt::metatrain
