#pragma once
// Internal to the library and its tests (not installed).

#include "flt/attention/feature_map.h"

namespace flt::attention {

/// While one exists, `favor_attention` on this thread takes the composite path with autograd
/// recording (features of the whole sequence, autograd's backward): the reference the tests hold
/// the fused backward to. Nests.
class FavorCompositeGuard {
 public:
  FavorCompositeGuard();
  ~FavorCompositeGuard();
  FavorCompositeGuard(const FavorCompositeGuard&) = delete;
  FavorCompositeGuard& operator=(const FavorCompositeGuard&) = delete;
  /// Whether one exists on this thread.
  static bool active();
};

}  // namespace flt::attention
