// The batched task engine (batched_tasks.h, batched_run.h): every family's K instances are K
// independent problems (row k of the batch is instance(k) alone: loss, held-out loss, gradient),
// the rescaling augmentation leaves the function unchanged, the fused pass over rows is the list
// pass row by row, and a batched run ends where ScheduleMnemosyne (or AdamW with a cosine decay)
// takes each instance alone.
#include <torch/nn/functional/loss.h>
#include <torch/optim/adamw.h>

#include <cmath>

#include "batched_ops.h"
#include "flt/kernels/schedule_step.h"
#include "flt/metatrain/batched_run.h"
#include "flt/metatrain/batched_tasks.h"
#include "flt/metatrain/tuned_reference.h"
#include "test_util.h"

namespace fm = flt::metatrain;
namespace fo = flt::optim;
using namespace flt::testing;

namespace {

class BatchedTasks : public SeededTest {};

const std::vector<uint64_t> kSeeds = {11, 12, 13};

std::vector<torch::Tensor> row(const std::vector<torch::Tensor>& params, int64_t k) {
  std::vector<torch::Tensor> out;
  for (const auto& p : params) out.push_back(p.narrow(0, k, 1).detach().clone());
  return out;
}

std::vector<torch::Tensor> leaves(std::vector<torch::Tensor> params) {
  for (auto& p : params) p = p.detach().clone().requires_grad_(true);
  return params;
}

}  // namespace

TEST_F(BatchedTasks, EveryFamily_RowKIsInstanceKAlone) {
  for (auto family : fm::all_batched_families()) {
    for (uint64_t shape_seed : {1, 2}) {
      const auto task = fm::make_batched_task(family, shape_seed, kSeeds);
      SCOPED_TRACE(task->name());
      auto params = leaves(task->initial());
      ASSERT_EQ(params.size(), task->shapes().size());
      for (size_t i = 0; i < params.size(); ++i) {
        EXPECT_EQ(params[i].size(0), 3);
        EXPECT_EQ(params[i].sizes().slice(1), at::IntArrayRef(task->shapes()[i]));
      }
      const auto loss = task->loss(params, /*key=*/77);
      ASSERT_EQ(loss.sizes(), at::IntArrayRef({3}));
      EXPECT_TRUE(at::isfinite(loss).all().item<bool>());
      loss.sum().backward();
      const auto held_out = task->validation_loss(params).detach();
      ASSERT_EQ(held_out.sizes(), at::IntArrayRef({3}));
      for (int64_t k = 0; k < 3; ++k) {
        const auto one = task->instance(k);
        // Same data, same start, same mini-batch for the same key.
        auto alone = leaves(one->initial());
        for (size_t i = 0; i < alone.size(); ++i)
          EXPECT_TRUE(torch::equal(alone[i], row(params, k)[i])) << "tensor " << i;
        const auto loss_alone = one->loss(alone, 77);
        loss_alone.sum().backward();
        // Batched kernels may sum in another order than the single instance's: float roundoff.
        EXPECT_NEAR(loss_alone.item<double>(), loss[k].item<double>(),
                    1e-5 * (1 + std::fabs(loss[k].item<double>())));
        EXPECT_NEAR(one->validation_loss(alone).item<double>(), held_out[k].item<double>(),
                    1e-5 * (1 + std::fabs(held_out[k].item<double>())));
        for (size_t i = 0; i < alone.size(); ++i) {
          const auto g = params[i].grad().narrow(0, k, 1);
          EXPECT_TRUE(
              all_close(alone[i].grad(), g, 1e-4, 1e-6 * (1 + g.abs().max().item<double>())))
              << "gradient of tensor " << i << ", instance " << k;
        }
      }
    }
  }
}

TEST_F(BatchedTasks, GatherRows_IsIndexSelectPerInstanceAndItsGradientAddsBack) {
  const auto data = torch::randn({3, 5, 2, 2}, torch::kDouble).requires_grad_(true);
  const auto idx = torch::tensor({0, 4, 4, 1, 2, 2, 2, 0, 3, 1, 0, 3}, torch::kLong).view({3, 4});
  const auto out = fm::detail::gather_rows(data, idx);
  ASSERT_EQ(out.sizes(), at::IntArrayRef({3, 4, 2, 2}));
  const auto upstream = torch::randn({3, 4, 2, 2}, torch::kDouble);
  (out * upstream).sum().backward();
  for (int64_t k = 0; k < 3; ++k) {
    EXPECT_TRUE(torch::equal(out[k], data[k].index_select(0, idx[k])));
    // Repeated rows add their gradients, as index_select's backward does.
    const auto expected =
        torch::zeros({5, 2, 2}, torch::kDouble).index_add_(0, idx[k], upstream[k]);
    EXPECT_TRUE(all_close(data.grad()[k], expected, 1e-14, 1e-14)) << "instance " << k;
  }
  // Labels: any dtype, no gradient.
  const auto labels = torch::arange(15, torch::kLong).view({3, 5});
  EXPECT_TRUE(
      torch::equal(fm::detail::gather_rows(labels, idx)[2], labels[2].index_select(0, idx[2])));
  expect_error(
      [&] {
        fm::detail::gather_rows(data, torch::full({3, 1}, 5, torch::kLong));
      },
      {"gather_rows: index 5 outside [0, 5)"});
}

