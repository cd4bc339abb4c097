// The swarm optimizer and its baselines: contract, numeric and behaviour tests.

#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/autograd/autograd.h>

#include <cmath>

#include "flt/harness/swarm_comparison.h"
#include "flt/metatrain/landscapes.h"
#include "flt/metatrain/swarm_meta_train.h"
#include "flt/optim/swarm.h"
#include "flt/optim/swarm_baselines.h"
#include "test_util.h"

namespace fo = flt::optim;

namespace fm = flt::metatrain;
using namespace flt::testing;

namespace {

class Swarm : public flt::testing::SeededTest {};

// An untrained (hand-set base rule) model, so the tests do not depend on the shipped weights.
fo::Swarm make_swarm(fo::SwarmVariant variant, uint64_t seed = 1, int64_t particles = 8) {
  return fo::Swarm(fo::SwarmOptions().variant(variant).particles(particles).seed(seed),
                   fo::SwarmModel(fo::SwarmModelOptions().variant(variant)));
}

}  // namespace

TEST_F(Swarm, AskTellEqualsMinimize) {
  for (auto variant : fo::all_swarm_variants()) {
    auto by_minimize = make_swarm(variant);
    const auto box = fo::SearchBox::cube(3, -5.12, 5.12);
    const auto result = by_minimize.minimize(fm::rastrigin, box, 200);
    auto by_hand = make_swarm(variant);
    by_hand.set_budget(200);
    by_hand.reset(box);
    int64_t spent = 0;
    while (spent < 200) {
      const auto x = by_hand.ask();
      by_hand.tell(fm::rastrigin(x));
      spent += x.size(0);
    }
    EXPECT_EQ(result.evaluations, 200);
    EXPECT_EQ(result.best_value, by_hand.best_value()) << fo::swarm_variant_name(variant);
    EXPECT_TRUE(torch::equal(result.best_x, by_hand.best_x()));
  }
}

TEST_F(Swarm, DeterministicBySeed) {
  const auto box = fo::SearchBox::cube(4, -5.12, 5.12);
  auto a = make_swarm(fo::SwarmVariant::kFLT, 7).minimize(fm::rastrigin, box, 160);
  auto b = make_swarm(fo::SwarmVariant::kFLT, 7).minimize(fm::rastrigin, box, 160);
  auto c = make_swarm(fo::SwarmVariant::kFLT, 8).minimize(fm::rastrigin, box, 160);
  EXPECT_EQ(a.best_history, b.best_history);
  EXPECT_NE(a.best_history, c.best_history);
  fo::ParticleSwarm p1(8, 3), p2(8, 3);
  EXPECT_EQ(fo::run_search(p1, fm::rastrigin, box, 160).best_value,
            fo::run_search(p2, fm::rastrigin, box, 160).best_value);
}

TEST_F(Swarm, BadOptionsNameTheValue) {
  expect_error([] { fo::Swarm(fo::SwarmOptions().particles(1)); }, {"particles", ">= 2", "1"});
  expect_error([] { fo::Swarm(fo::SwarmOptions().initial_sigma(-1)); }, {"initial_sigma", "-1"});
  auto swarm = make_swarm(fo::SwarmVariant::kFLT);
  swarm.reset(fo::SearchBox::cube(3, -1, 1));
  swarm.ask();
  expect_error([&] { swarm.tell(torch::zeros({5}, torch::kDouble)); }, {"(8)", "[5]"});
  // An objective of the wrong dimension, and one that is never finite.
  expect_error(
      [&] {
        swarm.minimize([](const torch::Tensor& x) { return fm::sphere(x.narrow(1, 0, 2)).sum(); },
                       fo::SearchBox::cube(3, -1, 1), 50);
      },
      {"(P, n) to (P)", "[]"});
  expect_error(
      [&] {
        swarm.minimize(
            [](const torch::Tensor& x) { return torch::full({x.size(0)}, NAN, torch::kDouble); },
            fo::SearchBox::cube(3, -1, 1), 50);
      },
      {"no finite value", "nan"});
  expect_error([&] { fo::SearchBox::cube(2, 1, -1); }, {"lower < upper", "coordinate 0"});
  expect_error([&] { fo::CmaEs(1); }, {"lambda", "1"});
  expect_error([&] { fo::swarm_variant_from_name("lstmm"); }, {"lstmm"});
}

