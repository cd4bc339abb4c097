#include "logic/variants.h"

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

const std::vector<std::string>& variant_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (int i = 0; i < kAlternatives; ++i)
      out.push_back(flt::attention::attention_name(variant_options(i)));
    return out;
  }();
  return names;
}

int variant_index(const std::string& name) {
  const auto& names = variant_names();
  const auto it = std::find(names.begin(), names.end(), name);
  return it == names.end() ? -1 : static_cast<int>(it - names.begin());
}

const std::string& variant_name(int index) {
  static const std::string unknown = "?";
  const auto& names = variant_names();
  return index >= 0 && index < static_cast<int>(names.size()) ? names[index] : unknown;
}

}  // namespace flt::viz
