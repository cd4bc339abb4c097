// Episode ES (episode_es.h) on the batched engine: a generation is a function of the seed and its
// index, references are tuned once per instance (the grid's best, instance by instance) and kept,
// a candidate scores what its own runs score whatever else shares the batch, a campaign resumes
// exactly from its checkpoint, the update follows the sign of the antithetic differences, bad
// settings are named.
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "flt/metatrain/batched_run.h"
#include "flt/metatrain/episode_es.h"
#include "flt/metatrain/tuned_reference.h"
#include "test_util.h"

namespace fo = flt::optim;

namespace fm = flt::metatrain;
using namespace flt::testing;

namespace {

class EpisodeES : public SeededTest {};

fm::EpisodeESOptions tiny_options() {
  fm::EpisodeESOptions o;
  o.train_families({fm::BatchedFamily::kTabular, fm::BatchedFamily::kFactorization});
  o.validation_families({fm::BatchedFamily::kAutoencoder});
  o.pairs(2)
      .episodes(2)
      .instances(2)
      .min_steps(20)
      .max_steps(40)
      .validation_every(2)
      .validation_episodes(1)
      .seed(11);
  return o;
}

fo::LearnedSchedule small_schedule() {
  torch::manual_seed(0);
  return fo::LearnedSchedule(fo::LearnedScheduleOptions().key_dim(2).value_dim(2).hidden(4));
}

// theta_0 moved off the untrained head, so the memory is read and the corrector is on.
torch::Tensor trained_theta(const fm::EpisodeES& es) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(4);
  const auto theta0 = es.initial_state().theta;
  return theta0 + 0.05 * at::randn(theta0.sizes(), gen, at::kDouble);
}

/// Ranks that are threads of this process: each collective waits for every rank, then hands each
/// the list of what all of them gave, in rank order (the default allreduce sums it in that order).
class ThreadRanks {
 public:
  explicit ThreadRanks(int world) : world_(world), given_(static_cast<size_t>(world)) {}
  class Rank final : public flt::Communicator {
   public:
    Rank(ThreadRanks& ranks, int rank) : ranks_(ranks), rank_(rank) {}
    int rank() const override { return rank_; }
    int world_size() const override { return ranks_.world_; }
    std::vector<torch::Tensor> allgather(const torch::Tensor& local) override {
      return ranks_.gather(rank_, local);
    }
    void broadcast(torch::Tensor& tensor) override { tensor.copy_(allgather(tensor)[0]); }
    void barrier() override { allgather(torch::zeros({1})); }

   private:
    ThreadRanks& ranks_;
    int rank_;
  };

 private:
  std::vector<torch::Tensor> gather(int rank, const torch::Tensor& local) {
    std::unique_lock<std::mutex> lock(mutex_);
    given_[static_cast<size_t>(rank)] = local.clone();
    const int64_t round = round_;
    if (++arrived_ == world_) {
      all_ = given_;
      arrived_ = 0;
      ++round_;
      done_.notify_all();
    } else {
      done_.wait(lock, [&] { return round_ != round; });
    }
    return all_;
  }
  int world_;
  std::mutex mutex_;
  std::condition_variable done_;
  std::vector<torch::Tensor> given_, all_;
  int arrived_ = 0;
  int64_t round_ = 0;
};

}  // namespace

TEST_F(EpisodeES, AGenerationIsAFunctionOfSeedAndIndex) {
  fm::ReferenceCache references;
  fm::EpisodeES es(small_schedule(), tiny_options(), references);
  const auto a = es.batch(3), b = es.batch(3), c = es.batch(4);
  ASSERT_EQ(a.size(), 2u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].task->name(), b[i].task->name());
    EXPECT_EQ(a[i].task->seeds(), b[i].task->seeds());
    EXPECT_EQ(a[i].task->instances(), 2);
    EXPECT_EQ(a[i].spec.steps, b[i].spec.steps);
    EXPECT_EQ(a[i].spec.seed, b[i].spec.seed);
    EXPECT_GE(a[i].spec.steps, 20);
    EXPECT_LE(a[i].spec.steps, 40);
  }
  EXPECT_NE(a[0].spec.seed, c[0].spec.seed);
  for (const auto& episode : es.validation_set())
    EXPECT_EQ(episode.task->family(), fm::BatchedFamily::kAutoencoder);
}

