// Meta-training of the learned optimizer: the task families it trains on, and the estimators'
// behaviour (improvement, resume, determinism, late emphasis).
#include <ATen/CPUGeneratorImpl.h>
#include <torch/optim/adam.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <set>

#include "flt/metatrain/datasets.h"
#include "flt/metatrain/meta_train.h"
#include "flt/metatrain/tasks.h"
#include "flt/optim/mnemosyne.h"
#include "learned_optimizer_util.h"
#include "test_util.h"

namespace fo = flt::optim;

namespace fm = flt::metatrain;
using namespace flt::testing;

namespace {

class Tasks : public flt::testing::SeededTest {};
class MetaTrain : public flt::testing::SeededTest {};

}  // namespace

TEST_F(Tasks, EveryFamilyIsFiniteAndDeterministic) {
  for (auto family : fm::all_task_families()) {
    auto gen_a = at::make_generator<at::CPUGeneratorImpl>(5);
    auto gen_b = at::make_generator<at::CPUGeneratorImpl>(5);
    auto a = fm::sample_task(family, gen_a);
    auto b = fm::sample_task(family, gen_b);
    const auto start = a->initial(gen_a);
    EXPECT_TRUE(torch::equal(start, b->initial(gen_b))) << a->name();
    auto p = start.clone().requires_grad_(true);
    auto noise = at::make_generator<at::CPUGeneratorImpl>(1);
    auto loss = a->loss(p, noise);
    loss.backward();
    EXPECT_TRUE(std::isfinite(loss.item<double>())) << a->name();
    EXPECT_TRUE(torch::isfinite(p.grad()).all().item<bool>()) << a->name();
    EXPECT_GT(p.grad().abs().sum().item<double>(), 0.0) << a->name();
    EXPECT_EQ(a->family(), family);
    EXPECT_EQ(fm::task_family_from_name(fm::task_family_name(family)), family);
    const auto sizes = a->segments();
    EXPECT_EQ(std::accumulate(sizes.begin(), sizes.end(), int64_t{0}), a->dim()) << a->name();
    const auto& real = fm::real_task_families();
    const bool is_real = std::find(real.begin(), real.end(), family) != real.end();
    // Held-out data: the real families and the synthetic tabular problems.
    EXPECT_EQ(a->has_validation(), is_real || family == fm::TaskFamily::kTabular) << a->name();
    if (is_real) {
      const auto held_out = a->validation_loss(p, noise).item<double>();
      EXPECT_TRUE(std::isfinite(held_out)) << a->name();
      // At the initial point every class is about equally likely: loss near log(classes). The
      // read-out's weights are N(0, 1/n) and its bias 0, so given its input h the C logits are
      // N(0, mean h^2) each, and over the draw E[CE] - log C = E[log mean_c e^z_c] - E[z_y] lies
      // in [0, mean h^2 / 2] (Jensen, both ways); mean h^2 <= 1 (standardised pixels, ReLU
      // features of them, GRU states in (-1, 1)), so the expectation is within 0.5. One draw's
      // weights are shared by every example, which adds class biases of the same order: measured
      // +0.41 (fashion_mlp), +0.60 (fashion_logistic), +0.00 (text_gru) at this seed. 1.0 is
      // twice the expectation's bound; a wrong label set, a scale error of the logits or a loss
      // of other units lands far outside it (old check: < 2 ln 100 = 9.2).
      const int64_t classes =
          family == fm::TaskFamily::kTextGRU ? fm::data::licence_text().vocab : 10;
      EXPECT_NEAR(a->eval_loss(p).item<double>(), std::log(static_cast<double>(classes)), 1.0)
          << a->name() << " (" << classes << " classes)";
    }
  }
  expect_error([] { fm::task_family_from_name("mnist"); }, {"unknown task family", "mnist"});
}

