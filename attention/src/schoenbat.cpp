#include "flt/attention/schoenbat.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "flt/attention/linear.h"
#include "flt/kernels/causal_matmul.h"
#include "flt/kernels/linear_attention.h"

namespace flt::attention {
namespace {

void check_kernel(const std::string& kernel) {
  const auto& names = schoenberg_kernels();
  TORCH_CHECK(std::find(names.begin(), names.end(), kernel) != names.end(),
              "SchoenbAt: unknown kernel \"", kernel,
              "\" (expected exp, inv, logi, trigh or sqrt)");
}

// The bound on |q.k| the inputs of RMFA keep: 1/sqrt(D) after ppSBN, kRawInputRadius^2 = 1/2
// after the radial clip of raw inputs.
double inner_product_bound(const SchoenbAttentionOptions& o) {
  return o.ppsbn() ? 1.0 / std::sqrt(static_cast<double>(o.head_dim()))
                   : kRawInputRadius * kRawInputRadius;
}

// Every kernel here is increasing, so its smallest exact value over the bound is K(-bound) > 0.
double smallest_kernel_value(const std::string& kernel, double bound) {
  return schoenberg_kernel(kernel, torch::full({1}, -bound, torch::kDouble)).item<double>();
}

// Rows of x (..., D) longer than kRawInputRadius scaled back to it; shorter rows unchanged.
torch::Tensor clip_to_radius(const torch::Tensor& x) {
  const auto norm = x.norm(2, -1, /*keepdim=*/true);
  return x * (kRawInputRadius / norm.clamp_min(kRawInputRadius));
}

// The floor of the estimated normaliser of each query: fraction * n_i * K(-1/sqrt(D)).
// -> (1, 1, Lq, 1) causal or (1, 1, 1, 1)
torch::Tensor normaliser_floor(const SchoenbAttentionOptions& o, int64_t lq, int64_t lk,
                               bool causal, const torch::TensorOptions& tensor_options) {
  const auto seen = causal ? torch::arange(1, lq + 1, tensor_options).view({1, 1, lq, 1})
                           : torch::full({1, 1, 1, 1}, static_cast<double>(lk), tensor_options);
  return seen * (o.normaliser_floor() * smallest_kernel_value(o.kernel(), inner_product_bound(o)));
}

}  // namespace

const std::vector<std::string>& schoenberg_kernels() {
  static const std::vector<std::string> names = {"exp", "inv", "logi", "trigh", "sqrt"};
  return names;
}

std::vector<double> maclaurin_coefficients(const std::string& kernel, int64_t max_degree) {
  check_kernel(kernel);
  TORCH_CHECK(max_degree >= 0, "maclaurin_coefficients: max_degree must be >= 0, got ", max_degree);
  std::vector<double> a(static_cast<size_t>(max_degree + 1));
  double binomial_term = 1.0;  // sqrt kernel: C(1/2, n) (-1)^n
  for (int64_t n = 0; n <= max_degree; ++n) {
    const double dn = static_cast<double>(n);
    if (kernel == "exp" || kernel == "trigh") {
      // e^t = sum t^n / n!; sinh t + cosh t = e^t (odd and even halves of the same series).
      a[n] = n == 0 ? 1.0 : a[n - 1] / dn;
    } else if (kernel == "inv") {
      a[n] = 1.0;  // geometric series 1 / (1 - t)
    } else if (kernel == "logi") {
      a[n] = n == 0 ? 1.0 : 1.0 / dn;  // -log(1 - t) = sum_{n>=1} t^n / n
    } else {                           // sqrt: 2 - sqrt(1 - t) = 2 - sum_n C(1/2, n) (-t)^n
      // b_n = C(1/2, n) (-1)^n, with C(1/2, n) = C(1/2, n-1) (1/2 - n + 1) / n; a_0 = 2 - b_0 = 1,
      // a_n = -b_n = (2n-3)!! / (2^n n!) for n >= 1.
      if (n > 0) binomial_term *= -(0.5 - dn + 1.0) / dn;
      a[n] = n == 0 ? 1.0 : -binomial_term;
    }
  }
  return a;
}

torch::Tensor schoenberg_kernel(const std::string& kernel, const torch::Tensor& t) {
  check_kernel(kernel);
  if (kernel == "exp") return at::exp(t);
  if (kernel == "inv") return 1.0 / (1.0 - t);
  if (kernel == "logi") return 1.0 - at::log1p(-t);
  if (kernel == "trigh") return at::sinh(t) + at::cosh(t);
  return 2.0 - at::sqrt(1.0 - t);
}

torch::Tensor kernelized_attention(const torch::Tensor& q, const torch::Tensor& k,
                                   const torch::Tensor& v, const std::string& kernel, bool causal) {
  check_qkv("kernelized_attention", q, k, v, causal);
  if (!causal) {
    const auto weights = schoenberg_kernel(kernel, at::matmul(q, k.transpose(-2, -1)));
    return at::matmul(weights, v) / weights.sum(-1, /*keepdim=*/true);
  }
  // The masked pairs are never read (causal_matmul.h): a NaN reaches only the rows that see it.
  const int64_t length = q.size(2);
  const auto future = at::ones({length, length}, q.options().dtype(at::kBool)).triu(1);
  const auto weights = schoenberg_kernel(kernel, kernels::causal_scores(q, k, /*fill=*/0.0))
                           .masked_fill(future, 0.0);
  return kernels::causal_matmul(weights, v) / weights.sum(-1, /*keepdim=*/true);
}

torch::Tensor ppsbn_pre(const torch::Tensor& x, bool causal, double eps) {
  TORCH_CHECK(x.dim() == 4, "ppsbn_pre: x must have shape (B, H, L, D), got ", x.sizes());
  check_positive_finite("ppsbn_pre", "eps", eps);
  // The statistics square x: in float that overflows from |x| ~ 2^64 (and inf - inf gave NaN), so
  // they are formed in double unless x is a CPU float tensor whose squares and their sums stay far
  // below float's range (|x| < 2^50: the common case, at float speed). On GPUs, where looking would
  // synchronise every call, non-double inputs always take double.
  const auto small_floats = [&x] {
    const auto [lo, hi] = at::aminmax(x.detach());
    return -lo.item<float>() < 0x1p50f && hi.item<float>() < 0x1p50f;  // false for NaN
  };
  const bool in_dtype =
      x.scalar_type() == torch::kDouble ||
      (x.scalar_type() == torch::kFloat && x.device().is_cpu() && x.numel() > 0 && small_floats());
  const auto w = in_dtype ? x : x.to(torch::kDouble);
  torch::Tensor centred, var;
  if (!causal) {
    centred = w - w.mean(torch::IntArrayRef{0, 2}, /*keepdim=*/true);
    var = (centred * centred).mean(torch::IntArrayRef{0, 2}, /*keepdim=*/true);
  } else {
    // Statistics of the batch at positions <= i only: no future token changes token i. Prefix sums
    // of y = x - c, c the batch mean at position 0 (in every prefix; a constant shift that cancels,
    // so it carries no gradient): E[y^2] - E[y]^2 does not cancel catastrophically when |mean| is
    // much larger than the spread.
    const auto count =
        (torch::arange(1, x.size(2) + 1, w.options()) * static_cast<double>(x.size(0)))
            .view({1, 1, -1, 1});
    const auto y = w - w.narrow(2, 0, 1).mean(0, /*keepdim=*/true).detach();
    const auto mean = y.sum(0, /*keepdim=*/true).cumsum(2) / count;
    var = ((y * y).sum(0, /*keepdim=*/true).cumsum(2) / count - mean * mean).clamp_min(0.0);
    centred = y - mean;
  }
  const auto standard = centred / (var + eps).sqrt();
  // Unit rows, then D^{-1/4}. A row that is exactly 0 (one token in its statistics: causal position
  // 0 with B = 1, or B = L = 1) stays 0 and passes no gradient: it is 0 for every value of its
  // inputs, so its derivative is 0 (s / |s| has no limit at 0; a regularised s / sqrt(|s|^2 + tiny)
  // had a 1e15 Jacobian there that swamped the true gradient of x_0 through the later positions'
  // statistics).
  const auto norm2 = (standard * standard).sum(-1, /*keepdim=*/true);
  // != 0, not > 0: a NaN row (its statistics saw a NaN) stays NaN instead of becoming 0.
  const auto nonzero = norm2 != 0;
  const auto norm = at::where(nonzero, norm2, at::ones_like(norm2)).sqrt();
  const auto unit = at::where(nonzero, standard / norm, at::zeros_like(standard));
  return (unit * std::pow(static_cast<double>(x.size(3)), -0.25)).to(x.scalar_type());
}

SchoenbAttentionImpl::SchoenbAttentionImpl(SchoenbAttentionOptions options_)
    : AttentionModule(std::move(options_)) {
  reset();
}

void SchoenbAttentionImpl::reset() {
  constexpr const char* kFn = "SchoenbAttention";
  check_kernel(options.kernel());
  check_positive(kFn, "features", options.features());
  check_positive(kFn, "max_degree", options.max_degree());
  check_positive_finite(kFn, "sbn_eps", options.sbn_eps());
  TORCH_CHECK(options.normaliser_floor() > 0.0 && options.normaliser_floor() <= 1.0,
              "SchoenbAttention: normaliser_floor must be in (0, 1], got ",
              options.normaliser_floor());
  check_finite(kFn, "gamma", options.gamma());
  check_finite(kFn, "beta", options.beta());
  check_dims_options(kFn, options.heads(), options.head_dim(), true, true);
  const int64_t f = options.features(), p = options.max_degree();
  rademacher = register_buffer("rademacher", torch::zeros({f, p, options.head_dim()}));
  degree_mask = register_buffer("degree_mask", torch::zeros({f, p}));
  coefficients = register_buffer("coefficients", torch::zeros({f}));
  gamma = register_parameter("gamma", torch::full({options.heads()}, options.gamma()));
  beta = register_parameter("beta", torch::full({options.heads()}, options.beta()));
  redraw(options.seed());
}

void SchoenbAttentionImpl::redraw(uint64_t seed) {
  options.seed(seed);
  const int64_t f = options.features(), p = options.max_degree();
  auto gen = at::detail::createCPUGenerator(seed);
  const auto dbl = torch::TensorOptions().dtype(torch::kDouble);
  // Degree law P[N = n] = 2^{-(n+1)} / Z on 0..P (renormalised truncation; unbiased for K_P).
  const auto probs = at::pow(0.5, torch::arange(1, p + 2, dbl));
  const auto law = probs / probs.sum();
  const auto degrees = at::multinomial(law, f, /*replacement=*/true, gen);  // (F) int64
  const auto a = maclaurin_coefficients(options.kernel(), p);
  const auto a_t = torch::tensor(a, dbl);
  const auto coef =
      (a_t.index_select(0, degrees) / (law.index_select(0, degrees) * static_cast<double>(f)))
          .sqrt();
  const auto mask = torch::arange(p, dbl).view({1, p}) < degrees.view({f, 1}).to(torch::kDouble);
  const auto signs = at::empty({f, p, options.head_dim()}, dbl).bernoulli_(0.5, gen) * 2.0 - 1.0;
  torch::NoGradGuard no_grad;
  rademacher.copy_(signs);
  degree_mask.copy_(mask);
  coefficients.copy_(coef);
}

void SchoenbAttentionImpl::pretty_print(std::ostream& stream) const {
  stream << "flt::attention::SchoenbAttention(kernel=" << options.kernel()
         << ", features=" << options.features() << ", max_degree=" << options.max_degree()
         << ", ppsbn=" << options.ppsbn() << ")";
}

torch::Tensor SchoenbAttentionImpl::features(const torch::Tensor& x) const {
  const int64_t f = options.features(), p = options.max_degree();
  TORCH_CHECK(x.size(-1) == options.head_dim(), "SchoenbAttention: input has dimension ",
              x.size(-1), " but head_dim is ", options.head_dim(), " (input ", x.sizes(), ")");
  const auto dtype = x.scalar_type();
  // Only the factors a feature uses are projected. Features are grouped by degree d, and each
  // group's factors are adjacent columns, so a group's products are one view and prod(-1); a
  // degree-0 feature is the empty product 1. With the degree law 2^-(n+1) that is about F
  // projected columns where projecting every (feature, factor) pair takes F x P (8x the
  // multiply-adds at the defaults, and four (L, F, P) temporaries).
  const auto mask = degree_mask.to(torch::kCPU, torch::kBool).contiguous();
  const bool* used = mask.data_ptr<bool>();
  std::vector<std::vector<int64_t>> by_degree(static_cast<size_t>(p + 1));
  for (int64_t i = 0; i < f; ++i) {
    int64_t degree = 0;
    for (int64_t j = 0; j < p; ++j) degree += used[i * p + j] ? 1 : 0;
    by_degree[static_cast<size_t>(degree)].push_back(i);
  }
  std::vector<int64_t> rows, position(static_cast<size_t>(f));  // factor rows; feature's column
  int64_t column = 0;
  for (const auto& group : by_degree) {
    for (const int64_t i : group) {
      position[static_cast<size_t>(i)] = column++;
      for (int64_t j = 0; j < p; ++j) {
        if (used[i * p + j]) rows.push_back(i * p + j);
      }
    }
  }
  const auto device = rademacher.device();
  const auto factors = rademacher.to(dtype)
                           .view({f * p, options.head_dim()})
                           .index_select(0, torch::tensor(rows, torch::kLong).to(device));
  const auto proj = at::matmul(x, factors.transpose(0, 1));  // (..., L, sum of degrees)
  std::vector<torch::Tensor> products;
  int64_t offset = 0;
  for (int64_t degree = 0; degree <= p; ++degree) {
    const int64_t n = static_cast<int64_t>(by_degree[static_cast<size_t>(degree)].size());
    if (n == 0) continue;
    auto shape = proj.sizes().vec();
    shape.back() = n;
    if (degree == 0) {
      products.push_back(at::ones(shape, proj.options()));
      continue;
    }
    const auto block = proj.narrow(-1, offset, n * degree);
    offset += n * degree;
    if (degree == 1) {
      products.push_back(block);
      continue;
    }
    shape.push_back(degree);
    products.push_back(block.reshape(shape).prod(-1));
  }
  // Back to the buffers' feature order, then each feature's coefficient.
  const auto order = torch::tensor(position, torch::kLong).to(device);
  return at::cat(products, -1).index_select(-1, order) * coefficients.to(dtype);
}

torch::Tensor SchoenbAttentionImpl::rmfa(const torch::Tensor& q, const torch::Tensor& k,
                                         const torch::Tensor& v, bool causal) const {
  return kernels::normalized_linear_attention(
      features(q), features(k), v, causal,
      normaliser_floor(options, q.size(2), k.size(2), causal, v.options()));
}

torch::Tensor SchoenbAttentionImpl::post(const torch::Tensor& x) const {
  const auto dtype = x.scalar_type();
  const auto g = gamma.to(dtype).view({1, -1, 1, 1});
  const auto b = beta.to(dtype).view({1, -1, 1, 1});
  // sign(x) |x|^beta: defined for negative x and any beta; the clamp keeps 0 at 0 with a zero
  // (not NaN) gradient for beta < 1.
  return g * at::sign(x) * at::pow(x.abs().clamp_min(1e-30), b);
}

torch::Tensor SchoenbAttentionImpl::forward(const torch::Tensor& q, const torch::Tensor& k,
                                            const torch::Tensor& v, const AttentionCall& call) {
  check_call("SchoenbAttention", q, k, v, call.causal);
  if (!options.ppsbn()) return rmfa(clip_to_radius(q), clip_to_radius(k), v, call.causal);
  const auto out = rmfa(ppsbn_pre(q, call.causal, options.sbn_eps()),
                        ppsbn_pre(k, call.causal, options.sbn_eps()), v, call.causal);
  return post(out);
}

torch::Tensor SchoenbAttentionImpl::materialize(const torch::Tensor& q, const torch::Tensor& k,
                                                const AttentionCall& call) {
  check_call("SchoenbAttention::materialize", q, k, {}, call.causal);
  const auto qn =
      options.ppsbn() ? ppsbn_pre(q, call.causal, options.sbn_eps()) : clip_to_radius(q);
  const auto kn =
      options.ppsbn() ? ppsbn_pre(k, call.causal, options.sbn_eps()) : clip_to_radius(k);
  return feature_attention_matrix(
      features(qn), features(kn), call.causal,
      normaliser_floor(options, q.size(2), k.size(2), call.causal, q.options()));
}

}  // namespace flt::attention
