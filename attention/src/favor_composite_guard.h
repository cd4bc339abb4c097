#pragma once
// Internal to the library and its tests (not installed).

#include "flt/attention/feature_map.h"

namespace flt::attention {

/// The path `favor_attention` takes with autograd recording on this thread while a guard of it
/// exists, whatever the call's size: kComposite, features of the whole sequence and autograd's
/// backward (the reference the tests hold the fused backward to); kFused, the fused function at
/// every size it covers, small non-causal calls included (which otherwise take the composite path,
/// faster there: what the tests hold to the reference at their small sizes). Guards nest.
enum class FavorPath { kComposite, kFused };

template <FavorPath Path>
class FavorPathGuard {
 public:
  FavorPathGuard();
  ~FavorPathGuard();
  FavorPathGuard(const FavorPathGuard&) = delete;
  FavorPathGuard& operator=(const FavorPathGuard&) = delete;
  /// Whether one exists on this thread.
  static bool active();
};
using FavorCompositeGuard = FavorPathGuard<FavorPath::kComposite>;
using FavorFusedGuard = FavorPathGuard<FavorPath::kFused>;

}  // namespace flt::attention