TEST_F(Tasks, TabularProblemsSpanTheirRangesAndHoldDataOut) {
  // 40 instances: every model kind and both batch modes appear; training and held-out losses are
  // finite and positive at the initial point.
  std::set<std::string> kinds;
  bool full_batch = false, mini_batch = false;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    const auto task = fm::sample_task(fm::TaskFamily::kTabular, gen);
    const std::string name = task->name();
    kinds.insert(name.substr(0, name.find('(')));
    (name.find("full batch") != std::string::npos ? full_batch : mini_batch) = true;
    const auto p = task->initial(gen);
    const double train = task->eval_loss(p).item<double>();
    const double held_out = task->validation_loss(p, gen).item<double>();
    ASSERT_TRUE(std::isfinite(train) && std::isfinite(held_out)) << name;
    EXPECT_GT(train, 0.0) << name;
    EXPECT_GT(held_out, 0.0) << name;
  }
  EXPECT_EQ(kinds, (std::set<std::string>{"tabular_linear", "tabular_logistic", "tabular_mlp"}));
  EXPECT_TRUE(full_batch && mini_batch);
  // Learnable: Adam (lr 1e-2, 300 steps) lowers the training loss of each of 5 instances by a
  // quarter or more.
  for (uint64_t seed = 0; seed < 5; ++seed) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(100 + seed);
    const auto task = fm::sample_task(fm::TaskFamily::kTabular, gen);
    auto p = task->initial(gen).requires_grad_(true);
    const double before = task->eval_loss(p).item<double>();
    torch::optim::Adam adam({p}, torch::optim::AdamOptions(1e-2));
    for (int t = 0; t < 300; ++t) {
      adam.zero_grad();
      task->loss(p, gen).backward();
      adam.step();
    }
    EXPECT_LT(task->eval_loss(p).item<double>(), 0.75 * before) << task->name();
  }
  // The shipped recipe's families leave the tabular problems out (its files still reproduce).
  const auto recipe = fm::shipped_recipe_families();
  EXPECT_EQ(std::count(recipe.begin(), recipe.end(), fm::TaskFamily::kTabular), 0);
  EXPECT_EQ(recipe.size() + 1, fm::all_task_families().size());
  EXPECT_EQ(fm::MetaTrainOptions{}.families().size(), recipe.size());
}

namespace {

fm::MetaTrainOptions tiny_meta(fm::MetaEstimator estimator, int64_t iterations) {
  fm::MetaTrainOptions o;
  o.families({fm::TaskFamily::kNoisyQuadratic, fm::TaskFamily::kRosenbrock});
  o.sampling().min_dim = 2;
  o.sampling().max_dim = 4;
  o.estimator(estimator);
  o.iterations(iterations);
  o.workers(4);
  o.unroll(5);
  o.horizon(20);
  o.meta_lr(1e-2);
  o.progress(false);
  o.seed(3);
  return o;
}

/// Mean over fixed held-out quadratic/Rosenbrock instances of log(final / initial) after 40 steps.
double held_out_objective(fo::LearnedOptimizerModel model) {
  double total = 0.0;
  int count = 0;
  for (uint64_t seed = 100; seed < 106; ++seed) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    auto task =
        fm::sample_task(seed % 2 ? fm::TaskFamily::kNoisyQuadratic : fm::TaskFamily::kRosenbrock,
                        gen, tiny_meta(fm::MetaEstimator::kPES, 1).sampling());
    auto p = task->initial(gen).requires_grad_(true);
    const double initial = task->eval_loss(p).item<double>();
    auto opt = fo::CoordinateMnemosyne({p}, fo::CoordinateMnemosyneOptions(), model);
    auto noise = at::make_generator<at::CPUGeneratorImpl>(seed);
    for (int s = 0; s < 40; ++s) {
      opt.zero_grad();
      task->loss(p, noise).backward();
      opt.step();
    }
    total += std::log(task->eval_loss(p).item<double>() / initial);
    ++count;
  }
  return total / count;
}

}  // namespace

TEST_F(MetaTrain, MetaTraining_ImprovesTheHeldOutObjective) {
  torch::manual_seed(0);
  auto model = untrained(fo::Memory::kFLT);
  const double before = held_out_objective(model);
  const auto history = fm::meta_train(model, tiny_meta(fm::MetaEstimator::kTruncatedBackprop, 40));
  const double after = held_out_objective(model);
  std::printf("  held-out mean log(final/initial): untrained %.3f -> meta-trained %.3f\n", before,
              after);
  EXPECT_EQ(history.size(), 40u);
  EXPECT_LT(after, before);
}

TEST_F(MetaTrain, MetaTraining_ResumesExactlyFromACheckpoint) {
  const auto path = temp_path("meta_ckpt.pt");
  std::remove(path.c_str());
  torch::manual_seed(0);
  auto straight = untrained(fo::Memory::kFLT);
  fm::meta_train(straight, tiny_meta(fm::MetaEstimator::kTruncatedBackprop, 8));
  torch::manual_seed(0);
  auto resumed = untrained(fo::Memory::kFLT);
  auto first = tiny_meta(fm::MetaEstimator::kTruncatedBackprop, 8);
  first.checkpoint(path);
  // An interrupted run: the last checkpoint is from the restart at iteration 4 (checkpoints are
  // written at restarts, every horizon / unroll = 4 iterations); iteration 5 is lost.
  struct Interrupted {};
  EXPECT_THROW(fm::meta_train(resumed, first,
                              [](const fm::MetaProgress& p) {
                                if (p.iteration == 6) throw Interrupted{};
                              }),
               Interrupted);
  torch::manual_seed(99);  // a different initial model: everything must come from the checkpoint
  auto continued = untrained(fo::Memory::kFLT);
  auto second = tiny_meta(fm::MetaEstimator::kTruncatedBackprop, 8);
  second.checkpoint(path);
  fm::meta_train(continued, second);
  const auto a = straight->parameters(), b = continued->parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i])) << "parameter " << i;
}

