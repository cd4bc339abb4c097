#include "flt/attention/fourier.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <cmath>

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
  TORCH_CHECK(R.device() == q.device(), "fourier_attention: R is on ", R.device(),
              " but q is on ", q.device());
  const auto r = fourier_r_per_head_dim("fourier_attention", R, q.size(1), q.size(3));
  if (r.device().is_cpu()) {
    TORCH_CHECK(at::isfinite(r).all().item<bool>(), "fourier_attention: R must be finite, got ",
                R);
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
  return fourier_attention(q, k, eye, R, power, causal, phi);
}

FourierAttentionImpl::FourierAttentionImpl(FourierAttentionOptions options_)
    : options(std::move(options_)) {
  reset();
}

void FourierAttentionImpl::reset() {
  const auto& o = options;
  TORCH_CHECK(std::isfinite(o.r_init()), "FourierAttention: r_init must be finite, got ",
              o.r_init());
  TORCH_CHECK(o.heads() > 0, "FourierAttention: heads must be positive, got ", o.heads());
  check_power("FourierAttention", o.power(), o.phi());
  const bool needs_dim = o.r_shape() == FourierRShape::kPerDimension ||
                         o.r_shape() == FourierRShape::kPerHeadDimension;
  TORCH_CHECK(!needs_dim || o.head_dim() > 0,
              "FourierAttention: a per-dimension R needs head_dim > 0, got ", o.head_dim());
  std::vector<int64_t> shape;
  switch (o.r_shape()) {
    case FourierRShape::kScalar: shape = {1}; break;
    case FourierRShape::kPerDimension: shape = {o.head_dim()}; break;
    case FourierRShape::kPerHead: shape = {o.heads(), 1}; break;
    case FourierRShape::kPerHeadDimension: shape = {o.heads(), o.head_dim()}; break;
  }
  const auto init = torch::full(shape, o.r_init());
  R = o.learn_r() ? register_parameter("R", init) : register_buffer("R", init);
}

void FourierAttentionImpl::pretty_print(std::ostream& stream) const {
  static const char* shapes[] = {"scalar", "per-dimension", "per-head", "per-head-dimension"};
  stream << "flt::attention::FourierAttention(phi=" << kernels::fourier_phi_name(options.phi());
  if (options.phi() != FourierPhi::kSigmoid) stream << ", power=" << options.power();
  stream << ", R=" << shapes[static_cast<int>(options.r_shape())] << " init "
         << options.r_init() << (options.learn_r() ? " learnable" : " fixed") << ")";
}

torch::Tensor FourierAttentionImpl::forward(const torch::Tensor& q, const torch::Tensor& k,
                                            const torch::Tensor& v, const AttentionCall& call) {
  return fourier_attention(q, k, v, R, options.power(), call.causal, options.phi());
}

torch::Tensor FourierAttentionImpl::materialize(const torch::Tensor& q, const torch::Tensor& k,
                                                const AttentionCall& call) {
  return fourier_attention_weights(q, k, R, options.power(), call.causal, options.phi());
}

}  // namespace flt::attention
