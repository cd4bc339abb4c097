#include "meta_train_state.h"

#include <torch/serialize.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <sstream>

namespace flt::metatrain::detail {

using namespace flt::optim;
namespace {

/// The whole meta-training state: a checkpoint file, or what rank 0 sends the other ranks.
std::unique_ptr<torch::serialize::OutputArchive> checkpoint_archive(
    LearnedOptimizerModelImpl& model, const torch::optim::Adam& adam, int64_t iteration,
    int64_t restart_index) {
  auto archive = std::make_unique<torch::serialize::OutputArchive>();
  archive->write("iteration", torch::IValue(iteration));
  archive->write("restart", torch::IValue(restart_index));
  torch::serialize::OutputArchive model_archive;
  model.save(model_archive);
  archive->write("model", model_archive);
  torch::serialize::OutputArchive adam_archive;
  adam.save(adam_archive);
  archive->write("adam", adam_archive);
  return archive;
}

/// Reads a checkpoint_archive into `model` and `adam`; returns (iteration, restart index).
std::pair<int64_t, int64_t> read_checkpoint(torch::serialize::InputArchive& archive,
                                            LearnedOptimizerModelImpl& model,
                                            torch::optim::Adam& adam) {
  torch::IValue iteration, restart_index;
  archive.read("iteration", iteration);
  archive.read("restart", restart_index);
  torch::serialize::InputArchive model_archive, adam_archive;
  archive.read("model", model_archive);
  model.load(model_archive);
  archive.read("adam", adam_archive);
  adam.load(adam_archive);
  return {iteration.toInt(), restart_index.toInt()};
}

}  // namespace

size_t family_slot(const MetaTrainOptions& options, int64_t restart_index, int64_t w) {
  return static_cast<size_t>((restart_index * options.workers() + w) %
                             static_cast<int64_t>(options.families().size()));
}

Assignment WorkerPlacement::assign(int64_t restart_index, int world_size) const {
  double known = 0.0, count = 0.0;  // a family not yet measured costs the mean of the others
  for (const double s : family_seconds_) {
    if (s > 0.0) known += s, ++count;
  }
  std::vector<double> cost(options_.workers());
  for (int64_t w = 0; w < options_.workers(); ++w) {
    const double s = family_seconds_[family_slot(options_, restart_index, w)];
    cost[w] = s > 0.0 ? s : count > 0.0 ? known / count : 1.0;
  }
  std::vector<int64_t> order(cost.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return cost[a] > cost[b]; });
  std::vector<double> load(world_size, 0.0);
  Assignment owned(world_size);
  for (const auto w : order) {
    const auto r = std::min_element(load.begin(), load.end()) - load.begin();
    owned[r].push_back(w);
    load[r] += cost[w];
  }
  for (auto& list : owned) std::sort(list.begin(), list.end());
  return owned;
}

void WorkerPlacement::measured(int64_t restart_index, const torch::Tensor& seconds) {
  std::vector<double> sum(family_seconds_.size(), 0.0), n(family_seconds_.size(), 0.0);
  const auto values = seconds.to(at::kDouble).contiguous();
  for (int64_t w = 0; w < options_.workers(); ++w) {
    const auto slot = family_slot(options_, restart_index, w);
    sum[slot] += values.data_ptr<double>()[w];
    n[slot] += 1.0;
  }
  for (size_t f = 0; f < sum.size(); ++f) {
    if (n[f] > 0.0) family_seconds_[f] = sum[f] / n[f];
  }
}

void save_checkpoint(const std::string& path, LearnedOptimizerModelImpl& model,
                     const torch::optim::Adam& adam, int64_t iteration, int64_t restart_index) {
  const std::string tmp = path + ".tmp";
  checkpoint_archive(model, adam, iteration, restart_index)->save_to(tmp);
  std::rename(tmp.c_str(), path.c_str());  // never leave a half-written checkpoint
}

std::pair<int64_t, int64_t> load_checkpoint(const std::string& path,
                                            LearnedOptimizerModelImpl& model,
                                            torch::optim::Adam& adam) {
  torch::serialize::InputArchive archive;
  archive.load_from(path);
  return read_checkpoint(archive, model, adam);
}

