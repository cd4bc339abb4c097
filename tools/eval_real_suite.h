#pragma once
// flt-eval-optim's real suite: held-out real training runs (training_runs.h) against Adam at
// 1e-3, Adam / AdamW with cosine decay tuned per run and the no-tuning optimizers; prints the
// tables and summary, writes DIR/eval-real.csv, DIR/eval-real-curves.csv, DIR/eval-real.png and
// one DIR/eval-real-TASK.png per run.
#include <string>
#include <vector>

#include "flt/harness/training_runs.h"

namespace flt::tools {

/// What the command line sets for the real suite.
struct RealSuiteOptions {
  std::string out;
  std::vector<std::string> only;
  std::vector<std::string> weights;  // NAME=FILE or NAME=DESIGN:FILE (weights_spec)
  flt::harness::MnemosyneDesign design = flt::harness::MnemosyneDesign::kCoordinateMemory;
  flt::harness::RunEvalOptions eval;
  double steps_scale = 1.0;
  /// Part `part` of `parts`: only the runs whose index i (in the suite's order, after --tasks)
  /// has i % parts == part, so that several processes share the suite.
  int64_t part = 0, parts = 1;
  bool quick = false;
  bool development = false;   // the development runs instead of the held-out ones
  bool known_length = false;  // also Mnemosyne told the run's length (its cosine annealing)
};

/// One --weights contender: NAME=FILE, or NAME=DESIGN:FILE to choose its design (coordinate-memory
/// or tensor-schedule) for this contender alone, so both designs share one run's baselines.
struct WeightsSpec {
  std::string name, file;
  flt::harness::MnemosyneDesign design;
};
/// Parses `spec`; `fallback` is the design of a spec without a prefix (--design). Throws naming
/// the spec when it has no '=' or an empty name.
WeightsSpec weights_spec(const std::string& spec, flt::harness::MnemosyneDesign fallback);

/// The held-out real training runs: tables, summary, CSVs and figures.
void run_real_suite(const RealSuiteOptions& options);

}  // namespace flt::tools
