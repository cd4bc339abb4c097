// ScheduleMnemosyne and its rule (learned_schedule.h): the untrained schedule's exact
// formula, the fused pass against the composite reference, robustness, the memory's reach over the
// run, the optional signals, save and load, settling under pure noise.
#include <torch/nn/modules/linear.h>
#include <torch/serialize.h>

#include <cmath>
#include <sstream>

#include "flt/kernels/schedule_step.h"
#include "flt/optim/learned_schedule.h"
#include "flt/optim/mnemosyne.h"
#include "learned_optimizer_util.h"
#include "test_util.h"

namespace fo = flt::optim;
using namespace flt::testing;
using Impl = fo::LearnedScheduleImpl;

namespace {

class LearnedSchedule : public flt::testing::SeededTest {};

fo::ScheduleMnemosyneOptions schedule_options(double lr = 1.0) {
  return fo::ScheduleMnemosyneOptions(lr);
}

/// One step of sum_i c_i x_i^2 + sum w^2 with curvatures c in [1, 2) (two tensors; mild, so that
/// no coordinate oscillates across 0 where rounding differences would be amplified).
void quadratic_step(fo::ScheduleMnemosyne& opt, torch::Tensor& x, torch::Tensor& w) {
  opt.zero_grad();
  const auto c = 1.0 + torch::arange(x.numel(), x.options()).view(x.sizes()) / x.numel();
  auto loss = (x * x * c).sum() + (w * w).sum();
  loss.backward();
  opt.step();
}

}  // namespace

// ---- the exact formula of the untrained schedule ---------------------------------------------

TEST_F(LearnedSchedule, Untrained_IsAdamWithAStepRelativeToTheTensorsRMSAndTheHandRule) {
  // Double-precision reference of learned_schedule.h with a zero head and corrector:
  // eta_t = rho sqrt(min(mean p^2, 16 mean p_0^2) + floor^2) exp(G_t), mean p^2 of the last pass
  // (p_0's at t = 1), p <- (1 - sigmoid(-11)) p - eta m_hat / (sqrt(v_hat) + 1e-8); the hand rule
  // G_t = clamp(G_{t-1} + kappa (c_t - c0), -3, log 4) from step 2, c_t the 0.9-average of the
  // cosine between g and m / (sqrt(v) + 1e-8) before the pass; G = 0 with the hand rule off.
  for (bool hand_rule : {true, false}) {
    auto x = torch::randn({6}, torch::kDouble).requires_grad_(true);
    auto reference = x.detach().clone();
    fo::ScheduleMnemosyne opt(
        {x}, schedule_options(0.5).fused(false),
        fo::LearnedSchedule(fo::LearnedScheduleOptions().hand_rule(hand_rule)));
    const double rho = 0.02, floor = 1e-2, shrink = 1.0 / (1.0 + std::exp(11.0));
    const double kappa = 0.1, c0 = 0.05;
    const double initial_ms = reference.pow(2).mean().item<double>();
    auto m = torch::zeros_like(reference), v = torch::zeros_like(reference);
    double last_ms = initial_ms, log_growth = 0.0, cosine_average = NAN;
    // Curvatures 1..6 and lr 0.5 x rho: the larger ones oscillate, so the cosine and G change sign.
    for (int t = 1; t <= 40; ++t) {
      opt.zero_grad();
      const auto c = torch::arange(1, 7, torch::kDouble);
      (c * x * x).sum().backward();
      opt.step();
      if (hand_rule && t >= 2)
        log_growth = std::clamp(log_growth + kappa * (cosine_average - c0), -3.0, std::log(4.0));
      const auto g = 2 * c * reference;
      const auto d_prev = m / (v.sqrt() + 1e-8);
      const double gd = (g * d_prev).sum().item<double>();
      const double norms =
          std::sqrt((g * g).sum().item<double>() * (d_prev * d_prev).sum().item<double>());
      const double cosine = norms > 0 ? gd / norms : 0.0;
      cosine_average = std::isnan(cosine_average) ? cosine : 0.9 * cosine_average + 0.1 * cosine;
      m = 0.9 * m + 0.1 * g;
      v = 0.999 * v + 0.001 * g * g;
      const auto m_hat = m / (1 - std::pow(0.9, t)), v_hat = v / (1 - std::pow(0.999, t));
      const double eta = 0.5 * rho * std::sqrt(std::min(last_ms, 16 * initial_ms) + floor * floor) *
                         std::exp(log_growth);
      reference = (1 - shrink) * reference - eta * m_hat / (v_hat.sqrt() + 1e-8);
      last_ms = reference.pow(2).mean().item<double>();
      // The composite path computes in float32 (the rule's precision): float tolerance.
      ASSERT_TRUE(all_close(x.detach(), reference, 1e-5, 1e-6))
          << "step " << t << " hand rule " << hand_rule;
      ASSERT_NEAR(opt.step_sizes()[0], eta, 1e-6 * eta) << "step " << t;
    }
    if (hand_rule) EXPECT_NE(log_growth, 0.0);  // the rule moved the step
  }
}

