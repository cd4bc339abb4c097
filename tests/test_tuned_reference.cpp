// The tuned references the design campaign scores candidates against (tuned_reference.h): the
// score's formula, tuning's determinism and choice, the cache's round trip and its errors.
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "flt/metatrain/tasks.h"
#include "flt/metatrain/tuned_reference.h"
#include "test_util.h"

namespace fm = flt::metatrain;
using namespace flt::testing;

namespace {

class TunedReference : public SeededTest {};

std::unique_ptr<fm::Task> instance(fm::TaskFamily family, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return fm::sample_task(family, gen);
}

}  // namespace

TEST_F(TunedReference, ScoreIsTheClippedLogRatio) {
  EXPECT_DOUBLE_EQ(fm::reference_score(2.0, 1.0), std::log(2.0));
  EXPECT_DOUBLE_EQ(fm::reference_score(0.25, 0.5), -std::log(2.0));
  EXPECT_DOUBLE_EQ(fm::reference_score(3.0, 3.0), 0.0);
  EXPECT_DOUBLE_EQ(fm::reference_score(1e-9, 1.0), -fm::kReferenceScoreClip);
  EXPECT_DOUBLE_EQ(fm::reference_score(0.0, 1.0), -fm::kReferenceScoreClip);
  EXPECT_DOUBLE_EQ(fm::reference_score(std::numeric_limits<double>::infinity(), 1.0),
                   fm::kReferenceScoreClip);
  EXPECT_DOUBLE_EQ(fm::reference_score(std::nan(""), 1.0), fm::kReferenceScoreClip);
  // A tuned reference can fit exactly (loss 0): scored against float32's smallest normal number.
  EXPECT_DOUBLE_EQ(fm::reference_score(1.0, 0.0), fm::kReferenceScoreClip);
  EXPECT_DOUBLE_EQ(fm::reference_score(0.0, 0.0), 0.0);
  expect_error([] { fm::reference_score(1.0, -0.5); }, {"reference loss", "got -0.5"});
  expect_error([] { fm::reference_score(1.0, std::nan("")); }, {"reference loss", "got nan"});
}

TEST_F(TunedReference, TuningIsDeterministicAndPicksTheGridsBest) {
  const auto task = instance(fm::TaskFamily::kTabular, 3);
  const auto a = fm::tune_adamw_cosine(*task, 60, 7);
  const auto b = fm::tune_adamw_cosine(*task, 60, 7);
  const auto grid = fm::default_reference_grid();
  ASSERT_EQ(a.by_lr.size(), grid.size());
  EXPECT_EQ(a.by_lr, b.by_lr);
  double best = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < grid.size(); ++i) {
    EXPECT_EQ(a.by_lr[i], fm::adamw_cosine_final_loss(*task, 60, grid[i], 7)) << grid[i];
    best = std::min(best, a.by_lr[i]);
  }
  EXPECT_EQ(a.final_loss, best);
  EXPECT_EQ(a.by_lr[std::find(grid.begin(), grid.end(), a.lr) - grid.begin()], best);
  // Another seed is another start and other batches.
  EXPECT_NE(fm::tune_adamw_cosine(*task, 60, 8).by_lr, a.by_lr);
}

TEST_F(TunedReference, CacheTunesEachKeyOnceAndReadsItBack) {
  const auto path = temp_path("references.tsv");
  std::filesystem::remove(path);
  const auto task = instance(fm::TaskFamily::kNoisyQuadratic, 1);
  const auto other = instance(fm::TaskFamily::kNoisyQuadratic, 2);
  fm::TunedReference first;
  {
    fm::ReferenceCache cache(path);
    first = cache.get(*task, 40, 0);
    cache.get(*task, 40, 0);
    cache.get(*task, 41, 0);   // another length
    cache.get(*other, 40, 0);  // another instance (same family)
    EXPECT_EQ(cache.tuned(), 3);
    EXPECT_EQ(cache.size(), 3u);
  }
  fm::ReferenceCache reread(path);
  EXPECT_EQ(reread.size(), 3u);
  const auto& again = reread.get(*task, 40, 0);
  EXPECT_EQ(reread.tuned(), 0);
  EXPECT_EQ(again.lr, first.lr);
  EXPECT_EQ(again.final_loss, first.final_loss);  // written with 17 digits: exact
  EXPECT_EQ(again.by_lr, first.by_lr);
  std::ofstream(path, std::ios::app) << "a key without fields\n";
  expect_error([&] { fm::ReferenceCache broken(path); }, {path, "line 4"});
}
