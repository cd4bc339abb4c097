// Data-parallel training's contract inside one process: flt::average_gradients and the default
// Communicator::allreduce against a simulated second rank, and ScheduleMnemosyne's communicator
// option (the reports averaged over the ranks that gave them, once per step; not saved; one per
// optimizer). Several processes on loopback: tests/cli/data_parallel.sh (ctest data_parallel_*).
#include <torch/nn/modules/linear.h>
#include <torch/serialize.h>

#include <functional>
#include <memory>
#include <sstream>
#include <utility>
#include <vector>

#include "flt/communicator.h"
#include "flt/optim/mnemosyne.h"
#include "learned_optimizer_util.h"
#include "test_util.h"

namespace fo = flt::optim;
using namespace flt::testing;

namespace {

class DataParallel : public flt::testing::SeededTest {};

/// Rank 0 of two whose partner's contribution to every collective is `partner(local)`: the default
/// allreduce (allgather, then the sum in rank order) sees [local, partner(local)].
class SimulatedRanks final : public flt::Communicator {
 public:
  explicit SimulatedRanks(std::function<torch::Tensor(const torch::Tensor&)> partner)
      : partner_(std::move(partner)) {}
  int rank() const override { return 0; }
  int world_size() const override { return 2; }
  std::vector<torch::Tensor> allgather(const torch::Tensor& local) override {
    ++collectives;
    return {local.clone(), partner_(local)};
  }
  void broadcast(torch::Tensor&) override { ADD_FAILURE() << "broadcast called"; }
  void barrier() override { ADD_FAILURE() << "barrier called"; }
  int collectives = 0;

 private:
  std::function<torch::Tensor(const torch::Tensor&)> partner_;
};

/// A schedule whose head reads every feature (the loss and the validation metric among them), so
/// that a different reported loss changes the step itself, not only the recorded history.
fo::LearnedSchedule reading_schedule() {
  torch::manual_seed(11);
  fo::LearnedSchedule schedule{fo::LearnedScheduleOptions()};
  torch::NoGradGuard no_grad;
  schedule->head_out->weight.normal_(0.0, 0.5);
  schedule->head_out->bias.normal_(0.0, 0.3);
  return schedule;
}

/// Same shape and the same bits.
void expect_same_bits(const torch::Tensor& a, const torch::Tensor& b) {
  ASSERT_EQ(a.sizes(), b.sizes());
  // History entries are NaN until a signal arrives: compare the bits, not the values.
  EXPECT_TRUE(torch::equal(a.detach().contiguous().view(torch::kByte),
                           b.detach().contiguous().view(torch::kByte)));
}

}  // namespace

TEST_F(DataParallel, DefaultAllreduce_SumsInRankOrder) {
  SimulatedRanks ranks([](const torch::Tensor& t) { return t * 3; });
  auto x = torch::tensor({1.0, -2.0, 0.5}, torch::kDouble);
  ranks.allreduce(x);
  EXPECT_TRUE(torch::equal(x, torch::tensor({4.0, -8.0, 2.0}, torch::kDouble)));
  auto strided = torch::zeros({4}, torch::kDouble).slice(0, 0, 4, 2);
  expect_error([&] { ranks.allreduce(strided); }, {"contiguous"});
}

TEST_F(DataParallel, AverageGradients_TakesTheRanksMeanInOneCollectivePerDtype) {
  torch::nn::Linear layer(3, 2);
  auto extra = torch::ones({4}, torch::kDouble).requires_grad_();
  (layer(torch::randn({5, 3})).sum() + (extra * 2).sum()).backward();
  std::vector<torch::Tensor> params = layer->parameters();
  params.push_back(extra);
  std::vector<torch::Tensor> before;
  for (const auto& p : params) before.push_back(p.grad().clone());
  // The partner's gradients are 1 everywhere: the mean is (g + 1) / 2.
  SimulatedRanks ranks([](const torch::Tensor& t) { return torch::ones_like(t); });
  flt::average_gradients(ranks, params);
  EXPECT_EQ(ranks.collectives, 2);  // float32 and float64
  for (size_t i = 0; i < params.size(); ++i)
    EXPECT_TRUE(torch::equal(params[i].grad(), (before[i] + 1) / 2)) << "parameter " << i;
}

TEST_F(DataParallel, AverageGradients_NamesAParameterWithoutAGradient) {
  torch::nn::Linear layer(3, 2);
  layer(torch::randn({5, 3})).sum().backward();
  auto params = layer->parameters();
  params.push_back(torch::zeros({7}, torch::requires_grad()));
  SimulatedRanks ranks([](const torch::Tensor& t) { return t; });
  expect_error([&] { flt::average_gradients(ranks, params); },
               {"parameter 2 (shape [7]) has no gradient on rank 0"});
  EXPECT_EQ(ranks.collectives, 0);  // checked before any rank waits for another
}

