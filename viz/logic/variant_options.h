#pragma once
// Internal to viz/logic: AttentionOptions for an alternative index (default options).

#include "flt/attention/variants.h"

namespace flt::viz {

/// Default-constructed options of alternative `index` of AttentionOptions (clamped to the range).
flt::attention::AttentionOptions variant_options(int index);

}  // namespace flt::viz