// ---- the fused pass against the composite reference ------------------------------------------

TEST_F(LearnedSchedule, FusedStep_MatchesTheCompositeReference) {
  for (auto memory : {fo::Memory::kFLT, fo::Memory::kNone, fo::Memory::kEMA}) {
    auto schedule = perturbed_schedule(memory, 5);
    torch::manual_seed(3);
    auto x1 = torch::randn({70000}).requires_grad_(true);  // more than one parallel block
    auto w1 = torch::randn({5, 3}).requires_grad_(true);
    auto x2 = x1.detach().clone().requires_grad_(true);
    auto w2 = w1.detach().clone().requires_grad_(true);
    fo::ScheduleMnemosyne fused({x1, w1}, schedule_options(), schedule);
    fo::ScheduleMnemosyne composite({x2, w2}, schedule_options().fused(false).chunk_size(4096),
                                    schedule);
    for (int s = 0; s < 8; ++s) {
      fused.report_loss(1.0 / (s + 1));
      composite.report_loss(1.0 / (s + 1));
      if (s == 4) {
        fused.report_validation(0.7);
        composite.report_validation(0.7);
      }
      quadratic_step(fused, x1, w1);
      quadratic_step(composite, x2, w2);
    }
    // atol 1e-5 (5e-4 of a step, eta ~ 0.02): a coordinate that crosses zero holds m as a
    // cancelling sum of gradients, where the two paths' float rounding (the fused loop contracts
    // into FMAs and multiplies by reciprocal bias corrections) differs by up to ~2e-6 after 8
    // steps; everywhere else they agree to 1e-4 relative.
    EXPECT_TRUE(all_close(x1, x2, 1e-4, 1e-5)) << fo::memory_name(memory);
    EXPECT_TRUE(all_close(w1, w2, 1e-4, 1e-5)) << fo::memory_name(memory);
    const auto sizes_fused = fused.step_sizes(), sizes_composite = composite.step_sizes();
    for (size_t i = 0; i < sizes_fused.size(); ++i)
      EXPECT_NEAR(sizes_fused[i], sizes_composite[i], 1e-5 * sizes_composite[i]);
  }
}

TEST_F(LearnedSchedule, NonFiniteGradients_TouchOnlyThatCoordinate) {
  for (bool fused : {true, false}) {
    auto x = torch::randn({40}).requires_grad_(true);
    fo::ScheduleMnemosyne opt({x}, schedule_options().fused(fused),
                              perturbed_schedule(fo::Memory::kFLT, 2));
    const auto before = x.detach().clone();
    x.mutable_grad() = torch::randn({40});
    x.mutable_grad()[7] = NAN;
    x.mutable_grad()[9] = INFINITY;
    opt.step();
    EXPECT_EQ(x[7].item<float>(), before[7].item<float>());
    EXPECT_EQ(x[9].item<float>(), before[9].item<float>());
    EXPECT_TRUE(torch::isfinite(x).all().item<bool>());
    EXPECT_EQ(opt.skipped(), 2);
    EXPECT_NE(x[8].item<float>(), before[8].item<float>()) << "the others step";
    // The next finite step is finite everywhere: the skipped moments stayed clean.
    x.mutable_grad() = torch::randn({40});
    opt.step();
    EXPECT_TRUE(torch::isfinite(x).all().item<bool>()) << (fused ? "fused" : "composite");
  }
}

