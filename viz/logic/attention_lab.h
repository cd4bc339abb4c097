#pragma once
// Attention Lab (GL-free): the attention matrix of a chosen variant with its own knobs (through
// the library's `materialize`) next to the exact attention it approximates on the same q, k
// (softmax; for FLT the exact RPE-masked softmax of the same module), their difference, the
// relative error and the time per forward call. Computed off the UI thread.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "logic/async_job.h"
#include "logic/scenario.h"

namespace flt::viz {

/// q and k taken from the live-trained model (layer 0), (heads, L, D) row-major.
struct LiveQueriesKeys {
  std::vector<float> q, k;
  int heads = 0, length = 0, dim = 0;
};

/// SchoenbAt's dot-product kernels (attention::schoenberg_kernels()), indexed by
/// AttentionLabSettings::schoenbat_kernel.
const std::vector<std::string>& schoenbat_kernel_names();
/// schoenbat_kernel_names()[index], clamped to the list.
const std::string& schoenbat_kernel_name(int index);

/// Why `settings` cannot be computed, in the panel's words ("R must be positive ..."), naming the
/// bad value; empty when they can.
std::string attention_settings_error(const AttentionLabSettings& settings);

/// One line under a variant's error: what the number measures and the knob that moves it.
std::string attention_error_hint(const std::string& variant);

/// "random", "local (near-diagonal)", "periodic", "live model (layer 0)".
const char* attention_input_label(AttentionInput input);

struct AttentionLabResult {
  bool valid = false;
  std::string variant;
  std::string reference;  ///< what `exact` is: "softmax" or "RPE-masked softmax"
  std::string error;      ///< set when the computation threw (message shown in the UI)
  int heads = 0, length = 0;
  std::vector<float> approx, exact, diff;  ///< (heads, L, L) row-major; diff = approx - exact
  float diff_max_abs = 0.0f;
  double relative_error = 0.0;  ///< ||A - A_exact||_F / ||A_exact||_F
  double variant_ms = 0.0;      ///< median time of one forward(q, k, v) call
  double softmax_ms = 0.0;      ///< the same for exact softmax attention
};

/// Runs the computation on the calling thread. `live` is used when settings.input is kLiveModel.
AttentionLabResult compute_attention_lab(const AttentionLabSettings& settings, uint64_t seed,
                                         const LiveQueriesKeys* live);

/// What one Attention Lab computation reads.
struct AttentionLabRequest {
  AttentionLabSettings settings;
  uint64_t seed = 0;
  LiveQueriesKeys live;
};

/// Runs compute_attention_lab on a worker; the UI polls and never blocks.
class AttentionLab : public AsyncJob<AttentionLabRequest, AttentionLabResult> {
 public:
  AttentionLab();
  using AsyncJob::request;
  /// Asks for a result for these inputs; if one is being computed, the latest request waits.
  void request(const AttentionLabSettings& settings, uint64_t seed, LiveQueriesKeys live = {}) {
    request(AttentionLabRequest{settings, seed, std::move(live)});
  }
};

}  // namespace flt::viz