TEST_F(BatchedTasks, Conv3x3_IsEachInstancesConv2dAndItsGradientsMatchFiniteDifferences) {
  for (int64_t stride : {1, 2}) {
    SCOPED_TRACE(::testing::Message() << "stride " << stride);
    // Channels last: (K, B, H, W, C); an odd width, so the strided window meets the border.
    const auto x = torch::randn({2, 2, 4, 5, 3}, torch::kDouble).requires_grad_(true);
    const auto w = torch::randn({2, 4, 3, 3, 3}, torch::kDouble).requires_grad_(true);
    const auto b = torch::randn({2, 4}, torch::kDouble).requires_grad_(true);
    const auto out = fm::detail::conv3x3(x, w, b, stride);
    for (int64_t k = 0; k < 2; ++k) {
      const auto expected =
          at::conv2d(x[k].permute({0, 3, 1, 2}), w[k], b[k], stride, /*padding=*/1)
              .permute({0, 2, 3, 1});
      EXPECT_TRUE(all_close(out[k], expected, 1e-12, 1e-12)) << "instance " << k;
    }
    expect_gradients_match(
        [stride](const std::vector<torch::Tensor>& in) {
          return fm::detail::conv3x3(in[0], in[1], in[2], stride);
        },
        {x, w, b});
  }
}

TEST_F(BatchedTasks, Affine_IsBaddbmmOnBothPathsAndItsGradientsMatchFiniteDifferences) {
  // 5 x 4 x 3 multiply-adds an instance take the plain loops, 64 x 16 x 8 baddbmm.
  for (const auto& shape : std::vector<std::vector<int64_t>>{{5, 4, 3}, {64, 16, 8}}) {
    const int64_t rows = shape[0], in = shape[1], out = shape[2];
    SCOPED_TRACE(::testing::Message() << rows << " x " << in << " x " << out);
    const auto x = torch::randn({3, rows, in}, torch::kDouble).requires_grad_(true);
    const auto w = torch::randn({3, in, out}, torch::kDouble).requires_grad_(true);
    const auto b = torch::randn({3, out}, torch::kDouble).requires_grad_(true);
    EXPECT_TRUE(
        all_close(fm::detail::affine(x, w, b), at::baddbmm(b.unsqueeze(1), x, w), 1e-13, 1e-13));
    // A transposed (non-contiguous) weight reads the same.
    const auto wt = w.detach().transpose(1, 2).contiguous().transpose(1, 2);
    EXPECT_TRUE(
        all_close(fm::detail::affine(x, wt, b), at::baddbmm(b.unsqueeze(1), x, wt), 1e-13, 1e-13));
  }
  const auto x = torch::randn({2, 5, 4}, torch::kDouble).requires_grad_(true);
  const auto w = torch::randn({2, 4, 3}, torch::kDouble).requires_grad_(true);
  const auto b = torch::randn({2, 3}, torch::kDouble).requires_grad_(true);
  expect_gradients_match(
      [](const std::vector<torch::Tensor>& in) { return fm::detail::affine(in[0], in[1], in[2]); },
      {x, w, b});
  expect_error([&] { fm::detail::affine(x, w.narrow(1, 0, 3), b); },
               {"affine: expected x (K, B, In), weight (K, In, Out)", "[2, 3, 3]"});
}

