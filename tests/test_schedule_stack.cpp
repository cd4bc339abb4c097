// ScheduleStack (learned_schedule.h): several schedules deciding at once as each alone would, the
// fused kernel of their memories and heads against the composite tensor operations, and a lone
// schedule's kept stack reading its weights as they are at each call.
#include <torch/serialize.h>

#include <cmath>
#include <limits>
#include <sstream>

#include "flt/optim/learned_schedule.h"
#include "learned_optimizer_util.h"
#include "test_util.h"

namespace fo = flt::optim;
using namespace flt::testing;
using Impl = fo::LearnedScheduleImpl;

namespace {

class ScheduleStack : public flt::testing::SeededTest {};

/// Three schedules of one memory: trained ones (their heads not zero) around an untrained one.
std::vector<fo::LearnedSchedule> trained_around_untrained(fo::Memory memory) {
  return {perturbed_schedule(memory, 1),
          fo::LearnedSchedule(fo::LearnedScheduleOptions().memory(memory)),
          perturbed_schedule(memory, 2)};
}

}  // namespace

// Several schedules deciding at once (an ES generation's candidates): each schedule's rows get
// what its own decide gives them, for every memory kind, with an untrained schedule among trained
// ones (its memory stays unstepped), over steps that cross the RPE rows' blocks.
TEST_F(ScheduleStack, DecidesForEachScheduleWhatItsOwnDecideGives) {
  for (auto memory : fo::all_memories()) {
    SCOPED_TRACE(fo::memory_name(memory));
    auto schedules = trained_around_untrained(memory);
    {
      torch::NoGradGuard
          no_grad;  // every weight differs between the trained ones, not just the head
      for (auto& p : schedules[2]->parameters()) p.add_(0.05 * torch::randn_like(p));
    }
    fo::ScheduleStack stack(schedules, /*rpe_block=*/4);
    std::vector<torch::Tensor> alone;
    for (size_t c = 0; c < schedules.size(); ++c) {
      std::vector<torch::Tensor> rows;
      for (int s = 0; s < 3; ++s)
        rows.push_back(schedules[c]->initial_history(torch::randn({5 + s})));
      alone.push_back(at::stack(rows));
    }
    auto together = at::stack(alone);
    torch::NoGradGuard no_grad;
    const fo::ScheduleSignals signals{std::nullopt, 0.25, std::nullopt};
    for (int64_t t = 1; t <= 10; ++t) {
      auto [decision, next] = stack.decide(together, t, signals);
      const auto sums = torch::rand({3, Impl::kStatistics}, torch::kDouble) + 0.1;
      for (size_t c = 0; c < schedules.size(); ++c) {
        const auto i = static_cast<int64_t>(c);
        auto [own, own_next] = schedules[c]->decide(alone[c], t, signals);
        EXPECT_TRUE(all_close(decision.step_size[i], own.step_size, 1e-6, 0.0)) << t << " " << c;
        EXPECT_TRUE(all_close(decision.shrink[i], own.shrink, 1e-6, 0.0)) << t << " " << c;
        EXPECT_TRUE(all_close(decision.gain[i], own.gain, 1e-5, 1e-7)) << t << " " << c;
        // Unseen signals are NaN in both: compared as a number neither holds.
        const auto filled = [](const torch::Tensor& x) { return at::nan_to_num(x, -7.0); };
        EXPECT_TRUE(all_close(filled(next[i]), filled(own_next), 1e-5, 1e-7)) << t << " " << c;
        alone[c] = Impl::record(own_next, sums, torch::full({3}, 6.0, torch::kDouble));
      }
      together = Impl::record(next.view({9, -1}), sums.repeat({3, 1}),
                              torch::full({9}, 6.0, torch::kDouble))
                     .view({3, 3, -1});
    }
    if (memory != fo::Memory::kNone) {
      const auto slots = schedules[1]->history_size() - Impl::kHistory;
      EXPECT_TRUE(torch::equal(together[1].narrow(1, Impl::kHistory, slots),
                               torch::zeros({3, slots}, torch::kDouble)))
          << "the untrained schedule's memory was stepped";
    }
  }
  // Schedules of other shapes or other random features cannot share a stack.
  expect_error(
      [] {
        fo::ScheduleStack(
            {fo::LearnedSchedule(), fo::LearnedSchedule(fo::LearnedScheduleOptions().hidden(8))});
      },
      {"schedule 1", "head's width"});
  expect_error(
      [] {
        fo::ScheduleStack(
            {fo::LearnedSchedule(), fo::LearnedSchedule(fo::LearnedScheduleOptions().seed(3))});
      },
      {"model 1", "other random features"});
  fo::ScheduleStack two({fo::LearnedSchedule(), fo::LearnedSchedule()});
  expect_error(
      [&] {
        two.decide(torch::zeros({3, 1, 98}, torch::kDouble), 1, {});
      },
      {"3 schedules' rows", "the stack has 2"});
}