TEST_F(LearnedSchedule, DecoupledDecay_AnnealsWithTheStepWhenTheLengthIsKnown) {
  // Zero gradients: Adam's direction is 0, so each step only decays, x_t = prod (1 - s a_t) with
  // the untrained decay s = sigmoid(-11) and a_t the cosine anneal (1 when anneal_decay is off).
  const double s = 1.0 / (1.0 + std::exp(11.0));
  constexpr int64_t kSteps = 4;
  for (bool fused : {true, false}) {
    for (bool anneal_decay : {true, false}) {
      for (int64_t total_steps : {kSteps, int64_t{0}}) {
        SCOPED_TRACE(::testing::Message() << "fused " << fused << ", anneal_decay " << anneal_decay
                                          << ", total_steps " << total_steps);
        auto x = torch::ones({5}).requires_grad_(true);
        fo::ScheduleMnemosyne opt(
            {x}, fo::ScheduleMnemosyneOptions().total_steps(total_steps).fused(fused),
            fo::LearnedSchedule(fo::LearnedScheduleOptions().anneal_decay(anneal_decay)));
        double expected = 1.0;
        for (int64_t t = 1; t <= kSteps; ++t) {
          x.mutable_grad() = torch::zeros_like(x);
          opt.step();
          const double a = anneal_decay && total_steps > 0
                               ? 0.5 * (1.0 + std::cos(M_PI * (t - 1) / double(total_steps)))
                               : 1.0;
          expected *= 1.0 - s * a;
        }
        // The steps differ by 2.5e-5 between the annealed and the constant decay; float keeps 6e-8.
        EXPECT_NEAR(x[0].item<double>(), expected, 2e-7);
        EXPECT_TRUE(torch::equal(x, x[0].expand_as(x)));
      }
    }
  }
}

TEST_F(LearnedSchedule, HugeAndZeroGradients_GiveFiniteSteps) {
  auto x = torch::randn({10}).requires_grad_(true);
  fo::ScheduleMnemosyne opt({x}, schedule_options(), perturbed_schedule(fo::Memory::kFLT, 4));
  for (double scale : {1e30, 0.0, 1e-30, 1e30}) {
    x.mutable_grad() = torch::randn({10}) * scale;
    opt.step();
    ASSERT_TRUE(torch::isfinite(x).all().item<bool>()) << scale;
  }
}

// ---- the memory sees the whole run -------------------------------------------------------------

TEST_F(LearnedSchedule, FLTMemory_ReachesBackHundredsOfSteps) {
  // Two runs whose features differ only in their first 20 steps (a signal kept nowhere else: the
  // run's fraction): with the FLT memory (or its ablation, the exponential averages) the decision
  // 400 steps later still differs; without a memory it does not.
  // The hand rule is off: its growth would reach its bound on these steady statistics, where the
  // clamp of the step would hide the head's difference.
  for (auto memory : {fo::Memory::kFLT, fo::Memory::kEMA, fo::Memory::kNone}) {
    auto schedule = perturbed_schedule(memory, 8, /*hand_rule=*/false);
    {
      torch::NoGradGuard no_grad;
      for (auto& p : schedule->parameters()) p.normal_(0.0, 0.3);
      if (schedule->discount_logit.defined()) schedule->discount_logit.fill_(std::log(999.0));
    }
    auto a = schedule->initial_history(torch::ones({4})).unsqueeze(0);
    auto b = a.clone();
    torch::NoGradGuard no_grad;
    torch::Tensor step_a, step_b;
    for (int64_t t = 1; t <= 420; ++t) {
      fo::ScheduleSignals early;
      if (t <= 20) early.fraction = 1.0;
      auto [da, na] = schedule->decide(a, t, early);
      auto [db, nb] = schedule->decide(b, t, {});
      const auto sums = torch::tensor({{0.1, 1.0, 1.0, 4.0}}, torch::kDouble);
      a = Impl::record(na, sums, torch::tensor({4.0}));
      b = Impl::record(nb, sums, torch::tensor({4.0}));
      step_a = da.step_size;
      step_b = db.step_size;
    }
    const double relative_difference = ((step_a - step_b).abs() / step_b).item<double>();
    // 1e-5: a hundred times float32 rounding (the memory is read in float); the EMA's
    // early steps weigh 0.999^400 of their first share, ~1e-4 of the decision here.
    if (memory != fo::Memory::kNone)
      EXPECT_GT(relative_difference, 1e-5)
          << fo::memory_name(memory) << ": the first steps still count at step 420";
    else
      EXPECT_LT(relative_difference, 1e-12) << "no memory: only the loss's running averages";
  }
}

