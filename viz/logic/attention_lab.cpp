#include "logic/attention_lab.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <type_traits>
#include <variant>

#include "flt/attention/flt.h"
#include "flt/attention/fourier.h"
#include "flt/attention/performer.h"
#include "flt/attention/schoenbat.h"
#include "flt/attention/softmax.h"
#include "flt/attention/variants.h"
#include "flt/detail/statistics.h"
#include "logic/kernel_explorer.h"
#include "logic/tensors.h"
#include "logic/variant_options.h"
#include "logic/variants.h"

namespace flt::viz {
namespace {

// (H, L, D) structured inputs: sinusoidal codes of the position (local) or of position mod 8
// (periodic); similar codes give large q.k, so attention concentrates near the diagonal or on a
// lattice of stripes.
torch::Tensor position_codes(int heads, int length, int dim, bool periodic, torch::Generator& gen) {
  auto positions = torch::arange(length, torch::kFloat);
  if (periodic) positions = torch::fmod(positions, 8.0);
  auto frequencies =
      torch::exp(-torch::arange(dim, torch::kFloat) * (std::log(100.0f) / std::max(1, dim)));
  auto phases = at::rand({heads, 1, dim}, gen) * 6.2831853f;
  auto angle = positions.view({1, length, 1}) * frequencies.view({1, 1, dim}) *
               (periodic ? 0.785398f * 8 : 1.0f);
  return torch::cos(angle + phases) * std::sqrt(static_cast<float>(dim)) * 0.6f;
}

template <typename Fn>
double median_ms(Fn&& fn, int repeats = 5) {
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    times.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count());
  }
  return flt::detail::median(times);
}

}  // namespace

const std::vector<std::string>& schoenbat_kernel_names() {
  return flt::attention::schoenberg_kernels();
}

const std::string& schoenbat_kernel_name(int index) {
  const auto& names = schoenbat_kernel_names();
  return names[std::clamp<size_t>(std::max(index, 0), 0, names.size() - 1)];
}

std::string attention_settings_error(const AttentionLabSettings& settings) {
  // FourierAttentionOptions::r_init takes 0 as "match R to the head dimension"; the panel has no
  // such choice, so its R must be a width
  const double r = settings.fourier_r;
  if (variant_name(settings.variant) == "fourier" && !(r > 0.0 && std::isfinite(r))) {
    char text[200];
    std::snprintf(text, sizeof(text),
                  "R must be a positive number (the kernel is phi(sin(R x) / (R x))), got %g: "
                  "showing the last pictures computed",
                  r);
    return text;
  }
  return {};
}

std::string attention_error_hint(const std::string& variant) {
  if (variant == "softmax")
    return "Exact: 0 by construction. The logit scale sharpens or flattens it.";
  if (variant == "linear")
    return "A different kernel, not an estimate: no knob of its own shrinks the error; smaller "
           "q,k scale (flatter softmax) does.";
  if (variant == "performer")
    return "An unbiased estimate of softmax: the error falls like 1/sqrt(m) with features m, and "
           "grows fast with q,k scale.";
  if (variant == "fourier")
    return "FourierFormer's own kernel, not an estimate of softmax: the error says how different "
           "they are. R sets the kernel's width.";
  if (variant == "flt")
    return "Estimates RPE-masked softmax: features m for the softmax part, RPE features r for the "
           "mask; raise r when more m stops helping.";
  if (variant == "schoenbat")
    return "A dot-product kernel fitted to exp: features D help little here; q,k scale decides how "
           "close the fit is.";
  return "Relative Frobenius error against the exact attention on the same q and k.";
}

const char* attention_input_label(AttentionInput input) {
  switch (input) {
    case AttentionInput::kRandom: return "random";
    case AttentionInput::kLocal: return "local (near-diagonal)";
    case AttentionInput::kPeriodic: return "periodic";
    case AttentionInput::kLiveModel: return "live model (layer 0)";
  }
  return "?";
}