TEST_F(BatchedTasks, CrossEntropy_IsEachInstancesMeanCrossEntropyAndItsGradient) {
  const auto logits = (3 * torch::randn({3, 5, 4})).requires_grad_(true);
  const auto labels = torch::randint(4, {3, 5}, torch::kLong);
  const auto loss = fm::detail::cross_entropy(logits, labels);
  ASSERT_EQ(loss.sizes(), at::IntArrayRef({3}));
  const auto upstream = torch::randn({3});
  (loss * upstream).sum().backward();
  const auto reference_logits = logits.detach().clone().requires_grad_(true);
  torch::Tensor reference_total = torch::zeros({});
  for (int64_t k = 0; k < 3; ++k) {
    const auto reference = torch::nn::functional::cross_entropy(reference_logits[k], labels[k]);
    EXPECT_NEAR(loss[k].item<double>(), reference.item<double>(), 1e-6) << "instance " << k;
    reference_total = reference_total + upstream[k] * reference;
  }
  reference_total.backward();
  EXPECT_TRUE(all_close(logits.grad(), reference_logits.grad(), 1e-5, 1e-7));
  expect_error(
      [&] {
        fm::detail::cross_entropy(logits, torch::full({3, 5}, 4, torch::kLong));
      },
      {"label 4 outside [0, 4)"});
}

TEST_F(BatchedTasks, MiniBatches_DependOnTheKey) {
  const auto task = fm::make_batched_task(fm::BatchedFamily::kImageConv, 3, kSeeds);
  const auto params = task->initial();
  EXPECT_TRUE(torch::equal(task->loss(params, 5), task->loss(params, 5)));
  EXPECT_FALSE(torch::equal(task->loss(params, 5), task->loss(params, 6)));
}

TEST_F(BatchedTasks, Rescaling_KeepsTheFunctionAndSpreadsTheScales) {
  for (auto family : fm::all_batched_families()) {
    const auto plain = fm::make_batched_task(family, 4, kSeeds, /*rescale=*/false);
    const auto rescaled = fm::make_batched_task(family, 4, kSeeds, /*rescale=*/true);
    SCOPED_TRACE(plain->name());
    const auto a = plain->initial(), b = rescaled->initial();
    EXPECT_TRUE(all_close(rescaled->loss(b, 9), plain->loss(a, 9), 1e-5, 1e-6));
    // Parameter-rescaling augmentation over [1e-3, 1e3]: the stored parameters differ in scale.
    const auto ratio = (b[0].abs().sum() / a[0].abs().sum().clamp_min(1e-30)).item<double>();
    EXPECT_GT(std::fabs(std::log10(ratio)), 1e-3);
  }
}

TEST_F(BatchedTasks, BadInput_IsNamed) {
  expect_error([] { fm::batched_family_from_name("mlp9"); }, {"mlp9", "tabular"});
  expect_error([] { fm::make_batched_task(fm::BatchedFamily::kTabular, 1, {}); },
               {"at least one instance"});
  const auto task = fm::make_batched_task(fm::BatchedFamily::kFactorization, 1, kSeeds);
  auto params = task->initial();
  params[0] = params[0].narrow(0, 0, 2);
  expect_error([&] { task->loss(params, 0); }, {"parameter 0", "[3,"});
  expect_error([&] { task->instance(3); }, {"k must be in [0, 3)", "got 3"});
  fm::EpisodeSpec spec;
  spec.steps = 0;
  expect_error([&] { fm::batched_schedule_final_losses(*task, spec, fo::LearnedSchedule()); },
               {"steps must be positive, got 0"});
  fm::BatchedSchedule rule({fo::LearnedSchedule()}, task->initial(), 0);
  expect_error([&] { rule.step(task->initial(), torch::zeros({2})); },
               {"losses must be (3), one per instance", "[2]"});
}

TEST_F(BatchedTasks, RowsPass_IsTheListPassRowByRow) {
  const int64_t rows = 5, n = 40000;  // more than two blocks a row: the block order matters
  const auto p = torch::randn({rows, n}), g = torch::randn({rows, n});
  const auto m = torch::randn({rows, 2, n}).mul_(0.1).abs_();
  auto p_rows = p.clone(), m_rows = m.clone();
  std::vector<flt::kernels::schedule::TensorDecision> decisions;
  for (int64_t r = 0; r < rows; ++r)
    decisions.push_back({0.01f * static_cast<float>(r + 1), 1.0f - 1e-4f, 0.3f});
  fo::LearnedSchedule schedule;
  const auto constants = schedule->rule_constants(7);
  const auto sums_rows = flt::kernels::schedule_step_rows_(p_rows, g, m_rows, constants, decisions);
  for (int64_t r = 0; r < rows; ++r) {
    auto p_one = p[r].clone(), m_one = m[r].clone();
    const auto sums_one = flt::kernels::schedule_step_({p_one}, {g[r].contiguous()}, {m_one},
                                                       constants, {decisions[r]});
    EXPECT_TRUE(torch::equal(p_rows[r], p_one)) << "row " << r;
    EXPECT_TRUE(torch::equal(m_rows[r], m_one)) << "row " << r;
    EXPECT_TRUE(torch::equal(sums_rows[r], sums_one[0])) << "row " << r;
  }
  expect_error(
      [&] { flt::kernels::schedule_step_rows_(p_rows, g, m_rows, constants, {decisions[0]}); },
      {"one decision per row (5)", "got 1"});
  expect_error(
      [&] {
        flt::kernels::schedule_step_rows_(p_rows, g, m_rows.narrow(1, 0, 1), constants, decisions);
      },
      {"moments (R, 2, N)"});
}