TEST_F(Swarm, NaNParticlesDoNotPoisonTheOthers) {
  // f is NaN on half the box: the swarm keeps finite positions and finds the minimum of the rest.
  const auto f = [](const torch::Tensor& x) {
    const auto v = fm::sphere(x - 1.0);
    return torch::where(x.select(1, 0) < 0, torch::full_like(v, NAN), v);
  };
  for (auto variant : fo::all_swarm_variants()) {
    auto swarm = make_swarm(variant, 2);
    const auto result = swarm.minimize(f, fo::SearchBox::cube(2, -3, 3), 800);
    EXPECT_TRUE(std::isfinite(result.best_value)) << fo::swarm_variant_name(variant);
    EXPECT_LT(result.best_value, 0.05) << fo::swarm_variant_name(variant);
    EXPECT_TRUE(swarm.state().u.isfinite().all().item<bool>());
  }
}

TEST_F(Swarm, BaselinesReachKnownOptima) {
  const auto box = fo::SearchBox::cube(2, -2.048, 2.048);
  fo::CmaEs cma(0, 1);
  EXPECT_LT(fo::run_search(cma, fm::sphere, box, 600).best_value, 1e-8);
  EXPECT_LT(fo::run_search(cma, fm::rosenbrock, box, 2000).best_value, 1e-6);
  fo::ParticleSwarm pso(16, 1);
  EXPECT_LT(fo::run_search(pso, fm::sphere, box, 1600).best_value, 1e-6);
  EXPECT_LT(fo::run_search(pso, fm::rosenbrock, box, 4000).best_value, 1e-3);
  fo::AdamRestarts adam(4, 0.01, 50, 1);
  EXPECT_LT(fo::run_search(adam, fm::sphere, box, 2000).best_value, 1e-6);
  EXPECT_LT(fo::run_search(adam, fm::rosenbrock, box, 8000).best_value, 1e-3);
  fo::RandomSearch random(16, 1);
  const double random_best = fo::run_search(random, fm::sphere, box, 2000).best_value;
  EXPECT_LT(random_best, 0.05);
  EXPECT_GT(random_best, 0.0);
  // The untrained swarm's base rule also converges on the sphere.
  auto swarm = make_swarm(fo::SwarmVariant::kFLT, 1, 8);
  EXPECT_LT(swarm.minimize(fm::sphere, box, 1600).best_value, 1e-4);
}

TEST_F(Swarm, RpeOfTheSwarmIsTheLibrarySpectrum) {
  // The learned f at distance d is h exp(-2 pi^2 s^2 d^2) per head, whatever the dimension.
  fo::SwarmModel model{fo::SwarmModelOptions()};
  {
    torch::NoGradGuard no_grad;  // the untrained heights are 0; any heights will do
    model->rpe_heights.copy_(torch::tensor({1.5, -0.7}, torch::kDouble));
  }
  const auto d = torch::linspace(0, 3, 7, torch::kDouble);
  const auto f = model->rpe_profile(d);
  const auto s = model->rpe_log_widths.exp().unsqueeze(1);
  const auto expected =
      model->rpe_heights.unsqueeze(1) * torch::exp(-2.0 * M_PI * M_PI * s * s * d * d);
  EXPECT_TRUE(flt::testing::all_close(f, expected.detach(), 1e-12, 1e-10));
}