TEST_F(LearnedSchedule, EMAMemory_HoldsTheExponentialAverageOfItsProjectedFeatures) {
  // Double-precision reference: channel c keeps a_t = gamma_c a_{t-1} + (1 - gamma_c) v_t from
  // a_0 = 0, v_t = value(features_t), gamma_c = sigmoid(discount_logit_c); its initial time scales
  // 1 / (1 - gamma) spread over half a decade up to the FLT memory's 1000 steps.
  auto schedule = perturbed_schedule(fo::Memory::kEMA, 6);
  const auto& o = schedule->options;
  ASSERT_EQ(schedule->history_size(), Impl::kHistory + o.value_dim());
  const auto gamma = torch::sigmoid(schedule->discount_logit.to(torch::kDouble));
  ASSERT_EQ(gamma.numel(), o.value_dim());
  EXPECT_NEAR(1.0 / (1.0 - gamma[-1].item<double>()), 1000.0, 1e-2);
  EXPECT_NEAR(1.0 / (1.0 - gamma[0].item<double>()), 1.0 + 999.0 / std::sqrt(10.0), 1e-2);
  torch::NoGradGuard no_grad;
  auto h = schedule->initial_history(torch::randn({6})).unsqueeze(0);
  auto average = torch::zeros({o.value_dim()}, torch::kDouble);
  const auto sums = torch::tensor({{0.1, 1.0, 1.0, 4.0}}, torch::kDouble);
  for (int64_t t = 1; t <= 30; ++t) {
    fo::ScheduleSignals signals;
    signals.loss = 1.0 / t;
    const auto x = schedule->features(h, t, signals).to(torch::kDouble);  // (1, F)
    const auto v = at::linear(x, schedule->value->weight.to(torch::kDouble),
                              schedule->value->bias.to(torch::kDouble))[0];
    average = gamma * average + (1 - gamma) * v;
    auto [decision, next] = schedule->decide(h, t, signals);
    EXPECT_TRUE(all_close(next[0].narrow(0, Impl::kHistory, o.value_dim()), average, 1e-5, 1e-6))
        << "step " << t;
    h = Impl::record(next, sums, torch::tensor({4.0}));
  }
  // A discount whose float sigmoid rounds to 1 is held at 1 - 1e-6: finite reads, no NaN.
  schedule->discount_logit.fill_(40.0);
  auto fresh = schedule->initial_history(torch::randn({6})).unsqueeze(0);
  for (int64_t t = 1; t <= 3; ++t) {
    auto [decision, next] = schedule->decide(fresh, t, {});
    ASSERT_TRUE(torch::isfinite(next.narrow(1, Impl::kHistory, o.value_dim())).all().item<bool>())
        << "step " << t;
    ASSERT_TRUE(torch::isfinite(decision.step_size).all().item<bool>()) << "step " << t;
    fresh = Impl::record(next, sums, torch::tensor({4.0}));
  }
}

TEST_F(LearnedSchedule, UntrainedHead_LeavesTheMemoryUnsteppedAndDecidesAlike) {
  // With the head's last layer zero the decisions cannot depend on the memory: it is not stepped
  // (its slots keep their state), and the decisions equal those of the same schedule whose memory
  // is stepped (made to by a last layer that is zero but for one weight, scaled to 0 on the way).
  fo::LearnedSchedule schedule;
  auto h = schedule->initial_history(torch::randn({6})).unsqueeze(0);
  const auto memory_slots = [&](const torch::Tensor& x) {
    return x.narrow(1, Impl::kHistory, schedule->history_size() - Impl::kHistory);
  };
  const auto sums = torch::tensor({{0.1, 1.0, 1.0, 4.0}}, torch::kDouble);
  torch::NoGradGuard no_grad;
  for (int64_t t = 1; t <= 5; ++t) {
    auto [decision, next] = schedule->decide(h, t, {});
    EXPECT_TRUE(torch::equal(memory_slots(next), memory_slots(h))) << "step " << t;
    schedule->head_out->weight[0][0] = 1e-30;  // reads the memory; the decision moves by ~1e-30
    auto [stepped_decision, stepped] = schedule->decide(h, t, {});
    schedule->head_out->weight.zero_();
    EXPECT_FALSE(torch::equal(memory_slots(stepped), memory_slots(h))) << "step " << t;
    EXPECT_TRUE(all_close(decision.step_size, stepped_decision.step_size, 1e-12, 0.0));
    h = Impl::record(next, sums, torch::tensor({6.0}));
  }
}