// Each rank reports its own shard's loss; with the communicator every rank records their mean (a
// metric rank 0 alone reports is rank 0's), so its step equals a lone optimizer's given the mean.
TEST_F(DataParallel, ScheduleMnemosyne_AveragesTheReportsOverTheRanks) {
  const double partner_loss = 0.75;
  // The partner's (loss sum, count, validation sum, count): a loss, no validation.
  auto ranks = std::make_shared<SimulatedRanks>([&](const torch::Tensor&) {
    return torch::tensor({partner_loss, 1.0, 0.0, 0.0}, torch::kDouble);
  });
  auto shared = torch::randn({6, 4});
  auto alone = shared.clone().requires_grad_(), member = shared.clone().requires_grad_();
  fo::ScheduleMnemosyne lone({alone}, fo::ScheduleMnemosyneOptions(), reading_schedule());
  fo::ScheduleMnemosyne ranked({member}, fo::ScheduleMnemosyneOptions().communicator(ranks),
                               reading_schedule());
  for (int step = 0; step < 5; ++step) {
    const auto grad = torch::randn({6, 4});
    alone.mutable_grad() = grad.clone();
    member.mutable_grad() = grad.clone();
    const double own_loss = 1.0 / (step + 1);
    lone.report_loss((own_loss + partner_loss) / 2);
    ranked.report_loss(own_loss);
    if (step % 2 == 0) {
      lone.report_validation(0.5 + step);
      ranked.report_validation(0.5 + step);
    }
    lone.step();
    ranked.step();
  }
  EXPECT_EQ(ranks->collectives, 5);  // one per step
  expect_same_bits(alone, member);
  const auto& a =
      static_cast<const fo::ScheduleMnemosyneParamState&>(*lone.state().begin()->second);
  const auto& b =
      static_cast<const fo::ScheduleMnemosyneParamState&>(*ranked.state().begin()->second);
  expect_same_bits(a.history(), b.history());
  expect_same_bits(a.moments(), b.moments());
}

// Without the communicator the ranks' histories part at the first reported loss: what the option
// is for.
TEST_F(DataParallel, ScheduleMnemosyne_WithoutCommunicator_RanksRecordTheirOwnLoss) {
  auto shared = torch::randn({6, 4});
  auto p0 = shared.clone().requires_grad_(), p1 = shared.clone().requires_grad_();
  fo::ScheduleMnemosyne rank0({p0}), rank1({p1});
  const auto grad = torch::randn({6, 4});
  p0.mutable_grad() = grad.clone();
  p1.mutable_grad() = grad.clone();
  rank0.report_loss(1.0);
  rank1.report_loss(2.0);
  rank0.step();
  rank1.step();
  const auto& a =
      static_cast<const fo::ScheduleMnemosyneParamState&>(*rank0.state().begin()->second);
  const auto& b =
      static_cast<const fo::ScheduleMnemosyneParamState&>(*rank1.state().begin()->second);
  EXPECT_FALSE(torch::equal(a.history().nan_to_num(0.0), b.history().nan_to_num(0.0)));
}

TEST_F(DataParallel, ScheduleMnemosyne_CommunicatorIsNeitherSavedNorCompared) {
  auto ranks = std::make_shared<SimulatedRanks>([](const torch::Tensor& t) { return t; });
  auto p = torch::randn({3}, torch::requires_grad());
  fo::ScheduleMnemosyne opt({p}, fo::ScheduleMnemosyneOptions().communicator(ranks));
  p.mutable_grad() = torch::ones({3});
  opt.step();
  EXPECT_EQ(fo::ScheduleMnemosyneOptions().communicator(ranks), fo::ScheduleMnemosyneOptions());
  std::stringstream saved;
  torch::save(opt, saved);
  auto q = p.detach().clone().requires_grad_();
  fo::ScheduleMnemosyne loaded({q});
  torch::load(loaded, saved);
  EXPECT_EQ(static_cast<const fo::ScheduleMnemosyneOptions&>(loaded.param_groups()[0].options())
                .communicator(),
            nullptr);
  // Loading keeps the loading optimizer's own communicator (the constructor's options).
  std::stringstream again;
  torch::save(opt, again);
  const int before = ranks->collectives;
  torch::load(opt, again);
  opt.step();
  EXPECT_EQ(ranks->collectives, before + 1);
}

TEST_F(DataParallel, ScheduleMnemosyne_AGroupWithAnotherCommunicatorIsRefused) {
  auto ranks = std::make_shared<SimulatedRanks>([](const torch::Tensor& t) { return t; });
  auto other = std::make_shared<SimulatedRanks>([](const torch::Tensor& t) { return t; });
  auto p = torch::randn({3}, torch::requires_grad());
  auto q = torch::randn({2}, torch::requires_grad());
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<torch::Tensor>{p});
  groups.emplace_back(std::vector<torch::Tensor>{q},
                      std::make_unique<fo::ScheduleMnemosyneOptions>(
                          fo::ScheduleMnemosyneOptions().communicator(other)));
  expect_error(
      [&] {
        fo::ScheduleMnemosyne(std::move(groups),
                              fo::ScheduleMnemosyneOptions().communicator(ranks));
      },
      {"ScheduleMnemosyne: parameter group 1 names a communicator of its own"});
}