std::pair<int64_t, int64_t> share_starting_state(Communicator& communicator,
                                                 LearnedOptimizerModelImpl& model,
                                                 torch::optim::Adam& adam, int64_t iteration,
                                                 int64_t restart_index) {
  std::ostringstream bytes;
  if (communicator.rank() == 0) {
    checkpoint_archive(model, adam, iteration, restart_index)->save_to(bytes);
  }
  auto size = torch::tensor({static_cast<int64_t>(bytes.str().size())}, at::kLong);
  communicator.broadcast(size);
  auto payload = at::empty({size.item<int64_t>()}, at::kByte);
  if (communicator.rank() == 0)
    std::memcpy(payload.data_ptr(), bytes.str().data(), payload.numel());
  communicator.broadcast(payload);
  if (communicator.rank() == 0) return {iteration, restart_index};
  torch::serialize::InputArchive archive;
  archive.load_from(static_cast<const char*>(payload.data_ptr()), payload.numel());
  return read_checkpoint(archive, model, adam);
}

void check_same_options(Communicator& communicator, const MetaTrainOptions& options,
                        const std::vector<torch::Tensor>& params) {
  std::ostringstream text;
  text << meta_estimator_name(options.estimator()) << " "
       << meta_train_target_name(options.target()) << " " << options.iterations() << " "
       << options.workers() << " " << options.unroll() << " " << options.horizon() << " "
       << options.horizon_max() << " " << options.meta_lr() << " " << options.meta_lr_end() << " "
       << options.pes_sigma() << " " << options.clip() << " " << options.late_emphasis() << " "
       << options.seed();
  for (const auto family : options.families()) text << " " << task_family_name(family);
  for (const auto& p : params) text << " " << p.sizes();
  // std::hash is the same on every rank running the same build of the program.
  const auto mine = torch::tensor({static_cast<int64_t>(std::hash<std::string>{}(text.str()))});
  const auto all = communicator.allgather(mine);
  for (size_t r = 1; r < all.size(); ++r) {
    TORCH_CHECK(torch::equal(all[r], all[0]), "meta_train: rank ", r,
                " was started with other meta-training options or another rule shape than rank 0 "
                "(rank ",
                communicator.rank(), " has: ", text.str(), "); every rank needs the same flags");
  }
}

void GatherCost::print(int world_size, int64_t parameter_count, int64_t workers,
                       double iterations) const {
  std::fprintf(stderr,
               "meta_train: %d ranks; each iteration gathered %.0f bytes on average (rows of 2 + "
               "%lld doubles for %lld workers, every rank sending as many rows as the largest "
               "share); the gather, with the wait for the slowest rank, took %.3f ms on "
               "average, %.3f ms at least\n",
               world_size, bytes / iterations, static_cast<long long>(parameter_count),
               static_cast<long long>(workers), 1e3 * total / iterations, 1e3 * least);
}

torch::Tensor gather_workers(const torch::Tensor& local, const Assignment& owned, int64_t workers,
                             Communicator* communicator, GatherCost& cost) {
  const auto start = std::chrono::steady_clock::now();
  // Gloo's allgather takes equal sizes: every rank sends as many rows as the largest share.
  size_t most = 0;
  for (const auto& list : owned) most = std::max(most, list.size());
  torch::Tensor rows = local;  // one rank: owned[0] is every worker, in order
  if (communicator != nullptr) {
    auto padded = at::zeros({static_cast<int64_t>(most), local.size(1)}, local.options());
    padded.narrow(0, 0, local.size(0)).copy_(local);
    const auto shares = communicator->allgather(padded);
    std::vector<torch::Tensor> ordered(workers);
    for (size_t r = 0; r < owned.size(); ++r) {
      for (size_t k = 0; k < owned[r].size(); ++k) ordered[owned[r][k]] = shares[r][k];
    }
    rows = at::stack(ordered);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  cost.total += seconds;
  cost.least = std::min(cost.least, seconds);
  cost.bytes += static_cast<double>(owned.size() * most * rows.size(1) * sizeof(double));
  return rows;
}

}  // namespace flt::metatrain::detail