// ---- signals, contract, save and load ----------------------------------------------------------

TEST_F(LearnedSchedule, Signals_ReachTheFeatures) {
  fo::LearnedSchedule schedule;
  auto h = schedule->initial_history(torch::ones({3})).unsqueeze(0);
  const auto none = schedule->features(h, 5, {});
  EXPECT_EQ(none.sizes(), torch::IntArrayRef({1, Impl::kFeatures}));
  EXPECT_EQ(none[0][11].item<double>(), 0.0) << "loss mask";
  EXPECT_EQ(none[0][15].item<double>(), 0.0) << "fraction mask";
  EXPECT_EQ(none[0][17].item<double>(), 0.0) << "validation mask";
  EXPECT_NEAR(none[0][0].item<double>(), std::tanh(0.5), 1e-12);
  const auto all = schedule->features(h, 5, {2.0, 0.25, 0.8});
  EXPECT_EQ(all[0][11].item<double>(), 1.0);
  EXPECT_EQ(all[0][15].item<double>(), 1.0);
  EXPECT_EQ(all[0][16].item<double>(), 0.25);
  EXPECT_EQ(all[0][17].item<double>(), 1.0);
  // A loss twice its running average reads asinh(1).
  torch::NoGradGuard no_grad;
  auto [decision, next] = schedule->decide(h, 1, {1.0, std::nullopt, std::nullopt});
  const auto after = schedule->features(next, 2, {2.0, std::nullopt, std::nullopt});
  EXPECT_NEAR(after[0][12].item<double>(), std::asinh(1.0), 1e-9);
  EXPECT_NEAR(after[0][14].item<double>(), std::asinh(1.0), 1e-9) << "against the minimum";
  // A non-finite loss is ignored, not averaged in.
  auto [unused, ignored] = schedule->decide(next, 2, {NAN, std::nullopt, std::nullopt});
  EXPECT_TRUE(at::isclose(ignored.narrow(1, 0, Impl::kHistory), next.narrow(1, 0, Impl::kHistory),
                          0.0, 0.0, /*equal_nan=*/true)
                  .all()
                  .item<bool>());
}

TEST_F(LearnedSchedule, StepWithClosure_FeedsTheLossAndReturnsIt) {
  auto x = torch::tensor({1.0f, -2.0f}).requires_grad_(true);
  fo::ScheduleMnemosyne opt({x}, schedule_options());
  auto loss = opt.step([&] {
    opt.zero_grad();
    auto l = (x * x).sum();
    l.backward();
    return l;
  });
  EXPECT_FLOAT_EQ(loss.item<float>(), 5.0f);
  const auto& st =
      static_cast<const fo::ScheduleMnemosyneParamState&>(*opt.state().begin()->second);
  EXPECT_DOUBLE_EQ(st.history()[11].item<double>(), 5.0) << "the loss's running average";
}

TEST_F(LearnedSchedule, SaveLoad_ContinuesExactly) {
  auto schedule = perturbed_schedule(fo::Memory::kFLT, 6);
  auto x = torch::randn({30}).requires_grad_(true), w = torch::randn({4, 4}).requires_grad_(true);
  auto x2 = x.detach().clone().requires_grad_(true), w2 = w.detach().clone().requires_grad_(true);
  fo::ScheduleMnemosyne straight({x, w}, schedule_options(), schedule);
  fo::ScheduleMnemosyne first({x2, w2}, schedule_options(), schedule);
  for (int s = 0; s < 5; ++s) {
    quadratic_step(straight, x, w);
    quadratic_step(first, x2, w2);
  }
  std::stringstream buffer;
  torch::save(first, buffer);
  // Built with the untrained schedule: the archive restores the schedule with the state.
  fo::ScheduleMnemosyne second({x2, w2}, schedule_options());
  torch::load(second, buffer);
  for (int s = 0; s < 5; ++s) {
    quadratic_step(straight, x, w);
    quadratic_step(second, x2, w2);
  }
  EXPECT_TRUE(torch::equal(x, x2));
  EXPECT_TRUE(torch::equal(w, w2));
}