TEST_F(MetaTrain, MetaTraining_IsDeterministicBySeed) {
  const auto run = [](uint64_t seed, fm::MetaTrainTarget target) {
    torch::manual_seed(0);
    auto model = untrained(fo::Memory::kFLT);
    auto options = tiny_meta(fm::MetaEstimator::kPES, 6);
    options.seed(seed);
    options.horizon_max(40);  // variable horizons are drawn from the seed too
    options.target(target);
    fm::meta_train(model, options);
    return model;
  };
  const auto a = run(3, fm::MetaTrainTarget::kAll), b = run(3, fm::MetaTrainTarget::kAll),
             c = run(4, fm::MetaTrainTarget::kAll);
  const auto pa = a->parameters(), pb = b->parameters(), pc = c->parameters();
  bool differs = false;
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_TRUE(torch::equal(pa[i], pb[i])) << "parameter " << i;
    differs = differs || !torch::equal(pa[i], pc[i]);
  }
  EXPECT_TRUE(differs) << "another seed gives another model";
  // Target kController (--train controller) moves only the controller's scalars.
  torch::manual_seed(0);
  const auto fresh = untrained(fo::Memory::kFLT);
  const auto controller_only = run(3, fm::MetaTrainTarget::kController);
  for (const auto& item : controller_only->named_parameters()) {
    const auto& before = fresh->named_parameters()[item.key()];
    const bool controller = item.key().rfind("step_", 0) == 0;
    EXPECT_EQ(torch::equal(item.value(), before), !controller) << item.key();
  }
}

TEST_F(MetaTrain, PES_MovesTheModelWithFiniteEstimates) {
  torch::manual_seed(0);
  auto model = untrained(fo::Memory::kFLT);
  const auto before = model->head_out->weight.detach().clone();
  const auto history = fm::meta_train(model, tiny_meta(fm::MetaEstimator::kPES, 4));
  for (double h : history) EXPECT_TRUE(std::isfinite(h));
  EXPECT_FALSE(torch::equal(before, model->head_out->weight));
  expect_error([] { fm::meta_estimator_from_name("reinforce"); }, {"reinforce"});
  expect_error([] { fm::meta_train_target_from_name("head"); },
               {"head", "all, rule or controller"});
  for (auto target :
       {fm::MetaTrainTarget::kAll, fm::MetaTrainTarget::kRule, fm::MetaTrainTarget::kController})
    EXPECT_EQ(fm::meta_train_target_from_name(fm::meta_train_target_name(target)), target);
  auto bad = tiny_meta(fm::MetaEstimator::kPES, 4);
  bad.horizon(7);
  expect_error([&] { fm::meta_train(untrained(), bad); }, {"multiple of unroll", "7"});
  auto no_decay_floor = tiny_meta(fm::MetaEstimator::kPES, 4);
  no_decay_floor.meta_lr_end(0.0);
  expect_error([&] { fm::meta_train(untrained(), no_decay_floor); }, {"meta_lr_end", "0"});
  auto negative_emphasis = tiny_meta(fm::MetaEstimator::kPES, 4);
  negative_emphasis.late_emphasis(-1.0);
  expect_error([&] { fm::meta_train(untrained(), negative_emphasis); }, {"late_emphasis", "-1"});
}

TEST_F(MetaTrain, LateEmphasis_WeighsTheHorizonsEnd) {
  // One truncation per task (horizon = unroll), so an iteration's meta-loss is the weighted mean of
  // log(loss_t / loss_0) over the task's steps. The weights have mean 1 and grow with t, so on
  // tasks whose loss keeps falling the weighted mean lies below the plain one (Chebyshev's sum
  // inequality); equal only if the loss stood still.
  const auto first_loss = [](double late_emphasis) {
    torch::manual_seed(0);
    auto options = tiny_meta(fm::MetaEstimator::kPES, 1);
    options.horizon(options.unroll());
    options.late_emphasis(late_emphasis);
    return fm::meta_train(untrained(fo::Memory::kFLT), options).at(0);
  };
  const double plain = first_loss(0.0), late = first_loss(3.0);
  std::printf("  first meta-loss: plain %.4f, late emphasis 3: %.4f\n", plain, late);
  EXPECT_TRUE(std::isfinite(plain) && std::isfinite(late));
  EXPECT_LT(plain, 0.0) << "the tiny tasks' loss falls";
  EXPECT_LT(late, plain);
}