// Draw 0 is the campaign's validation set; a fresh draw has the same families and size, other
// instances, and is the same every time it is drawn.
TEST_F(EpisodeES, FreshValidationDrawsAreNewAndRepeatable) {
  fm::ReferenceCache references;
  fm::EpisodeES es(small_schedule(), tiny_options().validation_episodes(3), references);
  const auto campaign = es.validation_set(), again = es.validation_set(0);
  const auto fresh = es.validation_set(1), fresh_again = es.validation_set(1);
  ASSERT_EQ(campaign.size(), 3u);
  ASSERT_EQ(fresh.size(), 3u);
  for (size_t i = 0; i < campaign.size(); ++i) {
    EXPECT_EQ(campaign[i].task->seeds(), again[i].task->seeds());
    EXPECT_EQ(campaign[i].spec.seed, again[i].spec.seed);
    EXPECT_EQ(fresh[i].task->seeds(), fresh_again[i].task->seeds());
    EXPECT_EQ(fresh[i].spec.steps, fresh_again[i].spec.steps);
    EXPECT_EQ(fresh[i].task->family(), fm::BatchedFamily::kAutoencoder);
    EXPECT_NE(fresh[i].task->seeds(), campaign[i].task->seeds());
    EXPECT_NE(fresh[i].spec.seed, campaign[i].spec.seed);
  }
  expect_error([&] { es.validation_set(-1); }, {"validation draw -1"});
}

// Instance k's reference is the best over the grid of AdamW-cosine runs of instance k alone; a
// second call reads the cache.
TEST_F(EpisodeES, ReferencesAreEachInstancesBestOverTheGridAndKept) {
  fm::ReferenceCache references;
  fm::EpisodeES es(small_schedule(), tiny_options(), references);
  const auto episodes = es.batch(0);
  const auto& episode = episodes[0];
  const auto tuned = es.references(episode);
  EXPECT_EQ(references.tuned(), 2);
  EXPECT_TRUE(torch::equal(tuned, es.references(episode)));
  EXPECT_EQ(references.tuned(), 2);
  const auto grid = fm::episode_reference_grid();
  const auto keys = fm::batched_reference_keys(*episode.task, episode.spec);
  ASSERT_EQ(keys.size(), 2u);
  EXPECT_NE(keys[0], keys[1]);
  for (int64_t k = 0; k < 2; ++k) {
    const auto one = episode.task->instance(k);
    double best = INFINITY;
    for (double lr : grid) {
      const auto loss = fm::batched_adamw_cosine_final_losses(*one, episode.spec,
                                                              torch::tensor({lr}, torch::kDouble));
      best = std::min(best, loss.item<double>());
    }
    // The grid's rows batched against one row at a time: float roundoff over the run.
    EXPECT_NEAR(tuned[k].item<double>(), best, 1e-4 * best) << "instance " << k;
    const auto* kept = references.find(keys[static_cast<size_t>(k)]);
    ASSERT_NE(kept, nullptr);
    EXPECT_EQ(kept->by_lr.size(), grid.size());
    EXPECT_EQ(kept->final_loss, tuned[k].item<double>());
  }
}

