#pragma once
// The fixture the viz logic tests share (test_viz_logic.cpp, test_viz_computations.cpp).

#include <gtest/gtest.h>

#include <utility>

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

  /// Three steps of Adam at sequence length 3 from seed 1, then the session switched to
  /// Mnemosyne (not yet stepped): two runs to compare. Returns {Adam's settings, Mnemosyne's}.
  static std::pair<flt::viz::TrainingSettings, flt::viz::TrainingSettings> adam_then_mnemosyne(
      flt::viz::TrainingSession& session) {
    flt::viz::TrainingSettings adam;
    adam.length = 3;
    train(session, adam, 1, 3);
    flt::viz::TrainingSettings learned = adam;
    learned.optimizer = flt::viz::TrainingOptimizer::kMnemosyne;
    session.configure(learned, 1);
    return {adam, learned};
  }
};
