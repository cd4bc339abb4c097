// The lessons' quick versions (what `flt-demo LESSON --quick` and flt-lab's Lessons tab run):
// each completes and its numbers have the right sign and trend (slopes in a range, orderings),
// not exact values. One test per lesson, so ctest runs them in parallel.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "lessons/lessons.h"

namespace fd = flt::demos;

namespace {

fd::LessonResult run_quick(const std::string& key) {
  const auto* lesson = fd::find_lesson(key);
  EXPECT_NE(lesson, nullptr) << key;
  fd::LessonSettings settings;
  settings.quick = true;
  double last = -1.0;
  bool monotone = true;
  settings.progress = [&](double done, const std::string&) {
    monotone = monotone && done >= last && done <= 1.0;
    last = done;
  };
  auto result = lesson->run(settings);
  EXPECT_TRUE(monotone) << key << ": progress went backwards or past 1";
  EXPECT_EQ(result.key, key);
  EXPECT_TRUE(result.available);
  EXPECT_FALSE(result.table.empty());
  EXPECT_FALSE(result.panels.empty());
  EXPECT_FALSE(result.csv_rows.empty());
  for (const auto& row : result.csv_rows) EXPECT_EQ(row.size(), result.csv_columns.size()) << key;
  // --quick is meant to finish in under a minute; a wall time is not a unit test's to assert (the
  // machines are shared and noisy), so it is printed.
  std::printf("  %s --quick: %.1f s\n", key.c_str(), result.seconds);
  return result;
}

}  // namespace

// Thm 4.2: error ~ r^{-1/2} where c = sup |g| / p is finite; the box (c = inf) converges slower.
TEST(Lessons, RpeError_SlopeNearMinusHalf) {
  auto r = run_quick("rpe-error");
  for (const char* family : {"gaussian_mixture", "gaussian_kernel"}) {
    const double slope = r.metrics.at(std::string("slope_") + family);
    EXPECT_GT(slope, -0.65) << family;
    EXPECT_LT(slope, -0.35) << family;
    EXPECT_LT(r.metrics.at(std::string("c_") + family), 10.0) << family;
  }
  EXPECT_GT(r.metrics.at("tail_slope_local_smooth"), -0.75);
  EXPECT_LT(r.metrics.at("tail_slope_local_smooth"), -0.35);
  EXPECT_TRUE(std::isinf(r.metrics.at("c_local_box")));
  EXPECT_GT(r.metrics.at("tail_slope_local_box"), -0.35) << "the box converges slower";
  // Growth with L is mild (sqrt(log L)): between 1x and 1.5x for a 4x longer sequence.
  EXPECT_GT(r.metrics.at("growth_gaussian_mixture"), 0.95);
  EXPECT_LT(r.metrics.at("growth_gaussian_mixture"), 1.5);
}

// Fig. 1: softmax's memory grows faster than FLT's; FLT's memory is close to Performer's. Only
// memory is asserted: the quick run's time exponents are wall-clock fits over L <= 1024 and flipped
// order on a loaded CI machine (softmax 1.58 vs FLT 1.75); timings belong to the benchmark output.
TEST(Lessons, Speed_SoftmaxMemoryGrowsFasterThanFlt) {
  auto r = run_quick("speed");
  EXPECT_TRUE(std::isfinite(r.metrics.at("time_exponent_softmax")));
  EXPECT_TRUE(std::isfinite(r.metrics.at("time_exponent_flt")));
  EXPECT_GT(r.metrics.at("memory_exponent_softmax"), r.metrics.at("memory_exponent_flt"));
  EXPECT_GT(r.metrics.at("softmax_over_flt_memory"), 1.0);
  EXPECT_GT(r.metrics.at("flt_over_performer_memory"), 0.9);
  EXPECT_LT(r.metrics.at("flt_over_performer_memory"), 1.5);
}

// Sec. 5.1: every model learns (perplexity below the unigram baseline).
TEST(Lessons, TextLm_ModelsBeatTheUnigramBaseline) {
  auto r = run_quick("text-lm");
  const double unigram = r.metrics.at("ppl_unigram");
  for (const char* key : {"performer", "flt_gaussian_mixture", "flt_local"}) {
    const double ppl = r.metrics.at(std::string("ppl_") + key);
    EXPECT_TRUE(std::isfinite(ppl)) << key;
    EXPECT_LT(ppl, unigram) << key;
  }
}