// Candidates share a batched run, yet each scores what its own runs score: the mean of
// reference_score over the episodes' instances of its schedule's final losses.
TEST_F(EpisodeES, ACandidateScoresItsOwnRunsWhateverSharesTheBatch) {
  fm::ReferenceCache references;
  fm::EpisodeES es(small_schedule(), tiny_options(), references);
  const auto episodes = es.batch(1);
  const auto theta0 = es.initial_state().theta, theta = trained_theta(es);
  const auto together = es.mean_scores({theta0, theta}, episodes);
  const auto alone = es.mean_scores({theta}, episodes);
  double expected = 0.0;
  int64_t count = 0;
  for (const auto& episode : episodes) {
    const auto losses =
        fm::batched_schedule_final_losses(*episode.task, episode.spec, es.schedule_at(theta));
    const auto reference = es.references(episode);
    for (int64_t k = 0; k < episode.task->instances(); ++k, ++count)
      expected += fm::reference_score(losses[k].item<double>(), reference[k].item<double>());
  }
  expected /= static_cast<double>(count);
  ASSERT_EQ(together.size(), 2u);
  EXPECT_NEAR(together[1], expected, 1e-6);
  EXPECT_NEAR(alone[0], expected, 1e-6);
  EXPECT_NE(together[0], together[1]);
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
  // Every instance of every candidate counted: (2 + 2 pairs) x 2 episodes x 2 instances x steps,
  // then the validation's two single-candidate runs.
  EXPECT_GT(first.inner_steps, 6 * 2 * 2 * 20);
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

// A best score kept from another validation set (char_gru's data is this repository's text, which
// can move between a campaign's invocations) is not compared with this set's: a process's first
// validation scores the best theta again, and the hand rule, and keeps the better.
TEST_F(EpisodeES, AResumedCampaignScoresItsBestAgainOnItsOwnValidationSet) {
  fm::ReferenceCache references;
  fm::EpisodeES es(small_schedule(), tiny_options(), references);
  auto state = es.initial_state();
  es.step(state);  // generation 0, not validated
  const auto best = state.theta.clone();
  state.best_theta = best;
  state.best_generation = 1;
  state.best_validation = -1.0;  // a score from elsewhere, better than any here
  fm::EpisodeES again(small_schedule(), tiny_options(), references);
  const auto record = again.step(state);  // generation 1, validated
  const double rescored = again.mean_scores({best}, again.validation_set())[0];
  EXPECT_TRUE(std::isfinite(rescored));
  EXPECT_EQ(state.best_validation,
            std::min({rescored, record.validation, record.validation_hand_rule}));
  EXPECT_GT(state.best_validation, -1.0);
}

// Ranks split a generation (the candidates of each episode, the references' grid; validation's one
// candidate by episodes): every rank takes the step one process takes, for 2 and 3 ranks (3 splits
// the 9 rates unevenly). The scores agree to rounding: a candidate's runs batched beside other
// candidates than in one process's batch may round differently in the last bits (the batched
// kernels choose their paths by size), carried by float32 runs of 20-40 steps to ~1e-8 in a score;
// the votes, and so the step, are the same.
TEST_F(EpisodeES, RanksSplittingAGenerationTakeTheStepOfOneProcess) {
  fm::ReferenceCache alone_references;
  fm::EpisodeES alone(small_schedule(), tiny_options().validation_every(1), alone_references);
  auto expected = alone.initial_state();
  const auto alone_record = alone.step(expected);
  for (int world : {2, 3}) {
    SCOPED_TRACE(world);
    ThreadRanks ranks(world);
    std::vector<fm::EpisodeESState> states(static_cast<size_t>(world));
    std::vector<fm::GenerationRecord> records(static_cast<size_t>(world));
    // Made here, one after another: small_schedule() seeds LibTorch's global generator.
    std::vector<fo::LearnedSchedule> schedules;
    for (int r = 0; r < world; ++r) schedules.push_back(small_schedule());
    std::vector<std::thread> threads;
    for (int r = 0; r < world; ++r) {
      threads.emplace_back([&, r] {
        fm::ReferenceCache references;
        fm::EpisodeES es(schedules[static_cast<size_t>(r)],
                         tiny_options().validation_every(1).communicator(
                             std::make_shared<ThreadRanks::Rank>(ranks, r)),
                         references);
        auto& state = states[static_cast<size_t>(r)];
        state = es.initial_state();
        records[static_cast<size_t>(r)] = es.step(state);
      });
    }
    for (auto& thread : threads) thread.join();
    for (int r = 0; r < world; ++r) {
      const auto& state = states[static_cast<size_t>(r)];
      const auto& record = records[static_cast<size_t>(r)];
      EXPECT_TRUE(torch::equal(state.theta, expected.theta)) << "rank " << r;
      EXPECT_TRUE(torch::equal(state.adam_v, expected.adam_v)) << "rank " << r;
      EXPECT_NEAR(record.perturbed_score, alone_record.perturbed_score, 1e-6) << "rank " << r;
      EXPECT_NEAR(record.validation, alone_record.validation, 1e-6) << "rank " << r;
      EXPECT_NEAR(record.validation_hand_rule, alone_record.validation_hand_rule, 1e-6)
          << "rank " << r;
      EXPECT_EQ(record.inner_steps, alone_record.inner_steps) << "rank " << r;
    }
  }
}

// With the step numbers fixed, ES perturbs and moves only the rest: after two generations the
// relative step, floor, growth rate and threshold are theta_0's and the head has moved; without
// the option the same generations move the step numbers too.
TEST_F(EpisodeES, FixedStepNumbersStayTheHandRules) {
  const auto mask = fm::step_numbers_mask(small_schedule());
  ASSERT_EQ(mask.sum().item<double>(), 4.0);  // step_log_relative, step_log_floor, growth_*
  for (bool fixed : {true, false}) {
    SCOPED_TRACE(fixed ? "fixed" : "free");
    fm::ReferenceCache references;
    fm::EpisodeES es(small_schedule(),
                     tiny_options().validation_every(100).fixed_step_numbers(fixed), references);
    auto state = es.initial_state();
    const auto theta0 = state.theta.clone();
    for (int g = 0; g < 2; ++g) es.step(state);
    const auto moved = (state.theta - theta0).abs();
    EXPECT_EQ((moved * mask).max().item<double>() == 0.0, fixed);
    EXPECT_GT((moved * (1 - mask)).max().item<double>(), 0.0);
  }
}

// The memory reaches the step only through the head's weights on its read: with them zeroed, a
// change to the memory's own numbers (discount, RPE spectrum, projections) moves no final loss,
// while with them kept it does. Without a memory the mask is empty.
TEST_F(EpisodeES, CuttingTheMemorysReadCutsEveryPathFromTheMemory) {
  const auto schedule = small_schedule();
  const auto read = fm::memory_read_mask(schedule);
  const auto in = schedule->head_in->weight.size(1);
  ASSERT_GT(in, fo::LearnedScheduleImpl::kFeatures);
  EXPECT_EQ(read.sum().item<double>(),
            static_cast<double>(4 * (in - fo::LearnedScheduleImpl::kFeatures)));  // hidden 4
  std::vector<torch::Tensor> parts;  // 1 at the memory's own numbers
  for (const auto& p : schedule->named_parameters()) {
    const bool own = p.key().rfind("head_", 0) != 0 && p.key().rfind("corrector_", 0) != 0 &&
                     p.key().rfind("step_", 0) != 0 && p.key().rfind("growth_", 0) != 0;
    parts.push_back(torch::full({p.value().numel()}, own ? 1.0 : 0.0, at::kDouble));
  }
  const auto memory_part = at::cat(parts);
  ASSERT_GT(memory_part.sum().item<double>(), 0.0);

  fm::ReferenceCache references;
  fm::EpisodeES es(schedule, tiny_options(), references);
  const auto episodes = es.batch(1);
  const auto& episode = episodes.front();
  auto gen = at::make_generator<at::CPUGeneratorImpl>(9);
  const auto nudge = 0.5 * memory_part * at::randn(memory_part.sizes(), gen, at::kDouble);
  const auto theta = trained_theta(es), cut = theta * (1 - read);
  const auto losses = [&](const torch::Tensor& t) {
    return fm::batched_schedule_final_losses(*episode.task, episode.spec, es.schedule_at(t));
  };
  EXPECT_TRUE(torch::equal(losses(cut), losses(cut + nudge)));
  EXPECT_FALSE(torch::equal(losses(theta), losses(theta + nudge)));

  torch::manual_seed(0);
  const fo::LearnedSchedule none(
      fo::LearnedScheduleOptions().memory(fo::Memory::kNone).key_dim(2).value_dim(2).hidden(4));
  EXPECT_EQ(fm::memory_read_mask(none).sum().item<double>(), 0.0);
}

TEST_F(EpisodeES, BadSettingsAreNamed) {
  fm::ReferenceCache references;
  auto overlap = tiny_options();
  overlap.validation_families().push_back(fm::BatchedFamily::kTabular);
  expect_error([&] { fm::EpisodeES(small_schedule(), overlap, references); },
               {"tabular", "both trained on and held out"});
  expect_error(
      [&] {
        fm::EpisodeES(small_schedule(), tiny_options().min_steps(50).max_steps(10), references);
      },
      {"min_steps", "50", "10"});
  expect_error([&] { fm::EpisodeES(small_schedule(), tiny_options().sigma(0), references); },
               {"sigma"});
  expect_error([&] { fm::EpisodeES(small_schedule(), tiny_options().instances(0), references); },
               {"instances"});
  fm::EpisodeES es(small_schedule(), tiny_options(), references);
  expect_error([&] { es.schedule_at(torch::zeros({3}, torch::kDouble)); }, {"theta has 3 numbers"});
}
