// flt-lab's scene computations without a GL context: the Live Training task batches, session and
// worker (with the learned optimizer and the learned spectra), Attention Lab against exact
// attention and through every variant's knobs, the Kernel Explorer's kernels and estimators and
// the RPE Studio's estimate, all through the library's modules.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>
#include <stdexcept>
#include <thread>

#include "flt/attention/flt.h"
#include "flt/attention/fourier.h"
#include "flt/attention/variants.h"
#include "logic/attention_lab.h"
#include "logic/kernel_explorer.h"
#include "logic/rpe_studio.h"
#include "logic/scenario.h"
#include "logic/training.h"
#include "logic/variants.h"
#include "viz_test_util.h"

using namespace flt::viz;

TEST_F(VizLogic, TaskBatchesAreWellFormed) {
  for (int t = 0; t < kTrainingTaskCount; ++t) {
    const auto task = static_cast<TrainingTask>(t);
    const auto batch = make_task_batch(task, 4, 6, 11);
    EXPECT_EQ(batch.tokens.size(), static_cast<size_t>(4 * batch.length));
    for (auto token : batch.tokens) EXPECT_TRUE(token >= 0 && token < batch.vocab);
    if (task_uses_classifier(task)) {
      EXPECT_EQ(batch.targets.size(), 4u);
    } else {
      EXPECT_EQ(batch.targets.size(), batch.tokens.size());
    }
    EXPECT_EQ(make_task_batch(task, 4, 6, 11).tokens, batch.tokens);  // deterministic
  }
  // copy: the answer after the separator repeats the payload
  const auto copy = make_task_batch(TrainingTask::kCopy, 1, 5, 3);
  for (int t = 5; t < copy.length; ++t) EXPECT_EQ(copy.targets[t], copy.tokens[t - 5]);
}

TEST_F(VizLogic, TrainingLearnsCopyAndTheNanGuardPauses) {
  TrainingSession session;
  TrainingSettings settings;
  settings.task = TrainingTask::kCopy;
  settings.length = 4;
  settings.lr = 3e-3;
  train(session, settings, 5, 150);
  auto snap = session.snapshot();
  ASSERT_EQ(snap.step, 150);
  // averages over the first and last 10 steps: the model learns to copy (behaviour, step budget
  // 150)
  float first = 0, last = 0;
  for (int i = 0; i < 10; ++i) {
    first += snap.loss[i] / 10;
    last += snap.loss[140 + i] / 10;
  }
  EXPECT_LT(last, 0.6f * first);
  EXPECT_EQ(snap.layers, 2);
  EXPECT_EQ(snap.maps.size(), static_cast<size_t>(2 * 2 * snap.map_length * snap.map_length));
  // the NaN guard: step 153's loss is poisoned; training stops there, names it, keeps the weights
  session.inject_nan_at(153);
  session.run_steps(10);
  snap = session.snapshot();
  EXPECT_TRUE(snap.nan_paused);
  EXPECT_EQ(snap.nan_step, 153);
  EXPECT_EQ(snap.step, 152);
  EXPECT_NE(snap.banner.find("step 153"), std::string::npos) << snap.banner;
  for (float v : snap.maps) ASSERT_TRUE(std::isfinite(v));
}

