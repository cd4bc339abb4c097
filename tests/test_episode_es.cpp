// Episode ES (episode_es.h): a candidate's episode is the reference's run (same start, same
// batches), a generation is a function of the seed and its index, a campaign resumes exactly from
// its checkpoint, the update follows the sign of the antithetic differences, bad settings are
// named.
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <filesystem>

#include "flt/metatrain/episode_es.h"
#include "flt/metatrain/tasks.h"
#include "flt/metatrain/tuned_reference.h"
#include "test_util.h"

namespace fo = flt::optim;

namespace fm = flt::metatrain;
using namespace flt::testing;

namespace {

class EpisodeES : public SeededTest {};

fm::EpisodeESOptions tiny_options() {
  fm::EpisodeESOptions o;
  o.train_families({fm::TaskFamily::kTabular, fm::TaskFamily::kMLPRegression});
  o.validation_families({fm::TaskFamily::kMLPClassification});
  o.pairs(2)
      .tasks_per_generation(2)
      .min_steps(20)
      .max_steps(40)
      .validation_every(2)
      .validation_tasks(2)
      .seed(11);
  return o;
}

fo::LearnedSchedule small_schedule() {
  torch::manual_seed(0);
  return fo::LearnedSchedule(fo::LearnedScheduleOptions().key_dim(2).value_dim(2).hidden(4));
}

}  // namespace

TEST_F(EpisodeES, AnEpisodeIsDeterministicAndScoredOnHeldOutData) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(5);
  const auto task = fm::sample_task(fm::TaskFamily::kTabular, gen);
  const auto schedule = small_schedule();
  fm::EpisodeSpec spec;
  spec.steps = 50;
  spec.seed = 3;
  const double a = fm::schedule_final_loss(*task, spec, schedule);
  EXPECT_EQ(a, fm::schedule_final_loss(*task, spec, schedule));
  ASSERT_TRUE(std::isfinite(a));
  // Trained: below the held-out loss at the start (the same start the reference uses).
  auto init = fm::run_stream(spec.seed, fm::RunStream::kInitialPoint);
  auto batches = fm::run_stream(spec.seed, fm::RunStream::kBatches);
  EXPECT_LT(a, fm::held_out_loss(*task, task->initial(init).to(at::kFloat), batches));
  // Told its length, the step anneals: another run.
  spec.known_length = true;
  EXPECT_NE(a, fm::schedule_final_loss(*task, spec, schedule));
  spec.steps = 0;
  expect_error([&] { fm::schedule_final_loss(*task, spec, schedule); }, {"steps", "got 0"});
}

TEST_F(EpisodeES, AGenerationIsAFunctionOfSeedAndIndex) {
  fm::ReferenceCache references;
  fm::EpisodeES es(small_schedule(), tiny_options(), references);
  const auto a = es.batch(3), b = es.batch(3), c = es.batch(4);
  ASSERT_EQ(a.size(), 2u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first->name(), b[i].first->name());
    EXPECT_EQ(a[i].second.steps, b[i].second.steps);
    EXPECT_EQ(a[i].second.seed, b[i].second.seed);
    EXPECT_GE(a[i].second.steps, 20);
    EXPECT_LE(a[i].second.steps, 40);
  }
  EXPECT_NE(a[0].second.seed, c[0].second.seed);
  for (const auto& [task, spec] : es.validation_set())
    EXPECT_EQ(task->family(), fm::TaskFamily::kMLPClassification);
}

TEST_F(EpisodeES, ACampaignResumesExactlyFromItsCheckpoint) {
  const auto path = temp_path("es-state.pt");
  fm::ReferenceCache references;
  fm::EpisodeES es(small_schedule(), tiny_options(), references);
  auto straight = es.initial_state();
  es.step(straight);
  fm::save_es_state(straight, path);
  const auto first = es.step(straight);  // generation 1, validated (every 2)
  auto resumed = fm::load_es_state(path);
  fm::EpisodeES again(small_schedule(), tiny_options(), references);
  const auto second = again.step(resumed);
  EXPECT_TRUE(torch::equal(straight.theta, resumed.theta));
  EXPECT_TRUE(torch::equal(straight.adam_v, resumed.adam_v));
  EXPECT_EQ(first.theta_score, second.theta_score);
  EXPECT_EQ(first.validation, second.validation);
  EXPECT_TRUE(std::isfinite(first.validation));
  EXPECT_EQ(resumed.generation, 2);
  // The best so far is the better of theta and the hand rule on the validation set.
  EXPECT_EQ(straight.best_validation, std::min(first.validation, first.validation_hand_rule));
  EXPECT_TRUE(torch::equal(straight.best_theta, first.validation < first.validation_hand_rule
                                                    ? straight.theta
                                                    : es.initial_state().theta));
  // The first generation's theta is theta_0: scored as the hand rule on the same batch.
  fm::EpisodeES fresh(small_schedule(), tiny_options(), references);
  auto state = fresh.initial_state();
  const auto record = fresh.step(state);
  EXPECT_EQ(record.theta_score, record.hand_rule_score);
  EXPECT_TRUE(std::isnan(record.validation));  // not due at generation 1
  // Adam's first step moves every number by lr along the sign of the direction (or not at all).
  const auto moved = (state.theta - fresh.initial_state().theta).abs();
  EXPECT_LE(moved.max().item<double>(), 0.01 * (1 + 1e-6));
  EXPECT_GT(moved.max().item<double>(), 0.009);
  expect_error([&] { fm::load_es_state(temp_path("missing-es-state.pt")); },
               {"missing-es-state.pt"});
}

TEST_F(EpisodeES, BadSettingsAreNamed) {
  fm::ReferenceCache references;
  auto overlap = tiny_options();
  overlap.validation_families().push_back(fm::TaskFamily::kTabular);
  expect_error([&] { fm::EpisodeES(small_schedule(), overlap, references); },
               {"tabular", "both trained on and held out"});
  expect_error(
      [&] {
        fm::EpisodeES(small_schedule(), tiny_options().min_steps(50).max_steps(10), references);
      },
      {"min_steps", "50", "10"});
  expect_error([&] { fm::EpisodeES(small_schedule(), tiny_options().sigma(0), references); },
               {"sigma"});
  fm::EpisodeES es(small_schedule(), tiny_options(), references);
  expect_error([&] { es.schedule_at(torch::zeros({3}, torch::kDouble)); }, {"theta has 3 numbers"});
}
