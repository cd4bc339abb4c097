// The estimator shared by the value-only meta-training loops (optimizer/metatrain/src/
// antithetic_es.h) and their outer step: on a linear score the antithetic estimate converges to the
// known expectation of each shaping, the candidates come in the documented order, the outer step is
// Adam's formula, and the swarm's meta-training, built on both, resumes exactly.
#include <torch/types.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "antithetic_es.h"
#include "flt/metatrain/swarm_meta_train.h"
#include "test_util.h"

namespace fm = flt::metatrain;
namespace fd = flt::metatrain::detail;
using namespace flt::testing;

namespace {

class MetaEstimators : public SeededTest {};

// score(theta) = c . theta: each pair's difference is 2 sigma c . eps_k exactly.
constexpr int64_t kPairs = 20000;
const std::vector<double> kSlope = {3.0, -1.0, 0.5, 2.0};

torch::Tensor slope() {
  return torch::tensor(kSlope, torch::kDouble);
}

fd::EsEstimate linear_estimate(fd::EsShaping shaping, double sigma) {
  const auto c = slope();
  const auto eps = torch::randn({kPairs, c.numel()}, torch::kDouble);
  const auto theta = torch::tensor({0.3, -0.2, 1.0, 0.0}, torch::kDouble);
  return fd::antithetic_es(theta, eps, sigma, shaping,
                           [&](const torch::Tensor& x) { return (c * x).sum().item<double>(); });
}

}  // namespace

TEST_F(MetaEstimators, SignShapingConvergesToTheUnitSlopeTimesSqrtTwoOverPi) {
  // E[sign(u . eps) eps] = sqrt(2 / pi) u for a unit u and standard normal eps. Each component of
  // the sample mean has variance (1 - (2/pi) u_i^2) / K <= 1 / K: 5 standard deviations allowed.
  const double sigma = 0.1;
  const auto estimate = linear_estimate(fd::EsShaping::kSign, sigma);
  const auto unit = slope() / slope().norm();
  const auto expected = std::sqrt(2.0 / M_PI) * unit;
  const double bound = 5.0 / std::sqrt(static_cast<double>(kPairs));
  EXPECT_TRUE(all_within(estimate.gradient * (2.0 * sigma), expected,
                         torch::full({1}, bound, torch::kDouble)));
  // The mean of theta +- sigma eps is theta: the mean score is the score at theta (up to sums).
  EXPECT_NEAR(estimate.mean_score, 3.0 * 0.3 + 0.2 + 0.5, 1e-9);
}

TEST_F(MetaEstimators, RmsShapingConvergesToTheUnitSlope) {
  // w_k = (u . eps_k) / rms(u . eps) with rms -> 1, and E[(u . eps) eps] = u; each component's
  // sample variance is (1 + u_i^2) / K <= 2 / K: 5 standard deviations allowed.
  const double sigma = 0.05;
  const auto estimate = linear_estimate(fd::EsShaping::kRms, sigma);
  const auto unit = slope() / slope().norm();
  const double bound = 5.0 * std::sqrt(2.0 / static_cast<double>(kPairs));
  EXPECT_TRUE(
      all_within(estimate.gradient * (2.0 * sigma), unit, torch::full({1}, bound, torch::kDouble)));
}

TEST_F(MetaEstimators, CandidatesComePlusThenMinusPairByPair) {
  const auto theta = torch::tensor({1.0, 2.0}, torch::kDouble);
  const auto eps = torch::randn({3, 2}, torch::kDouble);
  std::vector<torch::Tensor> seen;
  fd::antithetic_es(theta, eps, 0.5, fd::EsShaping::kSign, [&](const torch::Tensor& x) {
    seen.push_back(x.clone());
    return 0.0;
  });
  ASSERT_EQ(seen.size(), 6u);
  for (int64_t k = 0; k < 3; ++k) {
    EXPECT_TRUE(torch::allclose(seen[2 * k], theta + 0.5 * eps[k], 0, 1e-15));
    EXPECT_TRUE(torch::allclose(seen[2 * k + 1], theta - 0.5 * eps[k], 0, 1e-15));
  }
  expect_error([&] { fd::antithetic_es(theta, eps.t(), 0.5, fd::EsShaping::kSign, nullptr); },
               {"eps must be (pairs >= 1, 2)", "[2, 3]"});
  expect_error([&] { fd::antithetic_es(theta, eps, 0.0, fd::EsShaping::kSign, nullptr); },
               {"sigma must be positive", "0"});
}

