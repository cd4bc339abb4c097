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

/// While one exists, `favor_attention` on this thread takes its blocked passes (no autograd) and
/// its fused function (autograd) at every size they cover, small non-causal calls included (which
/// otherwise take the whole-sequence path, faster there): what the tests hold to the composite
/// reference at their small sizes. Nests.
class FavorBlockedGuard {
 public:
  FavorBlockedGuard();
  ~FavorBlockedGuard();
  FavorBlockedGuard(const FavorBlockedGuard&) = delete;
  FavorBlockedGuard& operator=(const FavorBlockedGuard&) = delete;
  /// Whether one exists on this thread.
  static bool active();
};

}  // namespace flt::attention
