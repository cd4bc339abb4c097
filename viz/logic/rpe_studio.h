#pragma once
// RPE Studio (GL-free): for a spectrum family of FLT (attention::FLTAttention), the spectrum g(xi)
// (module.spectrum), the exact RPE function f(delta) (module.rpe_function) next to its
// random-feature estimate (the middle row of module.approximate_mask), the max error as the number
// of RPE features r changes, and for position_dim 2 the 2-D f over a grid (FLT paper Fig. 4).
// Grids are small (a few ms per recompute); the app recomputes only when a knob changes.

#include <cstdint>
#include <string>
#include <vector>

#include "logic/scenario.h"

namespace flt::viz {

/// Display names of the library's spectrum families (attention::spectrum_families()), indexed by
/// RpeSettings::family and AttentionLabSettings::flt_family (SpectrumFamily values).
const std::vector<std::string>& rpe_family_labels();
/// rpe_family_labels()[family], or "?" when out of range.
const std::string& rpe_family_label(int family);
/// True for the family whose smoothness k is a knob (local).
bool rpe_family_uses_smoothness(int family);

inline constexpr int kRpeProposalCount = 2;  ///< attention::ProposalKind: Gaussian, Cauchy
const char* rpe_proposal_label(int proposal);

struct RpeCurves {
  std::vector<float> xi, g;                 ///< g along the first frequency axis
  std::vector<float> delta, exact, approx;  ///< f along the first position axis
  float max_error = 0.0f;                   ///< max |approx - exact| over delta
  std::vector<int> error_features;          ///< r values of the error sweep
  std::vector<float> error_by_features;     ///< max error at each r (same seed)
  int grid = 0;                             ///< position_dim 2: grid x grid map of f
  std::vector<float> map_2d;                ///< row-major, top row = +extent
  float map_lo = 0.0f, map_hi = 0.0f;
  std::string error;  ///< set when the library threw
};

/// seed: the scenario seed mixed with the redraw counter. points: 1-D samples; grid: 2-D side.
RpeCurves compute_rpe_curves(const RpeSettings& settings, uint64_t seed, int points = 97,
                             int grid = 41);

/// Max |approximate_mask - rpe_function| over the middle row for `features` RPE features.
double rpe_max_error(const RpeSettings& settings, uint64_t seed, int features, int points = 97);

}  // namespace flt::viz