TEST_F(Swarm, AttentionPathGradientMatchesFiniteDifferences) {
  // The read-out is differentiable in the RPE heights and widths (the spectrum is written into the
  // library's FLT module per dimension): autograd against central differences in double.
  fo::SwarmModel model(fo::SwarmModelOptions().heads(2).features(16).rpe_features(16));
  {
    torch::NoGradGuard no_grad;  // untrained heights are 0, where the widths have no gradient
    model->rpe_heights.copy_(torch::tensor({1.5, -0.7}, torch::kDouble));
  }
  fo::SwarmState state;
  state.u = torch::rand({1, 6, 5}, torch::kDouble) - 0.5;
  state.best_u = torch::rand({1, 6, 5}, torch::kDouble) - 0.5;
  state.values = torch::rand({1, 6}, torch::kDouble);
  state.best_values = state.values - 0.1;
  state.improved = torch::zeros({1, 6}, torch::kDouble);
  state.log_sigma = torch::full({1, 6}, std::log(0.2), torch::kDouble);
  const auto readout = [&] {
    return model->attention_readout(state, model->scalar_features(state)).pow(2).sum();
  };
  // The shared helper (its default step and tolerances): the parameters are the inputs it
  // perturbs in place.
  flt::testing::expect_gradients_match([&](const std::vector<torch::Tensor>&) { return readout(); },
                                       {model->rpe_heights, model->rpe_log_widths});
}

TEST_F(Swarm, StepSizeFollowsTheSchedule) {
  // The untrained schedule: 0.2 box widths at the start, 1e-5 at the end, log-linear in
  // progress^1.5, times each particle's own factor.
  fo::SwarmModel model{fo::SwarmModelOptions()};
  fo::SwarmState state;
  state.u = torch::zeros({1, 3, 2}, torch::kDouble);
  state.log_sigma = torch::tensor({{0.0, std::log(2.0), -1.0}}, torch::kDouble);
  const auto factors = state.log_sigma.exp();
  for (double progress : {0.0, 0.25, 0.5, 1.0}) {
    state.progress = progress;
    const double expected =
        std::exp(std::log(0.2) + std::pow(progress, 1.5) * (std::log(1e-5) - std::log(0.2)));
    EXPECT_TRUE(
        flt::testing::all_close(model->step_unit(state).detach(), expected * factors, 1e-12, 0))
        << "progress " << progress;
  }
}

TEST_F(Swarm, AskTellPlansABudget) {
  // The schedule runs over SwarmOptions::budget, or over 200 n evaluations when none is given.
  const auto box = fo::SearchBox::cube(2, -1, 1);
  const auto run = [&](fo::SwarmOptions options, int64_t steps) {
    fo::Swarm swarm(options.particles(8), fo::SwarmModel(fo::SwarmModelOptions()));
    swarm.reset(box);
    for (int64_t i = 0; i < steps; ++i) swarm.tell(fm::sphere(swarm.ask()));
    return swarm.state().progress;
  };
  EXPECT_DOUBLE_EQ(run(fo::SwarmOptions(), 25), 0.5);  // 200 evaluations of 400
  EXPECT_DOUBLE_EQ(run(fo::SwarmOptions(), 60), 1.0);  // past the budget: the final step size
  EXPECT_DOUBLE_EQ(run(fo::SwarmOptions().budget(1600), 50), 0.25);
}

TEST_F(Swarm, UntrainedAttentionRecombinesTowardTheBest) {
  // The untrained keys weigh particles by the rank of their value, best first (an evolution
  // strategy's recombination): every particle gives the best one more weight than the worst.
  for (auto variant : {fo::SwarmVariant::kFLT, fo::SwarmVariant::kPerformer}) {
    fo::SwarmModel model{fo::SwarmModelOptions().variant(variant).features(256)};
    fo::SwarmState state;
    state.u = torch::rand({1, 8, 4}, torch::kDouble) - 0.5;
    state.best_u = state.u.clone();
    state.values = torch::tensor({{3.0, 1.0, 7.0, 0.5, 2.0, 9.0, 4.0, 6.0}}, torch::kDouble);
    state.best_values = state.values.clone();
    state.improved = torch::zeros({1, 8}, torch::kDouble);
    state.log_sigma = torch::zeros({1, 8}, torch::kDouble);
    const auto weights = model->attention_weights(state).detach();  // (1, H, P, P)
    const auto to_best = weights.select(-1, 3), to_worst = weights.select(-1, 5);
    EXPECT_TRUE((to_best > 2.0 * to_worst).all().item<bool>())
        << fo::swarm_variant_name(variant) << "\n"
        << weights;
  }
}

