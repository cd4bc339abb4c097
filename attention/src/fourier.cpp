#include "flt/attention/fourier.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace flt::attention {
namespace {

void check_power(const char* fn, int64_t power, FourierPhi phi) {
  TORCH_CHECK(power >= 1 && power <= kernels::kMaxFourierPower, fn, ": power must be in [1, ",
              kernels::kMaxFourierPower, "], got ", power);
  if (phi == FourierPhi::kPower && power % 2 == 1) {
    TORCH_WARN_ONCE(fn, ": odd power ", power, " makes weights signed; the paper's training ",
                    "diverged with odd powers (supplement Table 7). Use an even power or phi abs.");
  }
}

}  // namespace

torch::Tensor fourier_r_per_head_dim(const char* fn, const torch::Tensor& R, int64_t heads,
                                     int64_t head_dim) {
  TORCH_CHECK(R.defined(), fn, ": R must be a defined tensor");
  at::Tensor shaped;
  if (R.numel() == 1 && R.dim() <= 1) {
    shaped = R.reshape({1, 1});
  } else if (R.dim() == 1 && R.size(0) == head_dim) {
    shaped = R.view({1, head_dim});
  } else if (R.dim() == 2 && R.size(0) == heads && (R.size(1) == 1 || R.size(1) == head_dim)) {
    shaped = R;
  } else {
    TORCH_CHECK(false, fn, ": R must be a scalar, (D) = (", head_dim, "), (H, 1) = (", heads,
                ", 1) or (H, D) = (", heads, ", ", head_dim, "), got ", R.sizes());
  }
  return shaped.abs().expand({heads, head_dim});
}

torch::Tensor fourier_attention(const torch::Tensor& q, const torch::Tensor& k,
                                const torch::Tensor& v, const torch::Tensor& R, int64_t power,
                                bool causal, FourierPhi phi) {
  check_qkv("fourier_attention", q, k, v, causal);
  check_power("fourier_attention", power, phi);
  TORCH_CHECK(R.defined() && R.scalar_type() == q.scalar_type(), "fourier_attention: R has dtype ",
              R.defined() ? R.scalar_type() : at::ScalarType::Undefined, " but q has ",
              q.scalar_type());
  TORCH_CHECK(R.device() == q.device(), "fourier_attention: R is on ", R.device(), " but q is on ",
              q.device());
  const auto r = fourier_r_per_head_dim("fourier_attention", R, q.size(1), q.size(3));
  if (r.device().is_cpu()) {  // (a check on the GPU would synchronise every call)
    const auto bad = (~at::isfinite(R)).logical_or(R == 0).flatten();
    if (bad.any().item<bool>()) {
      const int64_t index = bad.to(at::kByte).argmax().item<int64_t>();
      TORCH_CHECK(
          false, "fourier_attention: R must be finite and nonzero (it is used through |R|), ",
          "got ", R.flatten()[index].item<double>(), " at flat index ", index, " of R ", R.sizes());
    }
  }
  return kernels::fourier_attention_op(q, k, v, r, power, phi, causal);
}

torch::Tensor fourier_attention_weights(const torch::Tensor& q, const torch::Tensor& k,
                                        const torch::Tensor& R, int64_t power, bool causal,
                                        FourierPhi phi) {
  check_qkv("fourier_attention_weights", q, k, {}, causal);
  // The weights are the output for v = identity: one copy of the math, the fused kernel's numerics.
  const int64_t lk = k.size(2);
  const auto eye = at::eye(lk, q.options()).expand({q.size(0), q.size(1), lk, lk});
  const auto weights = fourier_attention(q, k, eye, R, power, causal, phi);
  // Causal: a row that saw a NaN is NaN in every column of v = identity, the masked ones too (the
  // kernel's NaN weight times a 0 of the identity); those weights are 0 whatever the inputs.
  return causal ? weights.tril() : weights;
}

// ---- estimators --------------------------------------------------------------------------------

