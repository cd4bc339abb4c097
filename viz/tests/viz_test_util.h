#pragma once
// The fixture the viz logic tests share (test_viz_logic.cpp, test_viz_computations.cpp).

#include <gtest/gtest.h>

#include "flt/runtime.h"
#include "logic/training.h"

/// Sets the runtime up (threads, no banner) before every test.
class VizLogic : public ::testing::Test {
 protected:
  void SetUp() override { flt::init(/*quiet=*/true); }

  /// A fresh model for `settings` from `seed`, trained `steps` steps on the calling thread.
  static void train(flt::viz::TrainingSession& session, const flt::viz::TrainingSettings& settings,
                    uint64_t seed, int steps) {
    session.configure(settings, seed);
    session.run_steps(steps);
  }
};