// Tables 7-8: even powers train; the softmax baseline trains.
TEST(Lessons, FourierAblation_EvenPowersTrain) {
  auto r = run_quick("fourier-ablation");
  const double unigram = r.metrics.at("ppl_unigram");
  for (const char* key : {"softmax", "p2", "p4", "p6", "r1", "r3"}) {
    const double ppl = r.metrics.at(std::string("ppl_") + key);
    EXPECT_TRUE(std::isfinite(ppl)) << key;
    EXPECT_LT(ppl, unigram) << key;
  }
}

// E.4: both estimators improve with n and beat the uniform baseline.
TEST(Lessons, Density_ErrorFallsWithSamples) {
  auto r = run_quick("density");
  EXPECT_LT(r.metrics.at("fourier_slope"), -0.3);
  EXPECT_LT(r.metrics.at("kde_slope"), -0.3);
  EXPECT_LT(r.metrics.at("fourier_mse_largest_n"), 0.1 * r.metrics.at("uniform_mse_largest_n"));
  EXPECT_LT(r.metrics.at("kde_mse_largest_n"), 0.1 * r.metrics.at("uniform_mse_largest_n"));
}

// Fig. 4-5: RMFA's error falls with the features for every kernel. The lesson also times RMFA
// against softmax at length 2000; a timing is not a unit test's to assert (it failed once under a
// parallel ctest), so only its presence is checked here: bench/ measures the speed.
TEST(Lessons, SchoenbAt_ErrorFallsWithFeatures) {
  auto r = run_quick("schoenbat");
  for (const char* kernel : {"exp", "inv", "logi", "trigh", "sqrt"}) {
    EXPECT_LT(r.metrics.at(std::string("error_slope_") + kernel), -0.2) << kernel;
    const double speedup = r.metrics.at(std::string("speedup_last_") + kernel);
    EXPECT_TRUE(std::isfinite(speedup) && speedup > 0.0) << kernel << ": " << speedup;
  }
}

// Fig. 3 (right): the swarm lesson runs the shipped swarms and Adam restarts on Rastrigin-10; every
// median is finite and below the value of a uniform random point (about 10 n + n 5.12^2 / 3 = 187).
TEST(Lessons, Swarm_QuickRunsTheSwarms) {
  const auto* lesson = fd::find_lesson("swarm");
  ASSERT_NE(lesson, nullptr);
  fd::LessonSettings settings;
  settings.quick = true;
  const auto r = lesson->run(settings);
  EXPECT_TRUE(r.available);
  for (const auto* name : {"swarm-flt", "swarm-performer", "swarm-lstm", "adam-restarts"}) {
    const auto it = r.metrics.find(std::string("rastrigin-10 ") + name);
    ASSERT_NE(it, r.metrics.end()) << name;
    EXPECT_TRUE(std::isfinite(it->second)) << name;
    EXPECT_LT(it->second, 150.0) << name;
  }
  ASSERT_EQ(r.panels.size(), 1u);
  EXPECT_EQ(r.panels[0].series.size(), 4u);
}

// Every variant at its defaults trains finitely in both models (quick: 20 steps each) and ends
// below the loss of a uniform guess (log of the alphabet's size; log 10 classes).
TEST(Lessons, AttentionTraining_EveryVariantTrainsFinitely) {
  auto r = run_quick("attention-training");
  for (const char* variant :
       {"softmax", "linear", "performer", "fourier", "schoenbat", "flt_absolute", "flt_rpe"}) {
    for (const auto& [task, uniform] : {std::pair<std::string, double>{"text", std::log(60.0)},
                                        std::pair<std::string, double>{"images", std::log(10.0)}}) {
      const std::string key = task + "_" + variant;
      EXPECT_EQ(r.metrics.at("non_finite_" + key), 0.0) << key;
      EXPECT_LT(r.metrics.at("cross_entropy_" + key), uniform) << key;
      EXPECT_GT(r.metrics.at("forward_mb_" + key), 0.0) << key;
    }
  }
}

// A caller (flt-lab closing its window) can stop a lesson between units of work.
TEST(Lessons, CancelledStopsAtTheNextUnitOfWork) {
  fd::LessonSettings settings;
  settings.quick = true;
  settings.cancelled = [] { return true; };
  EXPECT_THROW(fd::find_lesson("rpe-error")->run(settings), fd::LessonCancelled);
}

TEST(Lessons, ListInIssueOrder) {
  const auto& list = fd::lessons();
  ASSERT_EQ(list.size(), 8u);
  EXPECT_EQ(list.front().key, "rpe-error");
  EXPECT_EQ(list.back().key, "attention-training");
  EXPECT_EQ(fd::find_lesson("nope"), nullptr);
  EXPECT_EQ(fd::format_number(NAN), "NaN");
  EXPECT_EQ(fd::format_number(1.29e-5), "1.29e-05");
}