TEST_F(LearnedSchedule, StateOfVersion0_1_LoadsAndContinuesExactly) {
  // Saved by the one Mnemosyne class of version 0.1 with design tensor-schedule (its per-parameter
  // entries then named "state" and "controller").
  const auto [x, expected] = continue_version_0_1_state<fo::ScheduleMnemosyne>("tensor_schedule");
  EXPECT_TRUE(torch::equal(x, expected)) << x << expected;
}

TEST_F(LearnedSchedule, WeightsFile_RoundTripAndErrors) {
  const auto path = temp_path("schedule.pt");
  auto schedule = perturbed_schedule(fo::Memory::kPerformer, 1);
  fo::save_schedule(schedule, path);
  auto loaded = fo::load_schedule(path);
  EXPECT_EQ(loaded->options.memory(), fo::Memory::kPerformer);
  EXPECT_TRUE(loaded->options.anneal_decay());
  fo::save_schedule(fo::LearnedSchedule(fo::LearnedScheduleOptions().anneal_decay(false)), path);
  EXPECT_FALSE(fo::load_schedule(path)->options.anneal_decay());
  fo::save_schedule(schedule, path);
  const auto a = schedule->parameters(), b = loaded->parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i]));
  fo::ScheduleMnemosyne by_path({torch::zeros({2}, torch::requires_grad())},
                                schedule_options().weights(path));
  EXPECT_EQ(by_path.schedule()->options.memory(), fo::Memory::kPerformer);
  expect_error([] { fo::load_schedule("/nonexistent/schedule.pt"); },
               {"cannot open", "/nonexistent/schedule.pt"});
  const auto first_design = temp_path("first_design.pt");
  fo::save_model(fo::LearnedOptimizerModel(), first_design);
  expect_error([&] { fo::load_schedule(first_design); }, {"not a schedule", "tensor-schedule"});
}

TEST_F(LearnedSchedule, LearnedDecisions_StayWithinTheirBounds) {
  // However large the head's weights, the step stays within [e^low, e^high] of the untrained rule's
  // and the decay within (0, max_shrink]; a zero head gives exactly the untrained rule.
  const auto options =
      fo::LearnedScheduleOptions().log_step_low(-2.0).log_step_high(0.5).max_shrink(1e-3);
  fo::LearnedSchedule untrained(options), wild(options);
  {
    torch::NoGradGuard no_grad;
    wild->head_out->weight.normal_(0.0, 100.0);
    wild->head_out->bias.normal_(0.0, 100.0);
  }
  auto histories = torch::stack({untrained->initial_history(torch::randn({5, 3})),
                                 untrained->initial_history(torch::randn({7}) * 10),
                                 untrained->initial_history(torch::zeros({4}))});
  histories = Impl::record(histories, torch::rand({3, Impl::kStatistics}) * 4,
                           torch::tensor({15.0, 7.0, 4.0}, torch::kDouble));
  for (int64_t t : {1, 50, 2000}) {
    const auto base = untrained->decide(histories, t, {}).first;
    const auto learned = wild->decide(histories, t, {}).first;
    const auto log_ratio = (learned.step_size / base.step_size).log();
    EXPECT_TRUE((log_ratio >= -2.0 - 1e-9).all().item<bool>()) << log_ratio;
    EXPECT_TRUE((log_ratio <= 0.5 + 1e-9).all().item<bool>()) << log_ratio;
    EXPECT_TRUE((learned.shrink > 0).all().item<bool>() &&
                (learned.shrink <= 1e-3).all().item<bool>())
        << learned.shrink;
    EXPECT_NEAR(base.shrink[0].item<double>(), 1.0 / (1.0 + std::exp(11.0)), 1e-12);
  }
  // Saved and loaded, the bounds come back with the weights.
  const auto path = temp_path("bounded_schedule.pt");
  fo::save_schedule(wild, path);
  const auto loaded = fo::load_schedule(path);
  EXPECT_EQ(loaded->options.log_step_low(), -2.0);
  EXPECT_EQ(loaded->options.log_step_high(), 0.5);
  EXPECT_EQ(loaded->options.max_shrink(), 1e-3);
}

