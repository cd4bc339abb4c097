#pragma once
// The attention variants flt-lab offers: the alternatives of the library's AttentionOptions, in
// order, so a variant added there appears in every menu without a viz change. Their indices are
// the state string's t.variant and l.variant.

#include <string>
#include <vector>

namespace flt::viz {

/// attention_name of each AttentionOptions alternative: "softmax", "linear", ...
const std::vector<std::string>& variant_names();

/// Index of the variant called `name`; -1 when the library has none.
int variant_index(const std::string& name);

/// variant_names()[index], or "?" when out of range.
const std::string& variant_name(int index);

}  // namespace flt::viz
