// The evaluation harness on the synthetic suite: per-contender tuning grids, win and tie rates,
// determinism.
#include <torch/optim/adam.h>

#include <algorithm>
#include <cmath>

#include "flt/harness/evaluate.h"
#include "flt/optim/mnemosyne.h"
#include "test_util.h"

namespace fo = flt::optim;

namespace fh = flt::harness;

namespace {
class Evaluate : public flt::testing::SeededTest {};
}  // namespace

TEST_F(Evaluate, TunesEachContenderOnItsOwnGridAndIsDeterministic) {
  auto tasks = fh::held_out_tasks();
  tasks.resize(1);  // rastrigin-2d
  tasks[0].steps = 30;
  fh::Contender adam;
  adam.name = "adam";
  adam.make = [](double lr) -> fh::OptimizerFactory {
    return [lr](std::vector<torch::Tensor> p) {
      return std::make_unique<torch::optim::Adam>(std::move(p), torch::optim::AdamOptions(lr));
    };
  };
  fh::Contender learned;
  learned.name = "learned (tuned)";
  learned.grid = fh::multiplier_grid();
  learned.make = [](double lr) -> fh::OptimizerFactory {
    return [lr](std::vector<torch::Tensor> p) {
      return std::make_unique<fo::Mnemosyne>(std::move(p), fo::MnemosyneOptions(lr));
    };
  };
  fh::EvalOptions options;
  options.tuning_seeds = 1;
  options.eval_seeds = 2;
  options.progress = false;
  const auto rows = fh::evaluate(tasks, {adam, learned}, options);
  ASSERT_EQ(rows.size(), 2u);
  const auto in = [](double x, const std::vector<double>& grid) {
    return std::find(grid.begin(), grid.end(), x) != grid.end();
  };
  EXPECT_TRUE(in(rows[0].lr, fh::learning_rate_grid())) << rows[0].lr;
  EXPECT_TRUE(in(rows[1].lr, fh::multiplier_grid())) << rows[1].lr;
  EXPECT_EQ(fh::multiplier_grid().size(), 7u);
  EXPECT_NEAR(fh::multiplier_grid()[3], 1.0, 1e-12);  // the untuned default is on the grid
  for (const auto& row : rows) {
    EXPECT_TRUE(std::isfinite(row.meta_objective)) << row.contender;
    EXPECT_GE(row.win_rate, 0.0);
    EXPECT_LE(row.win_rate + row.tie_rate, 1.0);
    EXPECT_EQ(row.median_curve.size(), 31u);
  }
  EXPECT_EQ(rows[0].win_rate, 0.0) << "the reference never beats itself";
  EXPECT_EQ(rows[0].tie_rate, 1.0) << "and always ties with itself";
  const auto again = fh::evaluate(tasks, {adam, learned}, options);
  EXPECT_EQ(again[1].median_final, rows[1].median_final);
  EXPECT_EQ(again[1].lr, rows[1].lr);
}