// Scores on several instances (a batched generation): sign shaping gives each instance one vote
// per pair, so one instance whose differences are large cannot outvote three with small ones of the
// other sign; RMS shaping weighs the mean difference. One instance is the scalar form.
TEST_F(MetaEstimators, SignShapingGivesEachInstanceOneVote) {
  const auto eps = torch::tensor({{1.0, 0.0}, {0.0, 1.0}}, torch::kDouble);
  // Pair 0: instance 0 moves by +10, instances 1-3 by -0.1 each; pair 1: all four by +1.
  const auto plus = torch::tensor({{10.0, -0.1, -0.1, -0.1}, {1.0, 1.0, 1.0, 1.0}}, torch::kDouble);
  const auto minus = torch::zeros_like(plus);
  const double sigma = 0.5;
  const auto vote = fd::antithetic_es(eps, sigma, fd::EsShaping::kSign, plus, minus);
  // w = (mean(+1, -1, -1, -1), mean(+1 x 4)) = (-0.5, 1); gradient = w eps / (K 2 sigma).
  EXPECT_TRUE(
      torch::allclose(vote.gradient, torch::tensor({-0.25, 0.5}, torch::kDouble), 0, 1e-15));
  EXPECT_NEAR(vote.mean_score, (10.0 - 0.3 + 4.0) / 16.0, 1e-15);
  // RMS: mean differences (2.425, 1) over their RMS.
  const auto rms = fd::antithetic_es(eps, sigma, fd::EsShaping::kRms, plus, minus);
  const double scale = std::sqrt((2.425 * 2.425 + 1.0) / 2.0);
  EXPECT_TRUE(torch::allclose(
      rms.gradient, torch::tensor({2.425 / scale / 2.0, 1.0 / scale / 2.0}, torch::kDouble), 1e-12,
      0));
  expect_error([&] { fd::antithetic_es(eps, sigma, fd::EsShaping::kSign, plus, minus.t()); },
               {"(pairs, instances)", "[2, 4]", "[4, 2]"});
}

TEST_F(MetaEstimators, TheOuterStepIsAdamsFormula) {
  // Adam after 3 earlier steps, in double: m' = b1 m + (1 - b1) g, v' = b2 v + (1 - b2) g^2,
  // theta' = theta - lr (m' / (1 - b1^4)) / (sqrt(v' / (1 - b2^4)) + 1e-8).
  const double b1 = 0.9, b2 = 0.999, lr = 0.01;
  auto theta = torch::randn({7}, torch::kDouble);
  auto m = torch::randn({7}, torch::kDouble), v = torch::rand({7}, torch::kDouble);
  const auto g = torch::randn({7}, torch::kDouble);
  const auto m_next = b1 * m + (1 - b1) * g, v_next = b2 * v + (1 - b2) * g * g;
  const auto expected = theta - lr * (m_next / (1 - std::pow(b1, 4))) /
                                    ((v_next / (1 - std::pow(b2, 4))).sqrt() + 1e-8);
  fd::adam_step(theta, m, v, 3, g, lr);
  EXPECT_TRUE(torch::allclose(theta, expected, 1e-13, 0));
  EXPECT_TRUE(torch::allclose(m, m_next, 1e-15, 0));
  EXPECT_TRUE(torch::allclose(v, v_next, 1e-15, 0));
  expect_error([&] { fd::adam_step(theta, m, v, 0, torch::zeros({6}, torch::kDouble), lr); },
               {"adam_step", "[7]", "[6]"});
}

TEST_F(MetaEstimators, SwarmMetaTrainingResumesExactlyFromItsCheckpoint) {
  fm::SwarmMetaTrainOptions options;
  fm::RastriginFamily family;
  family.min_dims = 2, family.max_dims = 3;
  options.family(family).iterations(20).pairs(2).tasks(2).particles(4).min_steps(3).max_steps(6);
  options.progress(false).seed(5);
  const auto run = [&](const std::string& checkpoint, int64_t stop_after) {
    torch::manual_seed(1);
    flt::optim::SwarmModel model{flt::optim::SwarmModelOptions()};
    auto o = options;
    o.checkpoint(checkpoint);
    try {
      fm::meta_train_swarm(model, o, [&](int64_t iteration, double) {
        if (iteration + 1 == stop_after) throw std::runtime_error("stopped");
      });
    } catch (const std::runtime_error&) {
    }
    return model->flat_parameters();
  };
  const auto path = temp_path("swarm-resume.pt");
  std::remove(path.c_str());
  const auto straight = run("", 0);
  run(path, 10);  // stops after the checkpoint of iteration 10
  const auto resumed = run(path, 0);
  EXPECT_TRUE(torch::equal(straight, resumed));
  torch::manual_seed(1);
  EXPECT_FALSE(torch::equal(
      straight, flt::optim::SwarmModel(flt::optim::SwarmModelOptions())->flat_parameters()));
}
