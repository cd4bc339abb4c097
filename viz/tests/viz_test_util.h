#pragma once
// The fixture the viz logic tests share (test_viz_logic.cpp, test_viz_computations.cpp).

#include <gtest/gtest.h>

#include "flt/runtime.h"

/// Sets the runtime up (threads, no banner) before every test.
class VizLogic : public ::testing::Test {
 protected:
  void SetUp() override { flt::init(/*quiet=*/true); }
};