namespace {

// The default training task on its worker at x64, once it has taken `steps` steps (a minute at
// most: on a loaded 2-core machine 4 s once gave only 4 steps).
void train_on_worker(TrainingSession& session, int64_t steps) {
  session.configure(TrainingSettings{}, 2);
  session.start_worker();
  session.set_speed(64.0f);
  session.set_playing(true);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (session.snapshot().step < steps && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace

TEST_F(VizLogic, BreakItPoisonsTheNextStepEvenWhenTheWorkerIsPastTheShownStep) {
  TrainingSession session;
  train_on_worker(session, 3);
  ASSERT_GE(session.snapshot().step, 3);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  // A click computed from a stale snapshot names a step the worker has already taken.
  session.inject_nan_at(1);
  while (!session.snapshot().nan_paused && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const auto snap = session.snapshot();
  EXPECT_TRUE(snap.nan_paused);
  EXPECT_GT(snap.nan_step, 3);
  EXPECT_FALSE(snap.playing);
}

TEST_F(VizLogic, TrainingWorkerNeverBlocksTheCaller) {
  TrainingSession session;
  train_on_worker(session, 5);
  EXPECT_GE(session.snapshot().step, 5);
  session.set_playing(false);
  session.configure(TrainingSettings{}, 3);  // reset while the worker runs
  EXPECT_EQ(session.snapshot().step, 0);
}

TEST_F(VizLogic, AttentionLabComparesWithExactSoftmax) {
  AttentionLabSettings settings;
  settings.length = 16;
  settings.head_dim = 8;
  settings.variant = 0;  // softmax against itself: zero difference
  auto same = compute_attention_lab(settings, 1, nullptr);
  ASSERT_TRUE(same.valid) << same.error;
  EXPECT_EQ(same.variant, "softmax");
  EXPECT_LT(same.relative_error, 1e-6);
  settings.variant = 1;  // linear attention differs from softmax
  auto linear = compute_attention_lab(settings, 1, nullptr);
  ASSERT_TRUE(linear.valid) << linear.error;
  EXPECT_GT(linear.relative_error, 1e-3);
  EXPECT_EQ(linear.approx.size(), static_cast<size_t>(2 * 16 * 16));
  // rows of both matrices sum to one
  for (int row = 0; row < 16; ++row) {
    float sum = 0;
    for (int j = 0; j < 16; ++j) sum += linear.approx[row * 16 + j];
    EXPECT_NEAR(sum, 1.0f, 1e-4f);
  }
  settings.input = AttentionInput::kLiveModel;
  auto missing = compute_attention_lab(settings, 1, nullptr);
  EXPECT_FALSE(missing.valid);
  EXPECT_NE(missing.error.find("Live Training"), std::string::npos);
  // the async wrapper delivers the same result
  AttentionLab lab;
  settings.input = AttentionInput::kRandom;
  lab.request(settings, 1);
  lab.wait();
  EXPECT_EQ(lab.result().approx, linear.approx);
}

// Every variant's knobs reach its module: more random features, smaller error against the exact
// attention the variant approximates (for FLT the RPE-masked softmax of the same module).
TEST_F(VizLogic, AttentionLabKnobsReachTheModules) {
  const auto index_of = [](const std::string& name) {
    const int index = variant_index(name);
    EXPECT_GE(index, 0) << "no variant " << name;
    return std::max(index, 0);
  };
  AttentionLabSettings settings;
  settings.length = 24;
  settings.head_dim = 8;
  settings.input_scale = 0.5;
  const auto error_with = [&](int features, int rpe_features) {
    settings.features = features;
    settings.flt_rpe_features = rpe_features;
    auto r = compute_attention_lab(settings, 3, nullptr);
    EXPECT_TRUE(r.valid) << r.error;
    return r;
  };
  settings.variant = index_of("performer");
  const auto performer_few = error_with(8, 32), performer_many = error_with(512, 32);
  EXPECT_EQ(performer_few.reference, "softmax");
  EXPECT_LT(performer_many.relative_error, 0.5 * performer_few.relative_error);

  settings.variant = index_of("flt");
  const auto flt_few = error_with(8, 4), flt_many = error_with(512, 256);
  EXPECT_EQ(flt_many.reference, "RPE-masked softmax");
  EXPECT_LT(flt_many.relative_error, 0.5 * flt_few.relative_error);
  settings.flt_family = 1;  // local RPE: a different exact matrix
  const auto local = error_with(512, 256);
  EXPECT_NE(local.exact, flt_many.exact);

  // Two values of a knob without a simple ordering: two different matrices.
  const auto matters = [&](const char* variant, auto AttentionLabSettings::*knob, auto a, auto b) {
    settings.variant = index_of(variant);
    settings.*knob = a;
    const auto first = compute_attention_lab(settings, 3, nullptr);
    settings.*knob = b;
    const auto second = compute_attention_lab(settings, 3, nullptr);
    ASSERT_TRUE(first.valid && second.valid) << first.error << second.error;
    EXPECT_NE(first.approx, second.approx) << variant;
  };
  matters("fourier", &AttentionLabSettings::fourier_r, 0.5, 8.0);
  matters("fourier", &AttentionLabSettings::fourier_phi, 1, 3);
  matters("schoenbat", &AttentionLabSettings::schoenbat_kernel, 0, 1);
}

TEST_F(VizLogic, LiveModelInputReproducesTheModelsOwnAttention) {
  // The Attention Lab's "live model" q, k (layer 0 of the probe) give back exactly the model's own
  // layer-0 attention maps: the lab sees what the model sees.
  TrainingSession session;
  TrainingSettings settings;
  settings.length = 5;
  train(session, settings, 9, 5);
  LiveQueriesKeys live;
  ASSERT_TRUE(session.probe_queries_keys(&live.q, &live.k, &live.heads, &live.length, &live.dim));
  AttentionLabSettings lab;
  lab.input = AttentionInput::kLiveModel;
  lab.variant = 0;
  lab.causal = true;  // the LM's maps are causal
  const auto result = compute_attention_lab(lab, 1, &live);
  ASSERT_TRUE(result.valid) << result.error;
  const auto snap = session.snapshot();
  ASSERT_EQ(result.length, snap.map_length);
  const size_t per_layer = static_cast<size_t>(snap.heads) * snap.map_length * snap.map_length;
  ASSERT_EQ(result.exact.size(), per_layer);
  for (size_t i = 0; i < per_layer; ++i) ASSERT_NEAR(result.exact[i], snap.maps[i], 1e-5f) << i;
}

TEST_F(VizLogic, AttentionLabKnobsReachTheVariant) {
  // softmax with logit scale 1/sqrt(D) explicitly equals the default; another scale differs
  AttentionLabSettings settings;
  settings.length = 12;
  settings.head_dim = 16;
  settings.variant = 0;
  settings.softmax_scale = 0.25;  // = 1/sqrt(16)
  EXPECT_LT(compute_attention_lab(settings, 3, nullptr).relative_error, 1e-6);
  settings.softmax_scale = 1.0;
  EXPECT_GT(compute_attention_lab(settings, 3, nullptr).relative_error, 0.05);
}

TEST_F(VizLogic, KernelAndRpeKnobsRoundTripThroughTheStateString) {
  Scenario s;
  s.kernel.R = 1.0 / 3.0;
  s.kernel.phi = 5;
  s.rpe.family = 3;
  s.rpe.features = 128;
  s.rpe.position_dim = 1;
  s.rpe.scale = 0.7;
  s.rpe.draw = 9;
  s.rpe.surface = true;
  const Scenario back = decode_state(encode_state(s));
  EXPECT_EQ(back.kernel.R, s.kernel.R);
  EXPECT_EQ(back.kernel.phi, 5);
  EXPECT_EQ(back.rpe.family, 3);
  EXPECT_EQ(back.rpe.features, 128);
  EXPECT_EQ(back.rpe.position_dim, 1);
  EXPECT_EQ(back.rpe.draw, 9);
  EXPECT_TRUE(back.rpe.surface);
  EXPECT_TRUE(back == s);
  EXPECT_THROW(decode_state("flt1;r.dim=3"), std::invalid_argument);
}

TEST_F(VizLogic, KernelExplorerMatchesTheFourierKernelThroughTheModule) {
  KernelSettings k;
  k.R = 2.0;
  k.phi = 1;  // s^4
  const KernelCurves c = compute_kernel_curves(k, 241, 41);
  ASSERT_TRUE(c.error.empty()) << c.error;
  ASSERT_EQ(c.kernel_1d.size(), 241u);
  ASSERT_EQ(c.kernel_2d.size(), 41u * 41u);
  EXPECT_NEAR(c.kernel_1d[120], 1.0, 1e-6);  // x = 0: phi(1) / phi(1)
  for (size_t i = 0; i < c.xs.size(); i += 17) {
    const double x = c.xs[i];
    const double s = x == 0.0 ? 1.0 : std::sin(k.R * x) / (k.R * x);  // reference for the test
    EXPECT_NEAR(c.kernel_1d[i], std::pow(s, 4), 1e-5) << x;
  }
  for (float v : c.kernel_2d) EXPECT_TRUE(std::isfinite(v));
  EXPECT_NEAR(c.kernel_2d[20 * 41 + 20], 1.0, 1e-6);  // centre of the map
  EXPECT_GE(c.lo, 0.0f);                              // even power: never negative
  for (int phi = 0; phi < kKernelPhiCount; ++phi) {
    k.phi = phi;
    const KernelCurves any = compute_kernel_curves(k, 31, 11);
    ASSERT_TRUE(any.error.empty()) << kernel_phi_label(phi) << ": " << any.error;
    EXPECT_NEAR(any.kernel_1d[15], 1.0, 1e-6) << kernel_phi_label(phi);
    for (float v : any.kernel_2d) EXPECT_TRUE(std::isfinite(v)) << kernel_phi_label(phi);
  }
}

// RPE Studio opens on a case FLT estimates well, and the hard case is the local family.
TEST_F(VizLogic, RpeStudioOpensOnACaseItEstimatesWell) {
  const auto relative_error = [](const RpeSettings& r) {
    double error = 0.0;
    for (uint64_t seed : {1u, 2u, 3u}) error += rpe_max_error(r, seed, r.features) / 3;
    float peak = 0.0f;
    for (float v : compute_rpe_curves(r, 1).exact) peak = std::max(peak, std::fabs(v));
    return error / peak;
  };
  const RpeSettings opening;
  RpeSettings local = opening;
  local.family = static_cast<int>(flt::attention::SpectrumFamily::kLocal);
  const double opening_error = relative_error(opening), local_error = relative_error(local);
  // Measured: 0.207 (the Gaussian kernel) against 0.359 (local box^2, max |f| = 10); the other
  // families 0.24-0.45. 0.25 leaves room for another machine's float rounding, not for a family
  // change.
  EXPECT_LT(opening_error, 0.25) << rpe_family_label(opening.family);
  EXPECT_LT(opening_error, local_error);
}

TEST_F(VizLogic, RpeStudioEstimateApproachesTheExactFunctionAsFeaturesGrow) {
  RpeSettings r;
  r.family = 2;  // Gaussian kernel: finite-variance estimator with the Gaussian proposal
  r.position_dim = 1;
  r.scale = 1.0;
  r.proposal_sigma = 1.0;
  // the sup error of a Monte Carlo estimate falls like 1/sqrt(r); averaged over 3 seeds, 512
  // features must beat 8 features by a wide margin (expected ~8x; we ask for 3x)
  double few = 0.0, many = 0.0;
  for (uint64_t seed : {1u, 2u, 3u}) {
    few += rpe_max_error(r, seed, 8);
    many += rpe_max_error(r, seed, 512);
  }
  EXPECT_LT(many * 3.0, few) << few << " vs " << many;
  const RpeCurves c = compute_rpe_curves(r, 1);
  ASSERT_TRUE(c.error.empty()) << c.error;
  EXPECT_EQ(c.exact.size(), c.delta.size());
  EXPECT_NEAR(c.exact[c.exact.size() / 2], 1.0, 1e-5);  // f(0) = C = 1 (default weight)
  EXPECT_TRUE(c.map_2d.empty());
  r.family = 1;  // local, k = 2, 2-D map
  r.position_dim = 2;
  const RpeCurves local = compute_rpe_curves(r, 1, 97, 21);
  ASSERT_TRUE(local.error.empty()) << local.error;
  ASSERT_EQ(local.map_2d.size(), 21u * 21u);
  for (float v : local.map_2d) EXPECT_TRUE(std::isfinite(v));
  for (float v : local.g) EXPECT_TRUE(std::isfinite(v));
  EXPECT_GT(local.map_hi, local.map_lo);
  EXPECT_EQ(local.map_2d[10 * 21 + 10], local.map_hi);  // the local shape peaks at delta = 0
  // A setting the library refuses shows as its message's first line (no C++ backtrace).
  r.scale = -1.0;
  const RpeCurves bad = compute_rpe_curves(r, 1);
  EXPECT_NE(bad.error.find("-1"), std::string::npos) << bad.error;
  EXPECT_EQ(bad.error.find('\n'), std::string::npos) << bad.error;
}

TEST_F(VizLogic, KernelExplorerEstimatorsComeFromTheLibrary) {
  KernelSettings k;  // N = 400, rho = 0.7, R = 2, s^4, h = 0.35
  const KernelEstimates e = compute_kernel_estimates(k, 7, 33, 61);
  ASSERT_TRUE(e.valid) << e.error;
  ASSERT_TRUE(e.density_error.empty()) << e.density_error;
  ASSERT_EQ(e.truth.size(), 33u * 33u);
  ASSERT_EQ(e.fourier.size(), 33u * 33u);
  ASSERT_EQ(e.kde.size(), 33u * 33u);
  ASSERT_EQ(e.samples_xy.size(), 800u);
  ASSERT_EQ(e.reg_fourier.size(), 61u);
  // the maps are the library's estimators on the scene's samples (centre cell = the origin)
  const auto samples = torch::tensor(e.samples_xy, torch::kFloat).to(torch::kDouble).view({400, 2});
  const auto origin = torch::zeros({1, 2}, torch::kDouble);
  EXPECT_NEAR(e.fourier[16 * 33 + 16],
              flt::attention::fourier_density_estimate(origin, samples, 2.0, 4).item<double>(),
              1e-5);
  EXPECT_NEAR(e.kde[16 * 33 + 16],
              flt::attention::gaussian_kde(origin, samples, 0.35).item<double>(), 1e-5);
  EXPECT_NEAR(e.truth[16 * 33 + 16], 1.0 / (2 * M_PI * std::sqrt(1 - 0.49)), 1e-6);
  // samples are correlated as asked
  const auto centred = samples - samples.mean(0);
  const double corr = ((centred.select(1, 0) * centred.select(1, 1)).mean() /
                       (centred.select(1, 0).std(false) * centred.select(1, 1).std(false)))
                          .item<double>();
  EXPECT_NEAR(corr, 0.7, 0.06);  // sampling sd of r at N = 400 is about (1 - 0.49) / 20 = 0.026
  // both estimators are far better than estimating 0 (ISE = integral of p^2 = 1 / (4 pi sqrt(1 -
  // rho^2)) = 0.111); measured 0.006 (Fourier) and 0.005 (KDE) for this draw
  const double zero_ise = 1.0 / (4 * M_PI * std::sqrt(1 - 0.49));
  EXPECT_LT(e.fourier_mise, 0.2 * zero_ise);
  EXPECT_LT(e.kde_mise, 0.2 * zero_ise);
  EXPECT_LT(e.reg_mse, 0.1);  // sin 2x from N = 400, noise 0.3, R = 2 (oversmoothed): 0.05
  // deterministic in the seed; another seed draws other samples
  EXPECT_EQ(compute_kernel_estimates(k, 7, 33, 61).samples_xy, e.samples_xy);
  EXPECT_NE(compute_kernel_estimates(k, 8, 33, 61).samples_xy, e.samples_xy);
  // phi without a finite A: the density estimator says why; KDE and regression still work
  k.phi = 4;  // relu(s)
  const KernelEstimates relu = compute_kernel_estimates(k, 7, 17, 31);
  ASSERT_TRUE(relu.valid) << relu.error;
  EXPECT_NE(relu.density_error.find("relu"), std::string::npos) << relu.density_error;
  EXPECT_TRUE(relu.fourier.empty());
  EXPECT_FALSE(relu.kde.empty());
  k.phi = 1;
  k.rho = 1.0;
  EXPECT_NE(compute_kernel_estimates(k, 7, 17, 31).error.find("rho"), std::string::npos);
}

TEST_F(VizLogic, KernelExplorerMiseFallsWithSamplesAtTheTheoreticalRadius) {
  // R = N^(1/4) (FourierFormer Theorem 1 for D = 2): 100 -> 1600 samples lowers the Fourier
  // estimator's error, averaged over 3 seeds.
  KernelSettings k;
  double few = 0.0, many = 0.0;
  for (uint64_t seed : {1u, 2u, 3u}) {
    k.samples = 100;
    k.R = std::pow(100.0, 0.25);
    few += compute_kernel_estimates(k, seed, 33, 11).fourier_mise;
    k.samples = 1600;
    k.R = std::pow(1600.0, 0.25);
    many += compute_kernel_estimates(k, seed, 33, 11).fourier_mise;
  }
  EXPECT_LT(many, 0.6 * few) << few / 3 << " vs " << many / 3;
}

namespace {
/// The copy task with payload 4, trained by `optimizer` at its defaults.
TrainingSettings copy_task(TrainingOptimizer optimizer) {
  TrainingSettings settings;
  settings.task = TrainingTask::kCopy;
  settings.length = 4;
  settings.optimizer = optimizer;
  return settings;
}
}  // namespace

TEST_F(VizLogic, TrainingWithTheLearnedOptimizerLowersTheLoss) {
  TrainingSession session;
  auto settings = copy_task(TrainingOptimizer::kMnemosyne);
  session.configure(settings, 5);
  EXPECT_NE(session.snapshot().model.find("Mnemosyne"), std::string::npos);
  session.run_steps(60);
  const auto snap = session.snapshot();
  ASSERT_EQ(snap.step, 60);
  float first = 0, last = 0;
  for (int i = 0; i < 10; ++i) {
    first += snap.loss[i] / 10;
    last += snap.loss[50 + i] / 10;
  }
  EXPECT_LT(last, 0.9f * first) << first << " -> " << last;
  const Scenario back = decode_state(encode_state([&] {
    Scenario s;
    s.training = settings;
    s.training.learned_lr = 0.5;
    return s;
  }()));
  EXPECT_EQ(back.training.optimizer, TrainingOptimizer::kMnemosyne);
  EXPECT_EQ(back.training.learned_lr, 0.5);
}

TEST_F(VizLogic, TrainingWithTheLearnedScheduleTracesItsStepsAndMemory) {
  TrainingSession session;
  auto settings = copy_task(TrainingOptimizer::kLearnedSchedule);
  session.configure(settings, 5);
  session.run_steps(600);  // past a thinning of the trace (512 records at interval 1)
  const auto snap = session.snapshot();
  ASSERT_EQ(snap.step, 600);
  EXPECT_LT(snap.loss.back(), 0.5f * snap.loss.front());
  const auto& trace = snap.schedule;
  ASSERT_FALSE(trace.tensors.empty());
  EXPECT_EQ(trace.sizes.size(), trace.tensors.size());
  EXPECT_EQ(trace.grid.interval(), 2);
  EXPECT_LT(static_cast<int>(trace.steps.size()), kScheduleRecords);
  for (size_t r = 0; r < trace.steps.size(); ++r)
    EXPECT_EQ(static_cast<int64_t>(trace.steps[r]) % trace.grid.interval(), 0) << r;
  EXPECT_EQ(trace.steps.back(), 600.0f);
  for (size_t i = 0; i < trace.tensors.size(); ++i) {
    ASSERT_EQ(trace.sizes[i].size(), trace.steps.size()) << trace.tensors[i];
    for (float size : trace.sizes[i])
      EXPECT_TRUE(std::isfinite(size) && size > 0) << trace.tensors[i];
  }
  // Every part of the LM is there, named by the parameter names (its output head is tied to the
  // embedding).
  std::set<int> groups(trace.groups.begin(), trace.groups.end());
  EXPECT_EQ(groups, (std::set<int>{0, 1, 2, 3}));
  EXPECT_EQ(schedule_group("head.weight"), 4);
  EXPECT_EQ(schedule_group("stack.layer0.attention.q_proj.weight"), 1);
  EXPECT_EQ(schedule_group("stack.final_norm.bias"), 3);
  // The FLT memory's weights over 0..2000 steps back: f(0) = c > 0, gamma^Delta f decays.
  EXPECT_EQ(trace.memory, "flt");
  ASSERT_EQ(trace.weight.size(), 2001u);
  EXPECT_GT(trace.rpe[0], 0.0f);
  EXPECT_EQ(trace.weight[0], trace.rpe[0]);
  EXPECT_NEAR(trace.weight[1000], std::pow(trace.discount, 1000.0f) * trace.rpe[1000], 1e-5f);
  EXPECT_GT(trace.discount, 0.99f);
  // The first design and Adam keep no trace.
  settings.optimizer = TrainingOptimizer::kAdam;
  session.configure(settings, 5);
  session.run_steps(3);
  EXPECT_TRUE(session.snapshot().schedule.tensors.empty());
}

TEST_F(VizLogic, TrainingRecordsTheLearnedSpectraOfFltHeads) {
  const int flt_index = variant_index("flt");
  ASSERT_GE(flt_index, 0);
  TrainingSession session;
  TrainingSettings settings;
  settings.variant = flt_index;
  settings.length = 4;
  settings.lr = 1e-2;
  session.configure(settings, 3);
  auto snap = session.snapshot();
  ASSERT_EQ(snap.spectrum_heads, 2);
  ASSERT_EQ(snap.spectra.size(), 1u);  // step 0
  EXPECT_EQ(snap.spectra[0].g.size(), 2 * snap.spectrum_xi.size());
  EXPECT_EQ(snap.spectra[0].f.size(), 2 * snap.spectrum_delta.size());
  session.run_steps(200);
  snap = session.snapshot();
  ASSERT_LE(snap.spectra.size(), static_cast<size_t>(kSpectrumFrames));
  EXPECT_EQ(snap.spectra.front().step, 0);
  EXPECT_EQ(snap.spectra.back().step, 200);
  for (size_t i = 1; i < snap.spectra.size(); ++i)
    EXPECT_GT(snap.spectra[i].step, snap.spectra[i - 1].step);
  // training moved the spectrum
  float moved = 0.0f;
  for (size_t i = 0; i < snap.spectra[0].f.size(); ++i)
    moved = std::max(moved, std::abs(snap.spectra.back().f[i] - snap.spectra.front().f[i]));
  EXPECT_GT(moved, 1e-4f);
  // softmax has no learned spectrum
  settings.variant = 0;
  session.configure(settings, 3);
  EXPECT_EQ(session.snapshot().spectrum_heads, 0);
}
