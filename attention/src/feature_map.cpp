#include "flt/attention/feature_map.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>

#include "flt/attention/linear.h"
#include "flt/kernels/linear_attention.h"

namespace flt::attention {
namespace {

bool exp_kind(FeatureKind kind) {
  return kind == FeatureKind::kPositive || kind == FeatureKind::kHyperbolic ||
         kind == FeatureKind::kTrigonometric;
}

}  // namespace

std::string feature_kind_name(FeatureKind kind) {
  switch (kind) {
    case FeatureKind::kPositive: return "positive";
    case FeatureKind::kHyperbolic: return "hyperbolic";
    case FeatureKind::kTrigonometric: return "trigonometric";
    case FeatureKind::kElu: return "elu";
    case FeatureKind::kRelu: return "relu";
    case FeatureKind::kLearnable: return "learnable";
  }
  return "?";
}

FeatureKind feature_kind_from_name(const std::string& name) {
  for (auto kind : {FeatureKind::kPositive, FeatureKind::kHyperbolic, FeatureKind::kTrigonometric,
                    FeatureKind::kElu, FeatureKind::kRelu, FeatureKind::kLearnable}) {
    if (feature_kind_name(kind) == name) return kind;
  }
  TORCH_CHECK(false, "feature map: unknown kind \"", name,
              "\" (expected positive, hyperbolic, trigonometric, elu, relu or learnable)");
}

torch::Tensor orthogonal_gaussian_rows(int64_t m, int64_t dim, uint64_t seed, bool orthogonal) {
  TORCH_CHECK(m > 0, "orthogonal_gaussian_rows: m must be positive, got ", m);
  TORCH_CHECK(dim > 0, "orthogonal_gaussian_rows: dim must be positive, got ", dim);
  auto gen = at::detail::createCPUGenerator(seed);
  const auto options = torch::TensorOptions().dtype(torch::kDouble);
  if (!orthogonal) return at::randn({m, dim}, gen, options);
  std::vector<torch::Tensor> blocks;
  for (int64_t done = 0; done < m; done += dim) {
    // Reduced QR of a (dim, b) Gaussian block: b orthonormal directions at O(dim b^2) cost.
    const int64_t b = std::min(dim, m - done);
    const auto gaussian = at::randn({dim, b}, gen, options);
    const auto [q, r] = at::linalg_qr(gaussian);
    // Householder QR leaves a sign pattern in Q; fixing sign(diag R) > 0 makes Q Haar-distributed,
    // so every direction is uniform on the sphere (without it FAVOR+ is biased).
    const auto haar = q * at::sign(at::diagonal(r)).unsqueeze(0);
    blocks.push_back(haar.transpose(0, 1));
  }
  // chi_dim norms: each row gets the length of an independent Gaussian vector, so every row is
  // marginally N(0, I) (unbiased estimator) while rows within a block stay orthogonal.
  const auto norms = at::randn({m, dim}, gen, options).norm(2, {1}, /*keepdim=*/true);
  return at::cat(blocks, 0) * norms;
}

FeatureMapImpl::FeatureMapImpl(FeatureMapOptions options_) : options(std::move(options_)) { reset(); }

void FeatureMapImpl::reset() {
  TORCH_CHECK(options.input_dim() > 0, "FeatureMap: input_dim must be positive, got ",
              options.input_dim());
  TORCH_CHECK(options.features() > 0, "FeatureMap: features (m) must be positive, got ",
              options.features());
  if (options.kind() == FeatureKind::kElu) {
    projection = torch::Tensor();
    return;
  }
  const auto w = orthogonal_gaussian_rows(options.features(), options.input_dim(), options.seed(),
                                          options.orthogonal())
                     .to(torch::kFloat);
  if (options.kind() == FeatureKind::kLearnable) {
    projection = register_parameter("projection", w);
  } else {
    projection = register_buffer("projection", w);
  }
}

void FeatureMapImpl::redraw(uint64_t seed) {
  options.seed(seed);
  if (!projection.defined()) return;
  torch::NoGradGuard no_grad;
  // Rounded to float as in reset(), so redraw(s) reproduces a module constructed with seed s.
  projection.copy_(orthogonal_gaussian_rows(options.features(), options.input_dim(), seed,
                                            options.orthogonal())
                       .to(torch::kFloat));
}

void FeatureMapImpl::pretty_print(std::ostream& stream) const {
  stream << "flt::attention::FeatureMap(kind=" << feature_kind_name(options.kind())
         << ", input_dim=" << options.input_dim() << ", features=" << options.features()
         << ", orthogonal=" << options.orthogonal() << ")";
}

int64_t FeatureMapImpl::output_dim() const {
  switch (options.kind()) {
    case FeatureKind::kHyperbolic:
    case FeatureKind::kTrigonometric: return 2 * options.features();
    case FeatureKind::kElu: return options.input_dim();
    default: return options.features();
  }
}

bool FeatureMapImpl::positive() const { return options.kind() != FeatureKind::kTrigonometric; }

torch::Tensor FeatureMapImpl::projection_as(const torch::Tensor& x) const {
  return projection.to(x.scalar_type());
}

torch::Tensor FeatureMapImpl::log_features(const torch::Tensor& x) const {
  TORCH_CHECK(x.size(-1) == options.input_dim(), "FeatureMap: input has dimension ", x.size(-1),
              " but input_dim is ", options.input_dim(), " (input ", x.sizes(), ")");
  const auto wx = at::matmul(x, projection_as(x).transpose(0, 1));  // (..., L, m)
  const auto half_norm = 0.5 * x.pow(2).sum(-1, /*keepdim=*/true);
  switch (options.kind()) {
    case FeatureKind::kPositive: return wx - half_norm;
    case FeatureKind::kHyperbolic: return at::cat({wx - half_norm, -wx - half_norm}, -1);
    // Trigonometric: the log of the common magnitude exp(|x|^2/2) of all features: (..., L, 1).
    case FeatureKind::kTrigonometric: return half_norm;
    default: TORCH_INTERNAL_ASSERT(false, "log_features for a map without shifts");
  }
  return {};
}

torch::Tensor FeatureMapImpl::shifted(const torch::Tensor& x, const torch::Tensor& shift) const {
  const double m = static_cast<double>(options.features());
  switch (options.kind()) {
    case FeatureKind::kPositive: return at::exp(log_features(x) - shift) / std::sqrt(m);
    case FeatureKind::kHyperbolic: return at::exp(log_features(x) - shift) / std::sqrt(2.0 * m);
    case FeatureKind::kTrigonometric: {
      const auto wx = at::matmul(x, projection_as(x).transpose(0, 1));
      const auto scale = at::exp(0.5 * x.pow(2).sum(-1, /*keepdim=*/true) - shift) / std::sqrt(m);
      return at::cat({at::cos(wx), at::sin(wx)}, -1) * scale;
    }
    case FeatureKind::kElu: return elu_feature_map(x);
    case FeatureKind::kRelu:
      return at::relu(at::matmul(x, projection_as(x).transpose(0, 1))) / std::sqrt(m);
    case FeatureKind::kLearnable:
      return elu_feature_map(at::matmul(x, projection_as(x).transpose(0, 1)));
  }
  return {};
}

torch::Tensor FeatureMapImpl::unshifted_features(const torch::Tensor& x) const {
  return shifted(x, at::zeros({1}, x.options()));
}

torch::Tensor FeatureMapImpl::query_features(const torch::Tensor& x) const {
  if (!exp_kind(options.kind())) return shifted(x, at::zeros({1}, x.options()));
  // Per-token shift: a common factor of the query's numerator and denominator. Detached: it
  // cancels exactly, so its gradient is zero anyway.
  torch::Tensor shift;
  if (options.kind() == FeatureKind::kTrigonometric) {
    shift = 0.5 * x.pow(2).sum(-1, /*keepdim=*/true);
  } else {
    shift = std::get<0>(log_features(x).max(-1, /*keepdim=*/true));
  }
  return shifted(x, shift.detach());
}

torch::Tensor FeatureMapImpl::causal_key_shift(const torch::Tensor& first_key) const {
  auto shape = first_key.sizes().vec();
  shape.back() = 1;
  if (!exp_kind(options.kind())) return at::zeros(shape, first_key.options());
  torch::NoGradGuard no_grad;
  // The first key is in every query's past. (A floor from the universal bound
  // w.k - |k|^2/2 <= |w|^2/2 was tried and dropped: with FLT's 2r + D input dims that bound is ~10^3
  // above typical values and underflowed every feature.)
  return std::get<0>(log_features(first_key).max(-1, /*keepdim=*/true));
}

torch::Tensor FeatureMapImpl::key_features(const torch::Tensor& x, bool causal) const {
  if (!exp_kind(options.kind())) return shifted(x, at::zeros({1}, x.options()));
  torch::Tensor shift;
  if (causal) {
    shift = causal_key_shift(x.narrow(-2, 0, 1));
  } else {
    // One shift for all keys of the sequence (max over positions and features).
    torch::NoGradGuard no_grad;
    const auto logs = log_features(x);
    shift = std::get<0>(std::get<0>(logs.max(-1, /*keepdim=*/true)).max(-2, /*keepdim=*/true));
  }
  return shifted(x, shift.detach());
}

torch::Tensor FeatureMapImpl::key_features(const torch::Tensor& x, const torch::Tensor& shift) const {
  return shifted(x, shift.detach().to(x.scalar_type()));
}

torch::Tensor floored_linear_attention(const torch::Tensor& phi_q, const torch::Tensor& phi_k,
                                       const torch::Tensor& v, bool causal,
                                       const torch::Tensor& floor) {
  const int64_t dv = v.size(-1);
  const auto v_and_ones = at::cat({v, at::ones_like(v.narrow(-1, 0, 1))}, -1);
  const auto both = kernels::linear_attention_numerator(phi_q, phi_k, v_and_ones, causal);
  return both.narrow(-1, 0, dv) / at::max(both.narrow(-1, dv, 1), floor.to(v.scalar_type()));
}

void LinearAttentionState::append(const torch::Tensor& phi_k, const torch::Tensor& v) {
  TORCH_CHECK(phi_k.dim() == 4 && v.dim() == 4 && phi_k.size(2) == v.size(2),
              "LinearAttentionState::append: expected phi_k (B, H, T, M) and v (B, H, T, Dv), got ",
              phi_k.sizes(), " and ", v.sizes());
  const auto kv = at::matmul(phi_k.transpose(-2, -1), v);                // (B, H, M, Dv)
  const auto k_sum = phi_k.sum(-2).unsqueeze(-1);                        // (B, H, M, 1)
  if (empty()) {
    numerator = kv;
    normaliser = k_sum;
  } else {
    TORCH_CHECK(kv.sizes() == numerator.sizes(), "LinearAttentionState::append: state has shape ",
                numerator.sizes(), " but the new tokens give ", kv.sizes());
    numerator = numerator + kv;
    normaliser = normaliser + k_sum;
  }
  steps += phi_k.size(2);
}

torch::Tensor LinearAttentionState::read(const torch::Tensor& phi_q, double eps) const {
  TORCH_CHECK(!empty(), "LinearAttentionState::read: append at least one key first");
  TORCH_CHECK(phi_q.dim() == 4 && phi_q.size(-1) == numerator.size(-2),
              "LinearAttentionState::read: expected phi_q (B, H, T, ", numerator.size(-2), "), got ",
              phi_q.sizes());
  return at::matmul(phi_q, numerator) / at::matmul(phi_q, normaliser).clamp_min(eps);
}

void LinearAttentionState::decay(const torch::Tensor& factor) {
  TORCH_CHECK(!empty(), "LinearAttentionState::decay: the state is empty");
  numerator = numerator * factor;
  normaliser = normaliser * factor;
}

}  // namespace flt::attention