// The engine's run is the optimizer's: K instances batched end where ScheduleMnemosyne takes each
// alone, for the untrained rule and for a schedule with a nonzero head (memory read, corrector on),
// with and without each instance's training loss reported to its schedule.
TEST_F(BatchedTasks, BatchedRun_EndsWhereTheOptimizerTakesEachInstanceAlone) {
  torch::manual_seed(3);
  fo::LearnedSchedule trained(fo::LearnedScheduleOptions().key_dim(2).value_dim(2).hidden(4));
  {
    torch::NoGradGuard no_grad;
    for (auto& p : trained->parameters()) p.add_(0.05 * torch::randn_like(p));
  }
  for (auto family : fm::all_batched_families()) {
    for (const auto& schedule : {fo::LearnedSchedule(), trained}) {
      const auto task = fm::make_batched_task(family, 5, kSeeds, /*rescale=*/true);
      SCOPED_TRACE(task->name());
      fm::EpisodeSpec spec;
      spec.steps = 25;
      spec.seed = 99;
      spec.known_length = true;
      torch::Tensor unreported;
      for (const bool report : {false, true}) {
        spec.report_loss = report;
        const auto batched = fm::batched_schedule_final_losses(*task, spec, schedule);
        const auto alone = fm::per_instance_schedule_final_losses(*task, spec, schedule);
        EXPECT_TRUE(at::isfinite(batched).all().item<bool>()) << "report_loss " << report;
        // Batched and single kernels may round differently; 25 steps carry that roundoff along.
        EXPECT_TRUE(all_close(batched, alone, 1e-4, 1e-7)) << "report_loss " << report;
        // The trained head reads the loss: each instance's own, or the runs would not differ.
        if (!report) unreported = batched;
        if (report && schedule.get() == trained.get())
          EXPECT_FALSE(all_close(batched, unreported, 1e-6, 0.0)) << "the loss was not read";
      }
    }
  }
}

// Several schedules in one run (an ES generation's candidates): block c of the instances ends where
// schedule c takes those instances in a run of its own.
TEST_F(BatchedTasks, BatchedRun_EachBlockOfInstancesRunsItsOwnSchedule) {
  torch::manual_seed(5);
  const auto shape = fo::LearnedScheduleOptions().key_dim(2).value_dim(2).hidden(4);
  fo::LearnedSchedule untrained(shape), trained(shape);
  {
    torch::NoGradGuard no_grad;
    for (auto& p : trained->parameters()) p.add_(0.05 * torch::randn_like(p));
  }
  const std::vector<fo::LearnedSchedule> schedules = {untrained, trained};
  fm::EpisodeSpec spec;
  spec.steps = 25;
  spec.seed = 7;
  spec.known_length = true;
  for (auto family : {fm::BatchedFamily::kTabular, fm::BatchedFamily::kCharGRU}) {
    const std::vector<uint64_t> twice = {11, 12, 11, 12};
    const auto both = fm::make_batched_task(family, 5, twice);
    SCOPED_TRACE(both->name());
    const auto together = fm::batched_schedule_final_losses(*both, spec, schedules);
    const auto one = fm::make_batched_task(family, 5, {11, 12});
    for (size_t c = 0; c < schedules.size(); ++c) {
      const auto alone = fm::batched_schedule_final_losses(*one, spec, schedules[c]);
      EXPECT_TRUE(all_close(together.narrow(0, 2 * static_cast<int64_t>(c), 2), alone, 1e-6, 1e-9))
          << "schedule " << c;
    }
    EXPECT_NE(together[0].item<double>(), together[2].item<double>());
  }
  const auto three = fm::make_batched_task(fm::BatchedFamily::kTabular, 5, kSeeds);
  expect_error([&] { fm::batched_schedule_final_losses(*three, spec, schedules); },
               {"3 instances do not split into 2"});
  const auto two = fm::make_batched_task(fm::BatchedFamily::kTabular, 5, {11, 12});
  expect_error(
      [&] {
        fm::batched_schedule_final_losses(*two, spec, {untrained, fo::LearnedSchedule()});
      },
      {"schedule 1", "history of 98", "66"});
}

