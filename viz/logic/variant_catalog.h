#pragma once
// The attention variants flt-lab can offer, enumerated from the library's AttentionOptions variant
// (so a variant added there appears here without a viz change), plus the planned variants whose
// modules have not landed yet (named, marked unavailable).

#include <string>
#include <vector>

namespace flt::viz {

struct VariantInfo {
  std::string name;        ///< attention_name(...) of the alternative, or the planned name
  bool available = false;  ///< true: index is a usable AttentionOptions alternative
  int index = -1;          ///< alternative index in AttentionOptions (available ones)
  std::string note;        ///< for unavailable ones: which issue brings it
};

/// Available variants first (in AttentionOptions order), then the planned ones not yet there.
const std::vector<VariantInfo>& attention_variants();

/// Number of AttentionOptions alternatives (available variants).
int available_variant_count();

}  // namespace flt::viz