TEST_F(Swarm, TwoFunnelTaskIsTheLowerOfTwoRastrigins) {
  // The meta-training family's second funnel: f = min(R(x - s1), R(x - s2) + offset), 0 at s1.
  fm::RastriginTask task;
  task.shift = torch::tensor({1.0, -2.0, 0.5}, torch::kDouble);
  task.second_shift = torch::tensor({-2.0, 2.0, -1.0}, torch::kDouble);
  task.second_offset = 1.5;
  task.rotation = torch::eye(3, torch::kDouble);
  const auto x = torch::stack({task.shift, task.second_shift, torch::zeros({3}, torch::kDouble)});
  const auto f = task.clean(x);
  const auto expected =
      torch::minimum(fm::rastrigin(x - task.shift), fm::rastrigin(x - task.second_shift) + 1.5);
  EXPECT_TRUE(flt::testing::all_close(f, expected, 1e-12, 1e-12));
  EXPECT_NEAR(f[0].item<double>(), 0.0, 1e-12);
  EXPECT_NEAR(f[1].item<double>(), 1.5, 1e-12);
  // A family without second funnels draws the same tasks as before they existed.
  fm::RastriginFamily one;
  one.two_funnel_probability = 0.0;
  auto g1 = at::make_generator<at::CPUGeneratorImpl>(5),
       g2 = at::make_generator<at::CPUGeneratorImpl>(5);
  const auto a = fm::sample_rastrigin_task(one, 4, g1);
  EXPECT_FALSE(a.second_shift.defined());
  fm::RastriginFamily two;
  two.two_funnel_probability = 1.0;
  const auto b = fm::sample_rastrigin_task(two, 4, g2);
  EXPECT_TRUE(torch::equal(a.shift, b.shift));
  ASSERT_TRUE(b.second_shift.defined());
  EXPECT_GE(b.second_offset, 0.0);
  EXPECT_LE(b.second_offset, 4.0);
}

TEST_F(Swarm, WeightsRoundTrip) {
  fo::SwarmModel model(fo::SwarmModelOptions().variant(fo::SwarmVariant::kLSTM).hidden(8));
  const auto path = temp_path("swarm_weights_round_trip.pt");
  model->save(path);
  auto loaded = fo::SwarmModelImpl::load_file(path);
  EXPECT_EQ(loaded->options.hidden(), 8);
  EXPECT_TRUE(torch::equal(loaded->flat_parameters(), model->flat_parameters()));
  expect_error([] { fo::SwarmModelImpl::load_file("/nonexistent/swarm.pt"); },
               {"cannot open", "/nonexistent/swarm.pt"});
}

TEST_F(Swarm, ModelLeavesTheGlobalGeneratorAlone) {
  // The initial meta-weights follow SwarmModelOptions::seed without reseeding the caller's draws.
  torch::manual_seed(3);
  const auto expected = torch::rand({4});
  torch::manual_seed(3);
  fo::SwarmModel model{fo::SwarmModelOptions().seed(11)};
  EXPECT_TRUE(torch::equal(torch::rand({4}), expected));
  fo::SwarmModel same{fo::SwarmModelOptions().seed(11)};
  EXPECT_TRUE(torch::equal(model->flat_parameters(), same->flat_parameters()));
}