namespace {

void check_estimator_inputs(const char* fn, const torch::Tensor& points,
                            const torch::Tensor& samples) {
  TORCH_CHECK(points.defined() && points.dim() == 2, fn, ": points must be (P, D), got ",
              points.defined() ? points.sizes() : at::IntArrayRef{});
  TORCH_CHECK(samples.defined() && samples.dim() == 2, fn, ": samples must be (N, D), got ",
              samples.defined() ? samples.sizes() : at::IntArrayRef{});
  TORCH_CHECK(points.size(1) >= 1, fn, ": the dimension D must be >= 1, got points ",
              points.sizes());
  TORCH_CHECK(samples.size(1) == points.size(1), fn, ": samples have D = ", samples.size(1),
              " but points have D = ", points.size(1));
  TORCH_CHECK(samples.size(0) >= 1, fn, ": needs at least one sample, got samples ",
              samples.sizes());
  TORCH_CHECK(
      at::isFloatingType(points.scalar_type()) && samples.scalar_type() == points.scalar_type(), fn,
      ": points and samples must share a floating dtype, got ", points.scalar_type(), " and ",
      samples.scalar_type());
  TORCH_CHECK(samples.device() == points.device(), fn, ": samples are on ", samples.device(),
              " but points are on ", points.device());
}

void check_radius(const char* fn, double R) {
  TORCH_CHECK(std::isfinite(R) && R > 0, fn, ": R must be positive and finite, got ", R);
}

constexpr double kPi = 3.14159265358979323846;

// Rows of points per block so that a (block, N, D) temporary stays around 2M entries.
int64_t point_block(int64_t samples, int64_t dim) {
  return std::max<int64_t>(1, (int64_t{1} << 21) / std::max<int64_t>(1, samples * dim));
}

}  // namespace

double fourier_kernel_integral(int64_t power, FourierPhi phi) {
  TORCH_CHECK(power >= 1 && power <= kernels::kMaxFourierPower,
              "fourier_kernel_integral: power must be in [1, ", kernels::kMaxFourierPower,
              "], got ", power);
  const bool closed_form = phi == FourierPhi::kPower || (phi == FourierPhi::kAbs && power % 2 == 0);
  const bool diverges = phi == FourierPhi::kSigmoid || power == 1;
  TORCH_CHECK(closed_form, "fourier_kernel_integral: A = integral of phi(sin z / z) dz is ",
              diverges ? "infinite" : "not known in closed form", " for phi ",
              kernels::fourier_phi_name(phi), " with power ", power,
              "; the density estimator needs phi power (any p) or abs with an even p");
  // integral over R of (sin z / z)^n = pi / (2^(n-1) (n-1)!) sum_{k <= n/2} (-1)^k C(n, k)
  // (n-2k)^(n-1) (n >= 1; the k = n/2 term is 0 for even n). Long double: the alternating sum
  // cancels about five digits at n = 32.
  const int64_t n = power;
  long double sum = 0.0L, binomial = 1.0L;
  for (int64_t k = 0; 2 * k <= n; ++k) {
    if (k > 0) binomial = binomial * static_cast<long double>(n - k + 1) / k;
    const long double term = binomial * std::pow(static_cast<long double>(n - 2 * k), n - 1);
    sum += (k % 2 == 0) ? term : -term;
  }
  long double denominator = std::pow(2.0L, static_cast<long double>(n - 1));
  for (int64_t i = 2; i < n; ++i) denominator *= i;
  return static_cast<double>(3.14159265358979323846264338327950288L * sum / denominator);
}