AttentionLabResult compute_attention_lab(const AttentionLabSettings& settings, uint64_t seed,
                                         const LiveQueriesKeys* live) {
  return computed_or_error<AttentionLabResult>([&](AttentionLabResult& result) {
    result.error = attention_settings_error(settings);
    if (!result.error.empty()) return;
    torch::NoGradGuard no_grad;
    auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    torch::Tensor q, k;
    int heads = settings.heads, length = settings.length, dim = settings.head_dim;
    switch (settings.input) {
      case AttentionInput::kRandom:
        q = at::randn({heads, length, dim}, gen);
        k = at::randn({heads, length, dim}, gen);
        break;
      case AttentionInput::kLocal:
      case AttentionInput::kPeriodic: {
        const bool periodic = settings.input == AttentionInput::kPeriodic;
        q = position_codes(heads, length, dim, periodic, gen);
        k = q + 0.1f * at::randn({heads, length, dim}, gen);
        break;
      }
      case AttentionInput::kLiveModel:
        if (live == nullptr || live->q.empty()) {
          result.error = "no live model yet: open Live Training first";
          return;
        }
        heads = live->heads;
        length = live->length;
        dim = live->dim;
        q = torch::tensor(live->q).view({heads, length, dim});
        k = torch::tensor(live->k).view({heads, length, dim});
        break;
    }
    // the live model's q and k are shown as the model computes them: the scale is for the
    // synthetic inputs only
    const double scale = settings.input == AttentionInput::kLiveModel ? 1.0 : settings.input_scale;
    q = (q * scale).unsqueeze(0);  // (1, H, L, D)
    k = (k * scale).unsqueeze(0);
    auto v = at::randn({1, heads, length, dim}, gen);
    auto options = variant_options(settings.variant);
    std::visit(
        [&settings](auto& o) {  // each variant's own knobs
          using Options = std::decay_t<decltype(o)>;
          namespace fa = flt::attention;
          if constexpr (std::is_same_v<Options, fa::SoftmaxAttentionOptions>) {
            o.scale(settings.softmax_scale);
          } else if constexpr (std::is_same_v<Options, fa::LinearAttentionOptions>) {
            o.eps(settings.linear_eps);
          } else if constexpr (std::is_same_v<Options, fa::PerformerAttentionOptions>) {
            o.features(settings.features);
          } else if constexpr (std::is_same_v<Options, fa::FourierAttentionOptions>) {
            flt::kernels::FourierPhi phi;
            int64_t power;
            kernel_phi_choice(settings.fourier_phi, &phi, &power);
            o.r_init(settings.fourier_r).phi(phi).power(power);
          } else if constexpr (std::is_same_v<Options, fa::FLTAttentionOptions>) {
            o.features(settings.features)
                .family(static_cast<fa::SpectrumFamily>(settings.flt_family))
                .components(settings.flt_components)
                .rpe_features(settings.flt_rpe_features);
          } else if constexpr (std::is_same_v<Options, fa::SchoenbAttentionOptions>) {
            o.features(settings.features).kernel(schoenbat_kernel_name(settings.schoenbat_kernel));
          }
        },
        options);
    auto handle = flt::attention::make_attention(options, heads, dim);
    flt::attention::AttentionCall call;
    call.causal = settings.causal;
    auto approx = handle.attention->materialize(q, k, call)[0];  // (H, L, L)
    // FLT approximates RPE-masked softmax: compare with that, from the same module (same spectrum).
    torch::Tensor exact;
    if (const auto* flt_module =
            dynamic_cast<const flt::attention::FLTAttentionImpl*>(handle.attention)) {
      exact = flt_module->exact_attention(q, k, call)[0];
      result.reference = "RPE-masked softmax";
    } else {
      exact = flt::attention::softmax_attention_weights(q, k, settings.causal)[0];
      result.reference = "softmax";
    }
    auto diff = approx - exact;
    result.variant = flt::attention::attention_name(options);
    result.heads = heads;
    result.length = length;
    result.approx = to_vector(approx);
    result.exact = to_vector(exact);
    result.diff = to_vector(diff);
    result.diff_max_abs = diff.abs().max().item<float>();
    result.relative_error = (diff.norm() / exact.norm().clamp_min(1e-30)).item<double>();
    result.variant_ms = median_ms([&] { handle.attention->forward(q, k, v, call); });
    result.softmax_ms =
        median_ms([&] { flt::attention::softmax_attention(q, k, v, settings.causal); });
    result.valid = true;
  });
}

AttentionLab::AttentionLab()
    : AsyncJob([](const AttentionLabRequest& r) {
        return compute_attention_lab(
            r.settings, r.seed, r.settings.input == AttentionInput::kLiveModel ? &r.live : nullptr);
      }) {}

}  // namespace flt::viz