TEST_F(LearnedSchedule, BadInput_NamesTheProblem) {
  expect_error([] { fo::LearnedSchedule(fo::LearnedScheduleOptions().log_step_low(0.5)); },
               {"log_step_low < 0 < log_step_high", "0.5"});
  expect_error([] { fo::LearnedSchedule(fo::LearnedScheduleOptions().max_shrink(2.0)); },
               {"max_shrink", "2"});
  expect_error([] { fo::LearnedSchedule(fo::LearnedScheduleOptions().hidden(0)); },
               {"hidden must be positive", "0"});
  expect_error([] { fo::LearnedSchedule(fo::LearnedScheduleOptions().relative_step(-1)); },
               {"relative_step", "-1"});
  fo::LearnedSchedule schedule;
  expect_error(
      [&] {
        schedule->features(torch::zeros({2, 3}, torch::kDouble), 1, {});
      },
      {"histories must be (S, ", "[2, 3]"});
  expect_error(
      [&] { schedule->features(schedule->initial_history(torch::ones(1)).unsqueeze(0), 0, {}); },
      {"step index must be >= 1", "0"});
  expect_error(
      [&] {
        Impl::record(torch::zeros({1, 30}, torch::kDouble), torch::zeros({1, 3}), torch::ones({1}));
      },
      {"record", "[1, 3]"});
  // The fused pass names what it cannot take.
  expect_error(
      [] {
        flt::kernels::schedule_step_({torch::zeros(4)}, {torch::zeros(4, torch::kDouble)},
                                     {torch::zeros({2, 4})}, {}, {{}});
      },
      {"tensor 0 is not one the fused pass takes", "grad [4] Double"});
  expect_error(
      [] {
        flt::kernels::schedule_step_({torch::zeros(4)}, {torch::zeros(4)}, {torch::zeros({2, 4})},
                                     {}, {});
      },
      {"as many gradients, moments and decisions as parameters (1)", "1, 1 and 0"});
  // A CoordinateMnemosyne state is not a ScheduleMnemosyne one: the error names the class to use.
  auto x = torch::randn({3}).requires_grad_(true);
  fo::CoordinateMnemosyne first({x});
  x.mutable_grad() = torch::ones({3});
  first.step();
  std::stringstream buffer;
  torch::save(first, buffer);
  fo::ScheduleMnemosyne second({x}, schedule_options());
  expect_error([&] { torch::load(second, buffer); },
               {"ScheduleMnemosyne::load", "coordinate-memory", "flt::optim::CoordinateMnemosyne"});
  expect_error(
      [&] { fo::ScheduleMnemosyne({x}, schedule_options().untrained(true).weights("a.pt")); },
      {"untrained(true) and weights(\"a.pt\") contradict"});
}

// ---- behaviour ------------------------------------------------------------------------------

TEST_F(LearnedSchedule, Untrained_TrainsAnMLPOnXOR) {
  torch::manual_seed(1);
  auto l1 = torch::nn::Linear(2, 8), l2 = torch::nn::Linear(8, 1);
  std::vector<torch::Tensor> params = l1->parameters();
  for (auto& p : l2->parameters()) params.push_back(p);
  fo::ScheduleMnemosyne opt(params, schedule_options(5.0));
  const auto x = torch::tensor({{0.f, 0.f}, {0.f, 1.f}, {1.f, 0.f}, {1.f, 1.f}});
  const auto y = torch::tensor({{0.f}, {1.f}, {1.f}, {0.f}});
  double loss = 0;
  for (int s = 0; s < 600; ++s) {
    opt.zero_grad();
    auto l = (l2(torch::tanh(l1(x))) - y).pow(2).mean();
    l.backward();
    opt.step();
    loss = l.item<double>();
  }
  // lr 5: the untrained schedule's relative step rho = 0.02 of each tensor's RMS, times 5 = 0.1.
  // 0.02: a mean square error over the 4 cases below which every output is within
  // sqrt(4 * 0.02) = 0.28 of its 0/1 target (XOR solved with a margin); measured < 1e-5 after the
  // 600 steps (build/tests/test_learned_schedule --gtest_filter='*XOR*').
  EXPECT_LT(loss, 0.02);
}