torch::Tensor fourier_density_estimate(const torch::Tensor& points, const torch::Tensor& samples,
                                       double R, int64_t power, FourierPhi phi) {
  constexpr const char* kFn = "fourier_density_estimate";
  check_estimator_inputs(kFn, points, samples);
  check_radius(kFn, R);
  const double A = fourier_kernel_integral(power, phi);  // rejects phi without a finite A
  const int64_t n = samples.size(0), d = samples.size(1), count = points.size(0);
  // The attention normalises its weights, so each point x gets an anchor key at x itself with
  // kernel value phi(s(0))^D = 1 (the largest weight: no underflow), and values (1, 0) for the
  // anchor and (0, 1) for the samples: the output is (1, S) / (1 + S) with S = sum_i K(x, k_i),
  // so S is the ratio of its two entries, at full relative precision. (With an odd power S can
  // be negative; a point where 1 + S is exactly 0 would give 0 / 0.)
  auto values = at::zeros({n + 1, 2}, points.options());
  values.select(1, 0)[0] = 1;
  values.slice(0, 1).select(1, 1).fill_(1);
  const auto r = at::full({}, R, points.options());
  const int64_t block = point_block(n + 1, d);
  std::vector<at::Tensor> sums;
  for (int64_t start = 0; start < count; start += block) {
    const int64_t c = std::min(block, count - start);
    const auto x = points.slice(0, start, start + c);  // (c, D)
    const auto keys =
        at::cat({x.unsqueeze(1), samples.unsqueeze(0).expand({c, n, d})}, 1);  // (c, N+1, D)
    const auto out = fourier_attention(x.reshape({c, 1, 1, d}), keys.unsqueeze(1),
                                       values.expand({c, 1, n + 1, 2}), r, power,
                                       /*causal=*/false, phi);  // (c, 1, 1, 2)
    sums.push_back((out.select(-1, 1) / out.select(-1, 0)).reshape({c}));
  }
  return at::cat(sums) * (std::pow(R / A, static_cast<double>(d)) / static_cast<double>(n));
}

torch::Tensor gaussian_kde(const torch::Tensor& points, const torch::Tensor& samples,
                           double bandwidth) {
  check_estimator_inputs("gaussian_kde", points, samples);
  TORCH_CHECK(std::isfinite(bandwidth) && bandwidth > 0,
              "gaussian_kde: bandwidth must be positive and finite, got ", bandwidth);
  const int64_t n = samples.size(0), d = samples.size(1), count = points.size(0);
  // log p(x) = logsumexp_i(-|x - k_i|^2 / (2 h^2)) - log N - (D / 2) log(2 pi h^2): no underflow
  // to log 0 for points far from every sample while any term is representable.
  const double log_norm =
      std::log(static_cast<double>(n)) + 0.5 * d * std::log(2.0 * kPi * bandwidth * bandwidth);
  const int64_t block = point_block(n, d);
  std::vector<at::Tensor> parts;
  for (int64_t start = 0; start < count; start += block) {
    const auto x = points.slice(0, start, std::min(count, start + block));
    const auto d2 = (x.unsqueeze(1) - samples.unsqueeze(0)).pow(2).sum(-1);  // (c, N)
    parts.push_back(at::exp(at::logsumexp(d2 * (-0.5 / (bandwidth * bandwidth)), 1) - log_norm));
  }
  return at::cat(parts);
}

torch::Tensor fourier_regression_estimate(const torch::Tensor& points, const torch::Tensor& samples,
                                          const torch::Tensor& targets, double R, int64_t power,
                                          FourierPhi phi) {
  constexpr const char* kFn = "fourier_regression_estimate";
  check_estimator_inputs(kFn, points, samples);
  check_radius(kFn, R);
  TORCH_CHECK(targets.defined() && targets.dim() == 2 && targets.size(0) == samples.size(0), kFn,
              ": targets must be (N, Dv) with N = ", samples.size(0), ", got ",
              targets.defined() ? targets.sizes() : at::IntArrayRef{});
  const int64_t count = points.size(0), n = samples.size(0), d = points.size(1);
  // eq. 14 is Fourier attention with one query per point (Definition 1): the same operator.
  const auto out =
      fourier_attention(points.reshape({1, 1, count, d}), samples.reshape({1, 1, n, d}),
                        targets.reshape({1, 1, n, targets.size(1)}),
                        at::full({}, R, points.options()), power, /*causal=*/false, phi);
  return out.reshape({count, targets.size(1)});
}

double fourier_softmax_matched_r(int64_t head_dim, int64_t power, FourierPhi phi) {
  TORCH_CHECK(head_dim > 0, "fourier_softmax_matched_r: head_dim must be positive, got ", head_dim);
  check_power("fourier_softmax_matched_r", power, phi);
  const double curvature =
      phi == FourierPhi::kSigmoid ? 1.0 - 1.0 / (1.0 + std::exp(-1.0)) : static_cast<double>(power);
  return std::sqrt(3.0 / (curvature * std::sqrt(static_cast<double>(head_dim))));
}