// The fused kernel steps the memories and heads as the composite tensor operations do, for every
// memory kind, over more rows than one block of the kernel (a full block and a tail), with a zero
// head among trained ones, over steps that cross the RPE rows' blocks. Tolerances: the kernel's
// exp and tanh are polynomial approximations good to a few float ulp, and its sums run in another
// order; the memory carries the differences from step to step.
TEST_F(ScheduleStack, FusedKernelMatchesTheComposite) {
  constexpr int64_t kRows = 21;
  for (auto memory : fo::all_memories()) {
    SCOPED_TRACE(fo::memory_name(memory));
    auto schedules = trained_around_untrained(memory);
    fo::ScheduleStack fused(schedules, /*rpe_block=*/4), composite(schedules, 4, true);
    ASSERT_TRUE(fused.fused());
    ASSERT_FALSE(composite.fused());
    std::vector<torch::Tensor> rows;
    for (int64_t r = 0; r < 3 * kRows; ++r)
      rows.push_back(schedules[0]->initial_history(torch::randn({3 + r % 5})));
    auto h_fused = at::stack(rows).view({3, kRows, -1}), h_composite = h_fused.clone();
    torch::NoGradGuard no_grad;
    const fo::ScheduleSignals signals{1.5, 0.25, std::nullopt};
    const auto numels = torch::full({3 * kRows}, 6.0, torch::kDouble);
    for (int64_t t = 1; t <= 12; ++t) {
      auto [a, next_a] = fused.decide(h_fused, t, signals);
      auto [b, next_b] = composite.decide(h_composite, t, signals);
      EXPECT_TRUE(all_close(a.step_size, b.step_size, 1e-5, 0.0)) << "step " << t;
      EXPECT_TRUE(all_close(a.shrink, b.shrink, 1e-5, 0.0)) << "step " << t;
      // The gain is tanh of a head output, a float sum of terms of order 1 that cancel: the two
      // agree to a few 1e-7 absolute whatever its size.
      EXPECT_TRUE(all_close(a.gain, b.gain, 1e-5, 1e-6)) << "step " << t;
      const auto filled = [](const torch::Tensor& x) { return at::nan_to_num(x, -7.0); };
      EXPECT_TRUE(all_close(filled(next_a), filled(next_b), 1e-5, 1e-7)) << "step " << t;
      const auto sums = torch::rand({3 * kRows, Impl::kStatistics}, torch::kDouble) + 0.1;
      h_fused = Impl::record(next_a.view({3 * kRows, -1}), sums, numels).view({3, kRows, -1});
      h_composite = Impl::record(next_b.view({3 * kRows, -1}), sums, numels).view({3, kRows, -1});
    }
    // A NaN feature (a corrupt history) shows in its own row's decisions and nowhere else.
    auto corrupt = h_fused.clone();
    corrupt[0][4][7] = std::numeric_limits<double>::quiet_NaN();  // that row's summed g^2
    auto [decision, next] = fused.decide(corrupt, 13, signals);
    auto [clean, clean_next] = fused.decide(h_fused, 13, signals);
    EXPECT_TRUE(std::isnan(decision.step_size[0][4].item<double>()));
    decision.step_size[0][4] = clean.step_size[0][4];
    EXPECT_TRUE(torch::equal(decision.step_size, clean.step_size));
  }
}

// decide keeps its stack of the schedule between calls; it must still decide with the weights as
// they are at the call: after an in-place edit, a load, a replaced tensor, and not with a clone's.
TEST_F(ScheduleStack, LoneDecideReadsTheWeightsAsTheyAreNow) {
  auto schedule = perturbed_schedule(fo::Memory::kFLT, 1);
  const auto h = at::stack(
      {schedule->initial_history(torch::randn({5})), schedule->initial_history(torch::randn({7}))});
  torch::NoGradGuard no_grad;
  // The reference: a stack made for this call alone.
  const auto expect_fresh = [&](fo::LearnedSchedule& s, const std::string& label) {
    auto [decision, next] = s->decide(h, 3, {});
    auto [fresh, fresh_next] = fo::ScheduleStack({s}).decide(h.unsqueeze(0), 3, {});
    EXPECT_TRUE(torch::equal(decision.step_size, fresh.step_size[0])) << label;
    EXPECT_TRUE(torch::equal(decision.gain, fresh.gain[0])) << label;
    EXPECT_TRUE(torch::equal(at::nan_to_num(next, -7.0), at::nan_to_num(fresh_next[0], -7.0)))
        << label;
    return decision.gain.clone();
  };
  const auto first = expect_fresh(schedule, "first call");
  schedule->head_out->weight.mul_(2.0);
  schedule->head_out->bias.add_(0.2);  // read as a value when the stack is made
  schedule->query->weight.add_(0.1);
  const auto edited = expect_fresh(schedule, "after an in-place edit");
  EXPECT_FALSE(torch::equal(first, edited));
  std::stringstream saved;
  torch::save(perturbed_schedule(fo::Memory::kFLT, 2), saved);
  torch::load(schedule, saved);
  EXPECT_FALSE(torch::equal(expect_fresh(schedule, "after a load"), edited));
  schedule->head_out->weight.set_data(torch::zeros_like(schedule->head_out->weight));
  expect_fresh(schedule, "after set_data (the untrained rule)");
  auto copy = std::dynamic_pointer_cast<Impl>(schedule->clone());
  fo::LearnedSchedule clone(copy);
  clone->head_out->weight.normal_(0.0, 0.5);
  expect_fresh(clone, "a clone, edited");
  expect_fresh(schedule, "the original after its clone's edit");
}