// ---- settling under pure noise (the untrained schedule, the design's default) ----------------

// 10,000 coordinates fed N(0, 1) gradients for 5000 steps, x_0 = 0, lr 1. With x_0 = 0 the
// reference scale is the floor (the cap 16 mean(x_0^2) is 0), so eta_t = rho floor exp(G_t) =
// 2e-4 exp(G_t). G moves by kappa (c_t - c0) = 0.1 (c_t - 0.05) a step from step 2, c_t the
// 0.9-average of cos(g_t, m / sqrt(v) before g_t): g_t is independent of it, so each cosine is
// N(0, 1 / 10^4) and their sum over 600 steps N(0, 0.06), 0.245 sd, i.e. 0.0245 in G. Hence G
// falls 0.005 a step and reaches its floor -3 at step 601 +- 5 (1 sd): above it at step 550
// (-2.745, 10 sd), on it from step 650 (-3.245, 10 sd) to the end (leaving it needs c_t > 0.05,
// 20 sd of the averaged cosine). The walk: the increments eta_t m_hat / sqrt(v_hat) are
// uncorrelated beyond m's ~10-step memory, each of mean square eta_t^2 (m sums to g, v ~ 1), and
// the untrained decoupled decay s = sigmoid(-11) shrinks x by (1 - s) a step, so E[RMS(x_T)^2] =
// W_T, W_t = (1 - s)^2 W_{t-1} + eta_t^2, from the step sizes taken: RMS(x_5000) / RMS(x_1000) =
// sqrt(W_5000 / W_1000) (0.98 here: the decay outweighs the settled step's walk; sqrt(5) = 2.24
// for a constant step), within 0.03 (20 sd of the sampling error of 10^4 coordinates, as in
// Mnemosyne.PureNoiseGradients_*); and no further than Adam at lr 1e-3, whose walk reaches
// 1e-3 sqrt(5000) = 0.0707.
TEST_F(LearnedSchedule, PureNoiseGradients_TheHandRuleSettlesTheStep) {
  torch::manual_seed(0);
  auto x = torch::zeros({10000}).requires_grad_(true);
  fo::ScheduleMnemosyne opt({x}, schedule_options());
  const double first = 0.02 * 0.01, floor_step = first * std::exp(-3.0);
  const double keep = 1.0 - 1.0 / (1.0 + std::exp(11.0));
  double walk = 0.0, walk_1000 = 0.0, rms_1000 = 0.0;
  for (int t = 1; t <= 5000; ++t) {
    x.mutable_grad() = torch::randn({10000});
    opt.step();
    const double eta = opt.step_sizes()[0];
    walk = keep * keep * walk + eta * eta;
    if (t == 1) EXPECT_NEAR(eta, first, 1e-6 * first);
    if (t == 550) EXPECT_GT(eta, 1.05 * floor_step) << "G is still above its floor";
    if (t >= 650) ASSERT_NEAR(eta, floor_step, 1e-5 * floor_step) << "step " << t;
    if (t == 1000) {
      walk_1000 = walk;
      rms_1000 = x.detach().pow(2).mean().sqrt().item<double>();
    }
  }
  const double rms = x.detach().pow(2).mean().sqrt().item<double>();
  const double walk_ratio = std::sqrt(walk / walk_1000);
  std::printf(
      "  pure noise: RMS displacement %.4g after 1000 and %.4g after 5000 steps (ratio "
      "%.4f, the decayed walk of the steps taken %.4f); step %.3g -> %.3g\n",
      rms_1000, rms, rms / rms_1000, walk_ratio, first, opt.step_sizes()[0]);
  EXPECT_NEAR(rms / rms_1000, walk_ratio, 0.03);
  EXPECT_LT(rms, 1e-3 * std::sqrt(5000.0)) << "no further than Adam at lr 1e-3";
}