FourierAttentionImpl::FourierAttentionImpl(FourierAttentionOptions options_)
    : AttentionModule(std::move(options_)) {
  reset();
}

void FourierAttentionImpl::reset() {
  const auto& o = options;
  TORCH_CHECK(o.r_init() == 0.0 || (o.r_init() > 0.0 && std::isfinite(o.r_init())),
              "FourierAttention: r_init must be positive and finite, or 0 for R matched to "
              "softmax's temperature, got ",
              o.r_init());
  check_dims_options("FourierAttention", o.heads(), o.head_dim(), false, false);
  check_power("FourierAttention", o.power(), o.phi());
  const bool needs_dim = o.r_shape() == FourierRShape::kPerDimension ||
                         o.r_shape() == FourierRShape::kPerHeadDimension;
  const bool needs_heads =
      o.r_shape() == FourierRShape::kPerHead || o.r_shape() == FourierRShape::kPerHeadDimension;
  TORCH_CHECK(!needs_dim || o.head_dim() > 0,
              "FourierAttention: a per-dimension R needs head_dim > 0, got ", o.head_dim());
  TORCH_CHECK(!needs_heads || o.heads() > 0, "FourierAttention: a per-head R needs heads > 0, got ",
              o.heads());
  std::vector<int64_t> shape;
  switch (o.r_shape()) {
    case FourierRShape::kScalar: shape = {1}; break;
    case FourierRShape::kPerDimension: shape = {o.head_dim()}; break;
    case FourierRShape::kPerHead: shape = {o.heads(), 1}; break;
    case FourierRShape::kPerHeadDimension: shape = {o.heads(), o.head_dim()}; break;
  }
  const bool automatic = o.r_init() == 0.0;
  const double r = !automatic         ? o.r_init()
                   : o.head_dim() > 0 ? fourier_softmax_matched_r(o.head_dim(), o.power(), o.phi())
                                      : 1.0;  // replaced at the first call (r_pending_)
  const auto init = torch::full(shape, r);
  R = o.learn_r() ? register_parameter("R", init) : register_buffer("R", init);
  if (automatic && o.head_dim() == 0) r_pending_ = register_buffer("r_pending", torch::ones({1}));
}

void FourierAttentionImpl::resolve_r(const torch::Tensor& q) {
  if (!r_pending_.defined() || r_pending_.item<double>() == 0.0) return;
  torch::NoGradGuard no_grad;
  R.fill_(fourier_softmax_matched_r(q.size(-1), options.power(), options.phi()));
  r_pending_.zero_();
}

void FourierAttentionImpl::pretty_print(std::ostream& stream) const {
  static const char* shapes[] = {"scalar", "per-dimension", "per-head", "per-head-dimension"};
  stream << "flt::attention::FourierAttention(phi=" << kernels::fourier_phi_name(options.phi());
  if (options.phi() != FourierPhi::kSigmoid) stream << ", power=" << options.power();
  stream << ", R=" << shapes[static_cast<int>(options.r_shape())] << " init ";
  if (options.r_init() > 0.0) {
    stream << options.r_init();
  } else {
    stream << "matched to softmax";
  }
  stream << (options.learn_r() ? " learnable" : " fixed") << ")";
}

torch::Tensor FourierAttentionImpl::forward(const torch::Tensor& q, const torch::Tensor& k,
                                            const torch::Tensor& v, const AttentionCall& call) {
  check_call("FourierAttention", q, k, v, call.causal);
  resolve_r(q);
  return fourier_attention(q, k, v, R, options.power(), call.causal, options.phi());
}

torch::Tensor FourierAttentionImpl::materialize(const torch::Tensor& q, const torch::Tensor& k,
                                                const AttentionCall& call) {
  check_call("FourierAttention::materialize", q, k, {}, call.causal);
  resolve_r(q);
  return fourier_attention_weights(q, k, R, options.power(), call.causal, options.phi());
}

}  // namespace flt::attention
