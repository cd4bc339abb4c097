#include "flt/attention/feature_map.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "flt/attention/linear.h"
#include "flt/detail/random.h"
#include "precomputed_input.h"

namespace flt::attention {

using detail::PrecomputedInput;

namespace {

bool exp_kind(FeatureKind kind) {
  return kind == FeatureKind::kPositive || kind == FeatureKind::kHyperbolic ||
         kind == FeatureKind::kTrigonometric;
}

// Whether a column scale is absent, or one number in every column that needs no gradient (checked
// on the CPU only: on a GPU the comparison would synchronise the stream).
bool uniform_constant(const torch::Tensor& s) {
  if (!s.defined()) return true;
  if (s.requires_grad() || !s.device().is_cpu()) return false;
  return s.numel() == 1 || (s.min() == s.max()).item<bool>();
}

// |x|^2 / 2 over the column blocks of x, in `dtype` (a block's given norm where it has one).
// -> (..., L, 1)
torch::Tensor half_squared_norm(const PrecomputedInput& x, at::ScalarType dtype) {
  torch::Tensor total;
  std::vector<int64_t> shape{1};
  for (size_t i = 0; i < x.blocks.size(); ++i) {
    auto rows = x.blocks[i].sizes().vec();
    rows.back() = 1;
    shape = at::infer_size(shape, rows);
    torch::Tensor part = x.half_squared_norm(i);
    const auto s = x.scale(i);
    if (part.defined()) {
      part = part.to(dtype);
    } else if (uniform_constant(s)) {
      // |x s|^2 = s^2 |x|^2 when every column has the same scale (the D^{-1/4} of Performer's and
      // FLT's q and k): a row reduction of x itself, where x s and (x s)^2 were two copies of x
      // (8 MB each at L = 4096, H = 8, D = 64) and autograd kept one for the backward.
      const double s0 = s.defined() ? s.reshape({-1})[0].item<double>() : 1.0;
      const auto norm = at::linalg_vector_norm(x.blocks[i].to(dtype), 2, {-1}, /*keepdim=*/true);
      part = (0.5 * s0 * s0) * norm.square();
    } else {
      const auto b = x.scaled(i).to(dtype);
      part = 0.5 * (b * b).sum(-1, /*keepdim=*/true);
    }
    total = total.defined() ? total + part : part;
  }
  return total.sizes().vec() == shape ? total : total.expand(shape);
}

// Whether shapes a and b broadcast against each other, leaving out the last `skip` dims of each.
bool broadcastable(at::IntArrayRef a, at::IntArrayRef b, size_t skip) {
  const size_t na = a.size() - skip, nb = b.size() - skip;
  for (size_t i = 1; i <= std::min(na, nb); ++i) {
    const int64_t x = a[na - i], y = b[nb - i];
    if (x != y && x != 1 && y != 1) return false;
  }
  return true;
}

// |x|^2 / 2 as a double tensor, for the per-token levels. In x's own dtype it overflows for
// |x| >= 2^64 (float); where it does (and on GPUs, where looking would synchronise every call) it
// is formed in double, exact up to |x| ~ 1e154. -> (..., L, 1) double
torch::Tensor half_squared_norm_double(const PrecomputedInput& x) {
  const auto dtype = x.blocks.front().scalar_type();
  bool all_given = true;
  for (size_t b = 0; b < x.blocks.size(); ++b)
    all_given = all_given && x.half_squared_norm(b).defined();
  if (dtype != torch::kDouble && x.blocks.front().device().is_cpu() && !all_given) {
    auto fast = half_squared_norm(x, dtype);
    if (at::isfinite(fast).all().item<bool>()) return fast.to(torch::kDouble);
  }
  return half_squared_norm(x, torch::kDouble);
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
    // Haar-distributed, so every direction is uniform on the sphere (Householder QR's sign
    // pattern left in would bias FAVOR+).
    const auto haar = flt::detail::haar_columns(at::randn({dim, b}, gen, options));
    blocks.push_back(haar.transpose(0, 1));
  }
  // chi_dim norms: each row gets the length of an independent Gaussian vector, so every row is
  // marginally N(0, I) (unbiased estimator) while rows within a block stay orthogonal.
  const auto norms = at::randn({m, dim}, gen, options).norm(2, {1}, /*keepdim=*/true);
  return at::cat(blocks, 0) * norms;
}

FeatureMapImpl::FeatureMapImpl(FeatureMapOptions options_) : options(std::move(options_)) {
  reset();
}

FeatureMapImpl::FeatureMapImpl(FeatureMapOptions options_, torch::Tensor projection_)
    : options(std::move(options_)), projection(std::move(projection_)) {}

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
  projection.copy_(
      orthogonal_gaussian_rows(options.features(), options.input_dim(), seed, options.orthogonal())
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

bool FeatureMapImpl::positive() const {
  return options.kind() != FeatureKind::kTrigonometric;
}

torch::Tensor FeatureInput::scaled(size_t b) const {
  const auto s = scale(b);
  return s.defined() ? blocks[b] * s : blocks[b];
}

FeatureInput FeatureInput::rows(int64_t start, int64_t length) const {
  FeatureInput part(torch::Tensor{});
  part.blocks.clear();
  for (const auto& block : blocks) part.blocks.push_back(block.narrow(-2, start, length));
  part.scales = scales;
  return part;
}

PrecomputedInput PrecomputedInput::rows(int64_t start, int64_t length,
                                        const torch::Tensor& leading) const {
  TORCH_CHECK(!blocks.empty() && (blocks.front().defined() || leading_rows || leading.defined()),
              "PrecomputedInput::rows: block 0 is neither formed nor made by leading_rows");
  const auto made = [&] {
    auto x = (*leading_rows)(start, length, first_head, head_count);
    return batch >= 0 && x.dim() >= 4 && x.size(-4) > 1 ? x.narrow(-4, batch, 1) : x;
  };
  PrecomputedInput part(leading.defined()          ? leading
                        : blocks.front().defined() ? blocks.front().narrow(-2, start, length)
                                                   : made());
  for (size_t b = 1; b < blocks.size(); ++b)
    part.blocks.push_back(blocks[b].narrow(-2, start, length));
  part.scales = scales;
  for (const auto& p : projections)
    part.projections.push_back(p.defined() ? p.narrow(-2, start, length) : p);
  for (const auto& n : half_squared_norms)  // (..., L, 1) or a constant (..., 1, 1)
    part.half_squared_norms.push_back(n.defined() && n.size(-2) != 1 ? n.narrow(-2, start, length)
                                                                     : n);
  return part;
}

torch::Tensor detail::heads_of(const torch::Tensor& t, int64_t b, int64_t h, int64_t n) {
  if (!t.defined() || t.dim() < 3) return t;
  const auto x = t.size(-3) > 1 ? t.narrow(-3, h, n) : t;
  return x.dim() >= 4 && x.size(-4) > 1 ? x.narrow(-4, b, 1) : x;
}

PrecomputedInput PrecomputedInput::heads(int64_t b, int64_t h, int64_t n) const {
  TORCH_INTERNAL_ASSERT(batch < 0 && head_count < 0, "PrecomputedInput::heads of a part");
  PrecomputedInput part = *this;
  for (auto* list : {&part.blocks, &part.scales, &part.projections, &part.half_squared_norms})
    for (auto& t : *list) t = detail::heads_of(t, b, h, n);
  part.batch = b;
  part.first_head = h;
  part.head_count = n;
  return part;
}

int64_t FeatureInput::length() const {
  for (const auto& block : blocks)
    if (block.defined()) return block.size(-2);
  TORCH_CHECK(false, "FeatureInput: no block is formed, so the input's length is unknown");
}

torch::Tensor FeatureInput::concatenated() const {
  if (blocks.size() == 1) return scaled(0);
  std::vector<torch::Tensor> parts;
  for (size_t b = 0; b < blocks.size(); ++b) parts.push_back(scaled(b));
  auto shape = parts.front().sizes().vec();
  for (const auto& p : parts) shape = at::infer_size(shape, p.sizes());
  for (auto& p : parts) {
    auto s = shape;
    s.back() = p.size(-1);
    p = p.expand(s);
  }
  return at::cat(parts, -1);
}

torch::Tensor detail::project_block(const FeatureMapImpl& map, const FeatureInput& x, size_t b) {
  TORCH_CHECK(map.projection.defined(), "FeatureMap::project_block: the ",
              feature_kind_name(map.options.kind()), " map has no projection");
  TORCH_CHECK(b < x.blocks.size(), "FeatureMap::project_block: block ", b, " of ", x.blocks.size());
  const auto w = map.projection.to(x.blocks[b].scalar_type());
  int64_t offset = 0;
  for (size_t j = 0; j < b; ++j) offset += x.blocks[j].size(-1);
  auto columns = w.narrow(1, offset, x.blocks[b].size(-1));  // (m, Din_b)
  // A scale (..., 1, Din_b) multiplies the columns: (..., m, Din_b), a few thousand numbers.
  const auto s = x.scale(b);
  if (s.defined()) columns = columns * s.to(columns.scalar_type());
  return at::matmul(x.blocks[b], columns.transpose(-2, -1));
}

namespace {

// W x without building the concatenated x. -> (..., L, m)
torch::Tensor project(const FeatureMapImpl& map, const PrecomputedInput& x) {
  const auto part = [&](size_t b) {
    const auto given = x.projection(b);
    return given.defined() ? given : detail::project_block(map, x, b);
  };
  // The sum starts from the block of the most entries (the batch's, where others are shared
  // position blocks broadcast over it) and the others add in place: no tensor per addition. A given
  // projection is shared, so it never takes the in-place sums (the callers' exp works in place
  // too).
  const auto rows = [&](size_t b) { return x.blocks[b].numel() / x.blocks[b].size(-1); };
  size_t widest = 0;
  for (size_t i = 1; i < x.blocks.size(); ++i) {
    const bool wider = rows(i) > rows(widest),
               as_wide = rows(i) == rows(widest) && x.projection(widest).defined();
    if (wider || (as_wide && !x.projection(i).defined())) widest = i;
  }
  auto total = part(widest);
  bool fresh = !x.projection(widest).defined();
  for (size_t i = 0; i < x.blocks.size(); ++i) {
    if (i == widest) continue;
    const auto other = part(i);
    if (fresh && other.dim() <= total.dim() &&
        at::infer_size(total.sizes(), other.sizes()) == total.sizes()) {
      total.add_(other);
    } else {
      total = total + other;  // a new tensor: broadcasting blocks, or a shared start
      fresh = true;
    }
  }
  return fresh ? total : total.clone();
}

// The softmax-kernel maps' pieces: W x (..., L, m); the logits P = W x (positive) or [W x, -W x]
// (hyperbolic; undefined for the trigonometric map) and their per-token max `top` (..., L, 1),
// detached (0 for the trigonometric map); with `with_level`, each token's largest log-feature
// `level` = top - |x|^2/2 (trigonometric: +|x|^2/2), (..., L, 1) in double.
struct LogTerms {
  torch::Tensor wx, logits, top, level;
};

LogTerms log_terms(const FeatureMapImpl& map, const PrecomputedInput& x, bool with_level) {
  const auto& options = map.options;
  TORCH_INTERNAL_ASSERT(exp_kind(options.kind()), "log_terms for a map without shifts");
  LogTerms t;
  // The norm before the projection: its temporaries (each block scaled and squared) are freed
  // before W x exists, which lowers the peak of FLT's keys (their position block's projection,
  // shared with the queries, is alive throughout).
  torch::Tensor half_norm;
  if (with_level) half_norm = half_squared_norm_double(x);
  t.wx = project(map, x);
  if (options.kind() != FeatureKind::kTrigonometric) {
    t.logits = options.kind() == FeatureKind::kPositive ? t.wx : at::cat({t.wx, -t.wx}, -1);
    // The token's own max: a shift within the token, it carries no gradient.
    torch::NoGradGuard no_grad;
    t.top = at::amax(t.logits, -1, /*keepdim=*/true);  // max without its indices
  }
  if (!with_level) return t;
  // In double, so for float inputs the level never overflows (in float, |x| >= 2^64 gave inf and
  // then inf - inf = NaN in the shifts).
  const auto level = t.top.defined() ? t.top.to(torch::kDouble) - half_norm : half_norm;
  // Beyond double's range (|x| > 1e154, double inputs) levels saturate at its finite extremes, so
  // shifts never take inf - inf.
  const double big = std::numeric_limits<double>::max();
  t.level = level.clamp(-big, big);
  return t;
}

constexpr double kMaxKeyExponent = 70.0;

enum class Shift { kNone, kPerToken, kPerSequence, kGiven };

// The one formula of every map, with the shift chosen by `rule` (`given` for kGiven). With
// `sequence_shift` and kPerSequence, the shift taken goes there ((..., 1, 1) double).
// x: (..., L, Din) -> (..., L, M)
torch::Tensor compute(const FeatureMapImpl& map, const PrecomputedInput& x, Shift rule,
                      const torch::Tensor& given = {}, torch::Tensor* sequence_shift = nullptr) {
  const auto& options = map.options;
  for (size_t b = 0; b < x.blocks.size(); ++b) {
    TORCH_CHECK(
        x.blocks[b].defined(), "FeatureMap: block ", b, " of the input is not formed",
        b == 0 && x.leading_rows
            ? " (its rows are made a block of tokens at a time, PrecomputedInput::leading_rows, "
              "which only favor_attention on the CPU reads)"
            : "");
  }
  int64_t width = 0;
  for (const auto& block : x.blocks) width += block.size(-1);
  TORCH_CHECK(width == options.input_dim(), "FeatureMap: input has dimension ", width,
              " but input_dim is ", options.input_dim(), " (input ", x.blocks.front().sizes(), ")");
  TORCH_CHECK(x.scales.size() <= x.blocks.size(), "FeatureMap: ", x.scales.size(),
              " column scales for ", x.blocks.size(), " blocks");
  for (size_t b = 0; b < x.scales.size(); ++b) {
    const auto& s = x.scales[b];
    TORCH_CHECK(!s.defined() || (s.dim() >= 1 && s.size(-1) == x.blocks[b].size(-1) &&
                                 (s.dim() < 2 || s.size(-2) == 1)),
                "FeatureMap: the scale of block ", b, " must have shape (..., 1, ",
                x.blocks[b].size(-1), "), got ", s.sizes());
  }
  TORCH_CHECK(x.half_squared_norms.size() <= x.blocks.size(),
              "FeatureMap: ", x.half_squared_norms.size(), " half squared norms for ",
              x.blocks.size(), " blocks");
  for (size_t b = 0; b < x.half_squared_norms.size(); ++b) {
    const auto& n = x.half_squared_norms[b];
    TORCH_CHECK(!n.defined() || (n.dim() >= 2 && n.size(-1) == 1 &&
                                 (n.size(-2) == 1 || n.size(-2) == x.blocks[b].size(-2)) &&
                                 broadcastable(n.sizes(), x.blocks[b].sizes(), 2)),
                "FeatureMap: the half squared norm of block ", b, " must have shape (..., ",
                x.blocks[b].size(-2), " or 1, 1), got ", n.sizes());
  }
  TORCH_CHECK(x.projections.size() <= x.blocks.size(), "FeatureMap: ", x.projections.size(),
              " projections for ", x.blocks.size(), " blocks");
  for (size_t b = 0; b < x.projections.size(); ++b) {
    const auto& p = x.projections[b];
    TORCH_CHECK(!p.defined() || (p.dim() >= 2 && p.size(-1) == options.features() &&
                                 p.size(-2) == x.blocks[b].size(-2) &&
                                 broadcastable(p.sizes(), x.blocks[b].sizes(), 2) &&
                                 p.scalar_type() == x.blocks[b].scalar_type()),
                "FeatureMap: the projection of block ", b, " must have shape (..., ",
                x.blocks[b].size(-2), ", ", options.features(), ") broadcasting with the block's ",
                x.blocks[b].sizes(), " and its dtype ", x.blocks[b].scalar_type(), ", got ",
                p.sizes(), " ", p.scalar_type());
  }
  const double m = static_cast<double>(options.features());
  switch (options.kind()) {
    case FeatureKind::kElu: return elu_feature_map(x.concatenated());
    case FeatureKind::kRelu: return at::relu(project(map, x)) / std::sqrt(m);
    case FeatureKind::kLearnable: return elu_feature_map(project(map, x));
    default: break;
  }
  const bool trigonometric = options.kind() == FeatureKind::kTrigonometric;
  // m^{-1/2} (positive, trigonometric) or (2m)^{-1/2} (hyperbolic: two features per direction).
  const double root = std::sqrt(options.kind() == FeatureKind::kHyperbolic ? 2.0 * m : m);
  const auto trig = [](const torch::Tensor& wx) { return at::cat({at::cos(wx), at::sin(wx)}, -1); };
  if (rule == Shift::kNone) {
    // The plain formula (nothing is subtracted, so nothing can cancel): exp(Wx - |x|^2/2) etc.
    const auto wx = project(map, x);
    const auto half_norm = half_squared_norm(x, wx.scalar_type());
    if (trigonometric) return trig(wx) * (at::exp(half_norm) / root);
    const auto logits = options.kind() == FeatureKind::kPositive ? wx : at::cat({wx, -wx}, -1);
    return at::exp(logits - half_norm) / root;
  }
  // log phi_i(x_j) - shift = (P_ij - top_j) + offset_j, with P = Wx (or [Wx, -Wx]),
  // top_j = max_i P_ij, offset_j = level_j - shift and level_j = top_j - |x_j|^2/2 (+|x_j|^2/2 for
  // the trigonometric map), the token's largest log-feature. The first term is in [-inf, 0] for
  // any finite input; the per-token offset is formed in double (as one difference of levels, so
  // the first key's offset is exactly 0 however large |x|^2/2). Per-token shifts (queries) are
  // level_j itself: the offset is 0 and |x|^2/2, which cancels, is never computed.
  const auto t = log_terms(map, x, /*with_level=*/rule != Shift::kPerToken);
  // The exp maps below work in place on the logits, a fresh projection whose max was taken
  // without gradient (exp's backward needs only its output), with 1 / root as a second shift
  // (after the first: top + log(root) rounds to top when |top| > 1e8): no temporaries, where
  // exp(P - top) / root would allocate three tensors of the features' size, whose page faults cost
  // a third of the forward at L = 4096, m = 256.
  const double log_root = std::log(root);
  if (rule == Shift::kPerToken) {
    return trigonometric ? trig(t.wx) / root : t.logits.sub_(t.top).sub_(log_root).exp_();
  }
  torch::Tensor offset;  // (..., L, 1) double
  if (rule == Shift::kPerSequence) {
    // One shift for all keys of the sequence. Shifts are common factors of a query's numerator
    // and denominator: they cancel exactly, so they carry no gradient.
    const auto shift = at::amax(t.level, -2, /*keepdim=*/true).detach();
    if (sequence_shift != nullptr) *sequence_shift = shift;
    offset = t.level - shift;
  } else {
    // A given shift (causal and streaming keys) comes from the first key alone, so a later key can
    // sit far above it. Its offset saturates at kMaxKeyExponent: exact whenever the result fits,
    // and e^70 times a sequence of up to e^18 keys still fits float32 (e^88), so no inf/inf = NaN.
    offset = (t.level - given.to(torch::kDouble).detach()).clamp_max(kMaxKeyExponent);
  }
  if (trigonometric) return trig(t.wx) * (at::exp(offset) / root).to(t.wx.scalar_type());
  return t.logits.sub_((t.top.to(torch::kDouble) - offset).to(t.wx.scalar_type()))
      .sub_(log_root)
      .exp_();
}

}  // namespace

PrecomputedInput detail::with_half_squared_norms(const PrecomputedInput& x) {
  PrecomputedInput out = x;
  out.half_squared_norms.resize(x.blocks.size());
  for (size_t b = 0; b < x.blocks.size(); ++b) {
    if (out.half_squared_norms[b].defined() || !x.blocks[b].defined()) continue;
    PrecomputedInput block(x.blocks[b]);
    block.scales = {x.scale(b)};
    out.half_squared_norms[b] = half_squared_norm_double(block);
  }
  return out;
}

torch::Tensor detail::unshifted_features(const FeatureMapImpl& map, const PrecomputedInput& x) {
  return compute(map, x, Shift::kNone);
}

torch::Tensor detail::query_features(const FeatureMapImpl& map, const PrecomputedInput& x) {
  return compute(map, x, exp_kind(map.options.kind()) ? Shift::kPerToken : Shift::kNone);
}

torch::Tensor detail::causal_key_shift(const FeatureMapImpl& map,
                                       const PrecomputedInput& first_key) {
  if (!exp_kind(map.options.kind())) {
    auto shape = first_key.blocks.front().sizes().vec();
    shape.back() = 1;
    return at::zeros(shape, first_key.blocks.front().options());
  }
  // The first key is in every query's past: its largest log-feature, in double. (A floor from the
  // universal bound w.k - |k|^2/2 <= |w|^2/2 does not serve: with FLT's 2r + D input dims that
  // bound is ~10^3 above typical values and underflows every feature.)
  torch::NoGradGuard no_grad;
  return log_terms(map, first_key, /*with_level=*/true).level;
}

torch::Tensor detail::key_features(const FeatureMapImpl& map, const PrecomputedInput& x,
                                   bool causal) {
  if (!exp_kind(map.options.kind())) return compute(map, x, Shift::kNone);
  if (causal) return compute(map, x, Shift::kGiven, causal_key_shift(map, x.first_token()));
  return compute(map, x, Shift::kPerSequence);  // one shift for all keys of the sequence
}

torch::Tensor detail::key_features(const FeatureMapImpl& map, const PrecomputedInput& x,
                                   const torch::Tensor& shift) {
  return compute(map, x, Shift::kGiven, shift);
}

torch::Tensor detail::block_key_features(const FeatureMapImpl& map, const PrecomputedInput& x,
                                         torch::Tensor& shift) {
  shift = torch::Tensor();
  if (!exp_kind(map.options.kind())) return compute(map, x, Shift::kNone);
  return compute(map, x, Shift::kPerSequence, {}, &shift);
}

torch::Tensor FeatureMapImpl::unshifted_features(const FeatureInput& x) const {
  return detail::unshifted_features(*this, x);
}

torch::Tensor FeatureMapImpl::query_features(const FeatureInput& x) const {
  return detail::query_features(*this, x);
}

torch::Tensor FeatureMapImpl::causal_key_shift(const FeatureInput& first_key) const {
  return detail::causal_key_shift(*this, first_key);
}

torch::Tensor FeatureMapImpl::key_features(const FeatureInput& x, bool causal) const {
  return detail::key_features(*this, x, causal);
}

torch::Tensor FeatureMapImpl::key_features(const FeatureInput& x,
                                           const torch::Tensor& shift) const {
  return detail::key_features(*this, x, shift);
}

torch::Tensor FeatureMapImpl::block_key_features(const FeatureInput& x,
                                                 torch::Tensor& shift) const {
  return detail::block_key_features(*this, x, shift);
}

void check_attention_feature_kind(const char* fn, FeatureKind kind) {
  TORCH_CHECK(kind != FeatureKind::kTrigonometric, fn, ": kind ", feature_kind_name(kind),
              " gives a signed estimate of the softmax normaliser that reaches 0 and below, and "
              "attention on it diverges in training; use positive or hyperbolic (FAVOR+), or a "
              "FeatureMap for kernel estimates");
}

void LinearAttentionState::check_tokens(const char* fn, const torch::Tensor& k,
                                        const torch::Tensor& v) const {
  TORCH_CHECK(k.defined() && v.defined() && k.dim() == 4 && v.dim() == 4 &&
                  k.size(0) == v.size(0) && k.size(1) == v.size(1) && k.size(2) == v.size(2),
              fn, ": expected keys (B, H, T, *) and values (B, H, T, Dv), got ",
              k.defined() ? k.sizes() : at::IntArrayRef{}, " and ",
              v.defined() ? v.sizes() : at::IntArrayRef{});
  if (empty()) return;
  TORCH_CHECK(v.size(0) == numerator.size(0) && v.size(1) == numerator.size(1) &&
                  v.size(3) == numerator.size(3),
              fn, ": keys ", k.sizes(), " and values ", v.sizes(),
              " do not fit the state, which holds batch ", numerator.size(0), ", heads ",
              numerator.size(1), " and value width ", numerator.size(3), " (S ", numerator.sizes(),
              ")");
  TORCH_CHECK(
      k.scalar_type() == numerator.scalar_type() && v.scalar_type() == numerator.scalar_type(), fn,
      ": keys have dtype ", k.scalar_type(), " and values ", v.scalar_type(),
      " but the state holds ", numerator.scalar_type());
  TORCH_CHECK(k.device() == numerator.device() && v.device() == numerator.device(), fn,
              ": keys are on ", k.device(), " and values on ", v.device(), " but the state is on ",
              numerator.device());
}

void LinearAttentionState::check_queries(const char* fn, const torch::Tensor& q) const {
  TORCH_CHECK(q.defined() && q.dim() == 4, fn, ": q must have shape (B, H, T, D), got ",
              q.defined() ? q.sizes() : at::IntArrayRef{});
  TORCH_CHECK(!empty(), fn, ": the state is empty; append at least one key first");
  TORCH_CHECK(q.size(0) == numerator.size(0) && q.size(1) == numerator.size(1), fn, ": q ",
              q.sizes(), " does not fit the state, which holds batch ", numerator.size(0),
              " and heads ", numerator.size(1), " (S ", numerator.sizes(), ")");
  TORCH_CHECK(q.scalar_type() == numerator.scalar_type(), fn, ": q has dtype ", q.scalar_type(),
              " but the state holds ", numerator.scalar_type());
  TORCH_CHECK(q.device() == numerator.device(), fn, ": q is on ", q.device(),
              " but the state is on ", numerator.device());
}

void LinearAttentionState::append(const torch::Tensor& phi_k, const torch::Tensor& v) {
  check_tokens("LinearAttentionState::append", phi_k, v);
  TORCH_CHECK(empty() || phi_k.size(3) == numerator.size(2), "LinearAttentionState::append: phi_k ",
              phi_k.sizes(), " has ", phi_k.size(3), " features but the state holds ",
              numerator.size(2), " (S ", numerator.sizes(), ")");
  // phi_k^T v (B, H, M, Dv). One token's is an outer product: a broadcast product, where ATen's
  // bmm would run its tiny matrices with a thread fork per call (see times_state).
  const auto kv =
      phi_k.size(2) == 1 ? phi_k.transpose(-2, -1) * v : at::matmul(phi_k.transpose(-2, -1), v);
  const auto k_sum = phi_k.sum(-2).unsqueeze(-1);  // (B, H, M, 1)
  if (empty()) {
    numerator = kv;
    normaliser = k_sum;
  } else {
    numerator = numerator + kv;
    normaliser = normaliser + k_sum;
  }
  steps += phi_k.size(2);
}

void LinearAttentionState::check_read(const torch::Tensor& phi_q) const {
  check_queries("LinearAttentionState::read", phi_q);
  TORCH_CHECK(phi_q.size(-1) == numerator.size(-2),
              "LinearAttentionState::read: expected phi_q (B, H, T, ", numerator.size(-2),
              "), got ", phi_q.sizes());
}

namespace {

// phi (B, H, T, M) times a state tensor (B, H, M, X). For one token (a streaming step: a decoding
// layer, an optimizer's memory) it is a broadcast product summed over M: ATen 1.13 runs bmm on
// matrices this small in a parallel_for of grain 1 over the batch, so each product forked the
// intra-op threads, which doubled the optimizer memory's step at 2 threads (docs/benchmarks.md,
// "Optimizer step").
torch::Tensor times_state(const torch::Tensor& phi, const torch::Tensor& state) {
  if (phi.size(2) != 1) return at::matmul(phi, state);
  return (phi.transpose(-2, -1) * state).sum(-2, /*keepdim=*/true);
}

}  // namespace

torch::Tensor LinearAttentionState::read(const torch::Tensor& phi_q, double eps) const {
  check_read(phi_q);
  return times_state(phi_q, numerator) / times_state(phi_q, normaliser).clamp_min(eps);
}

torch::Tensor LinearAttentionState::read(const torch::Tensor& phi_q,
                                         const torch::Tensor& floor) const {
  check_read(phi_q);
  TORCH_CHECK(floor.defined(), "LinearAttentionState::read: floor must be a defined tensor");
  return times_state(phi_q, numerator) /
         at::maximum(times_state(phi_q, normaliser), floor.to(phi_q.scalar_type()));
}

void LinearAttentionState::decay(const torch::Tensor& factor) {
  TORCH_CHECK(!empty(), "LinearAttentionState::decay: the state is empty");
  TORCH_CHECK(factor.defined(), "LinearAttentionState::decay: factor must be a defined tensor");
  // Broadcastable to (B, H, 1, 1): at most 4 dims, each 1 or the state's size.
  const std::vector<int64_t> target = {numerator.size(0), numerator.size(1), 1, 1};
  bool fits = factor.dim() <= 4;
  for (int64_t d = 0; fits && d < factor.dim(); ++d) {
    const int64_t size = factor.size(factor.dim() - 1 - d), want = target[3 - d];
    fits = size == 1 || size == want;
  }
  TORCH_CHECK(fits, "LinearAttentionState::decay: factor ", factor.sizes(),
              " must be a scalar or broadcastable to (B, H, 1, 1) = ", at::IntArrayRef(target),
              " (S ", numerator.sizes(), ")");
  numerator = numerator * factor;
  normaliser = normaliser * factor;
}

}  // namespace flt::attention