// The batched AdamW-cosine reference: row k ends where torch::optim::AdamW, decayed along the same
// half cosine, takes instance k alone at row k's learning rate; a grid is extra rows of one seed.
TEST_F(BatchedTasks, BatchedAdamW_EndsWhereTorchAdamWTakesEachInstanceAlone) {
  const std::vector<uint64_t> seeds = {11, 11, 12};  // instance 11 at two rates: a grid's rows
  const auto lrs = torch::tensor({1e-3, 1e-2, 3e-3}, torch::kDouble);
  fm::EpisodeSpec spec;
  spec.steps = 25;
  spec.seed = 99;
  for (auto family : fm::all_batched_families()) {
    const auto task = fm::make_batched_task(family, 5, seeds);
    SCOPED_TRACE(task->name());
    const auto batched = fm::batched_adamw_cosine_final_losses(*task, spec, lrs);
    for (int64_t k = 0; k < task->instances(); ++k) {
      const auto one = task->instance(k);
      auto params = leaves(one->initial());
      const double lr = lrs[k].item<double>();
      torch::optim::AdamW adamw(params, torch::optim::AdamWOptions(lr).weight_decay(1e-2));
      auto& options = static_cast<torch::optim::AdamWOptions&>(adamw.param_groups()[0].options());
      auto batches = fm::run_stream(spec.seed, fm::RunStream::kBatches);
      for (int64_t t = 0; t < spec.steps; ++t) {
        options.lr(lr * 0.5 * (1.0 + std::cos(M_PI * static_cast<double>(t) / spec.steps)));
        adamw.zero_grad();
        one->loss(params, fm::next_batch_key(batches)).sum().backward();
        adamw.step();
      }
      torch::NoGradGuard no_grad;
      const double alone = one->validation_loss(params).item<double>();
      // Per-row rates in float against AdamW's double scalars: roundoff carried over 25 steps.
      EXPECT_NEAR(batched[k].item<double>(), alone, 1e-4 * std::abs(alone) + 1e-7) << "row " << k;
    }
    // The grid's two rows of one instance are two different runs.
    EXPECT_NE(batched[0].item<double>(), batched[1].item<double>());
  }
}

// Where the held-out loss was lowest (`lowest_at`): looking does not change the run (the same final
// losses, bit for bit), every fraction lies in (0, 1], and a run whose held-out loss is lowest at
// its end says 1. A full-batch logistic regression on 163 rows at a rate of 1 overfits: its
// held-out loss is lowest before the end.
TEST_F(BatchedTasks, BatchedAdamW_LowestHeldOutLossIsWhereTheRunWasBest) {
  fm::EpisodeSpec spec;
  spec.steps = 300;
  spec.seed = 3;
  const auto task = fm::make_batched_task(fm::BatchedFamily::kTabular, 3, {21, 21, 21});
  const auto lrs = torch::tensor({1e-5, 1e-2, 1.0}, torch::kDouble);
  torch::Tensor lowest_at;
  const auto looked = fm::batched_adamw_cosine_final_losses(*task, spec, lrs, &lowest_at);
  EXPECT_TRUE(torch::equal(looked, fm::batched_adamw_cosine_final_losses(*task, spec, lrs)));
  ASSERT_EQ(lowest_at.sizes(), torch::IntArrayRef({3}));
  EXPECT_TRUE((lowest_at > 0).all().item<bool>() && (lowest_at <= 1).all().item<bool>());
  EXPECT_EQ(lowest_at[0].item<double>(), 1.0) << "a tiny rate improves to the end";
  EXPECT_LT(lowest_at[2].item<double>(), 1.0) << "a rate of 1 is best before the end";
}

TEST_F(BatchedTasks, BatchedAdamW_NamesABadLearningRate) {
  const auto task = fm::make_batched_task(fm::BatchedFamily::kTabular, 5, kSeeds);
  fm::EpisodeSpec spec;
  spec.steps = 2;
  expect_error(
      [&] {
        fm::batched_adamw_cosine_final_losses(*task, spec, torch::tensor({1e-3, -1.0, 1e-3}));
      },
      {"learning rate", "-1 for instance 1"});
  expect_error([&] { fm::batched_adamw_cosine_final_losses(*task, spec, torch::tensor({1e-3})); },
               {"one rate per instance (3)", "[1]"});
}
