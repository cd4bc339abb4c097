#include "logic/variant_catalog.h"

#include <algorithm>
#include <type_traits>
#include <utility>

#include "logic/variant_options.h"

namespace flt::viz {
namespace {

using flt::attention::AttentionOptions;
constexpr int kAlternatives = static_cast<int>(std::variant_size_v<AttentionOptions>);

template <size_t... I>
AttentionOptions options_at(int index, std::index_sequence<I...>) {
  AttentionOptions result;
  // Picks alternative `index` with its default options; every Options type so far is default
  // constructible (a future one that is not would need its knobs here, and fails to compile).
  ((static_cast<int>(I) == index
        ? (void)(result = std::variant_alternative_t<I, AttentionOptions>{})
        : (void)0),
   ...);
  return result;
}

}  // namespace

AttentionOptions variant_options(int index) {
  index = std::clamp(index, 0, kAlternatives - 1);
  return options_at(index, std::make_index_sequence<kAlternatives>{});
}

int available_variant_count() {
  return kAlternatives;
}

const std::vector<VariantInfo>& attention_variants() {
  static const std::vector<VariantInfo> kVariants = [] {
    std::vector<VariantInfo> out;
    for (int i = 0; i < kAlternatives; ++i) {
      out.push_back({flt::attention::attention_name(variant_options(i)), true, i, ""});
    }
    // Planned variants (DESIGN.md section 3) and the issue that brings each one.
    const std::pair<const char*, const char*> planned[] = {{"performer", "issue 3"},
                                                           {"fourier", "issue 4"},
                                                           {"flt", "issue 3"},
                                                           {"schoenbat", "issue 3"}};
    for (const auto& [name, issue] : planned) {
      const bool present =
          std::any_of(out.begin(), out.end(), [&](const VariantInfo& v) { return v.name == name; });
      if (!present)
        out.push_back({name, false, -1, std::string("not yet in the library (") + issue + ")"});
    }
    return out;
  }();
  return kVariants;
}

}  // namespace flt::viz
