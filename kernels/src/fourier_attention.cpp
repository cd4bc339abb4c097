#include "flt/kernels/fourier_attention.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cmath>
#include <limits>
#include <vector>

#include "flt/kernels/causal_matmul.h"
#include "fourier_attention_cpu.h"
#include "kernel_dispatch.h"

namespace flt::kernels {
namespace {

using fourier::FactorMode;

FactorMode factor_mode(FourierPhi phi, int64_t power) {
  switch (phi) {
    case FourierPhi::kPower: return power % 2 == 0 ? FactorMode::kPowerEven : FactorMode::kPowerOdd;
    case FourierPhi::kAbs:
      return FactorMode::kPowerEven;  // |s|^p: the even-power arithmetic, no sign
    case FourierPhi::kRelu: return FactorMode::kRelu;
    case FourierPhi::kSigmoid: break;
  }
  TORCH_CHECK(false, "fourier_attention: phi ", fourier_phi_name(phi), " has no fused kernel");
}

// The (batch, head) operands the CPU kernel reads: per-token sin/cos and keys transposed.
struct Prepared {
  at::Tensor q, q_sin, q_cos, k_t, k_sin_t, k_cos_t, v, r;
};

Prepared prepare(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                 const at::Tensor& r) {
  const auto r4 = r.view({1, r.size(0), 1, r.size(1)});
  const auto rq = q * r4;
  const auto rk = (k * r4).transpose(2, 3);
  return {q,
          at::sin(rq),
          at::cos(rq),
          k.transpose(2, 3).contiguous(),
          at::sin(rk).contiguous(),
          at::cos(rk).contiguous(),
          v,
          r};
}

template <typename T>
cpu::FourierOperands<T> operands_of(const Prepared& p) {
  return {p.q.data_ptr<T>(),   p.q_sin.data_ptr<T>(),   p.q_cos.data_ptr<T>(),
          p.k_t.data_ptr<T>(), p.k_sin_t.data_ptr<T>(), p.k_cos_t.data_ptr<T>(),
          p.v.data_ptr<T>(),   p.r.data_ptr<T>()};
}

cpu::FourierProblem problem_of(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               int64_t power, FactorMode mode, bool causal) {
  cpu::FourierProblem p;
  p.batch = q.size(0);
  p.heads = q.size(1);
  p.lq = q.size(2);
  p.lk = k.size(2);
  p.dim = q.size(3);
  p.dv = v.size(3);
  p.power = static_cast<int>(power);
  p.mode = mode;
  p.causal = causal;
  p.threads = std::max(1, at::get_num_threads());
  return p;
}

// Autograd function around the per-device fused kernels; r is |R| expanded to (H, D).
class FourierAttentionFunction : public torch::autograd::Function<FourierAttentionFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& q,
                            const at::Tensor& k, const at::Tensor& v, const at::Tensor& r,
                            int64_t power, int64_t mode, bool causal) {
    const auto fm = static_cast<FactorMode>(mode);
    const auto results = q.is_cuda() ? forward_cuda(q, k, v, r, power, fm, causal)
                                     : detail::fourier_forward_cpu(q, k, v, r, power, fm, causal);
    ctx->save_for_backward({q, k, v, r, results[0], results[1], results[2]});
    ctx->saved_data["power"] = power;
    ctx->saved_data["mode"] = mode;
    ctx->saved_data["causal"] = causal;
    return results[0];
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const int64_t power = ctx->saved_data["power"].toInt();
    const auto mode = static_cast<FactorMode>(ctx->saved_data["mode"].toInt());
    const bool causal = ctx->saved_data["causal"].toBool();
    const auto grad_out = grads[0].contiguous();
    const auto& q = saved[0];
    const auto g = q.is_cuda() ? backward_cuda(saved, grad_out, power, mode, causal)
                               : detail::fourier_backward_cpu(
                                     saved[0], saved[1], saved[2], saved[3], saved[4], saved[5],
                                     saved[6], grad_out, power, mode, causal);
    return {g[0], g[1], g[2], g[3], at::Tensor(), at::Tensor(), at::Tensor()};
  }

 private:
  static std::vector<at::Tensor> forward_cuda(const at::Tensor& q, const at::Tensor& k,
                                              const at::Tensor& v, const at::Tensor& r,
                                              int64_t power, FactorMode mode, bool causal) {
#if defined(FLT_WITH_CUDA)
    return detail::fourier_forward_cuda(q, k, v, r, power, mode, causal);
#else
    TORCH_CHECK(false,
                "fourier_attention: got CUDA tensors but FLT was built without CUDA "
                "(configure with -DFLT_WITH_CUDA=ON and a CUDA LibTorch)");
#endif
  }
  static std::vector<at::Tensor> backward_cuda(const std::vector<at::Tensor>& s,
                                               const at::Tensor& grad_out, int64_t power,
                                               FactorMode mode, bool causal) {
#if defined(FLT_WITH_CUDA)
    return detail::fourier_backward_cuda(s[0], s[1], s[2], s[3], s[4], s[5], s[6], grad_out, power,
                                         mode, causal);
#else
    TORCH_CHECK(false, "fourier_attention: got CUDA tensors but FLT was built without CUDA");
#endif
  }
};

void check_op_inputs(const char* fn, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const at::Tensor& r, int64_t power, bool causal) {
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, fn,
              ": expected q (B, H, Lq, D), k (B, H, Lk, D), v (B, H, Lk, Dv), got ", q.sizes(),
              ", ", k.sizes(), ", ", v.sizes());
  TORCH_CHECK(q.size(0) == k.size(0) && q.size(1) == k.size(1) && q.size(3) == k.size(3), fn,
              ": q ", q.sizes(), " and k ", k.sizes(), " disagree in B, H or D");
  TORCH_CHECK(v.size(0) == k.size(0) && v.size(1) == k.size(1) && v.size(2) == k.size(2), fn,
              ": v ", v.sizes(), " disagrees with k ", k.sizes(), " in B, H or L");
  TORCH_CHECK(!causal || q.size(2) == k.size(2), fn, ": causal needs Lq == Lk, got ", q.size(2),
              " and ", k.size(2));
  TORCH_CHECK(r.dim() == 2 && r.size(0) == q.size(1) && r.size(1) == q.size(3), fn,
              ": r must be |R| expanded to (H, D) = (", q.size(1), ", ", q.size(3), "), got ",
              r.sizes());
  TORCH_CHECK(k.scalar_type() == q.scalar_type() && v.scalar_type() == q.scalar_type() &&
                  r.scalar_type() == q.scalar_type(),
              fn, ": q, k, v, r must share one dtype, got ", q.scalar_type(), ", ", k.scalar_type(),
              ", ", v.scalar_type(), ", ", r.scalar_type());
  TORCH_CHECK(k.device() == q.device() && v.device() == q.device() && r.device() == q.device(), fn,
              ": q, k, v, r must be on one device, got ", q.device(), ", ", k.device(), ", ",
              v.device(), ", ", r.device());
  TORCH_CHECK(power >= 1 && power <= kMaxFourierPower, fn, ": power must be in [1, ",
              kMaxFourierPower, "], got ", power);
}

}  // namespace

const char* fourier_phi_name(FourierPhi phi) {
  switch (phi) {
    case FourierPhi::kPower: return "power";
    case FourierPhi::kAbs: return "abs";
    case FourierPhi::kRelu: return "relu";
    case FourierPhi::kSigmoid: return "sigmoid";
  }
  return "unknown";
}

namespace detail {

std::vector<at::Tensor> fourier_forward_cpu(const at::Tensor& q, const at::Tensor& k,
                                            const at::Tensor& v, const at::Tensor& r, int64_t power,
                                            fourier::FactorMode mode, bool causal) {
  const auto prepared = prepare(q, k, v, r);
  const auto problem = problem_of(q, k, v, power, mode, causal);
  auto out = at::empty({q.size(0), q.size(1), q.size(2), v.size(3)}, q.options());
  auto row_max = at::empty({q.size(0), q.size(1), q.size(2)}, q.options());
  auto row_sum = at::empty_like(row_max);
  // The normalised weights, kept for the backward (O(B H Lq Lk), still below softmax's memory).
  auto weights = at::empty({q.size(0), q.size(1), q.size(2), k.size(2)}, q.options());
  auto workspace = at::empty({cpu::fourier_forward_workspace(problem)}, q.options());
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "fourier_forward_cpu", [&] {
    cpu::fourier_forward<scalar_t>(problem, operands_of<scalar_t>(prepared),
                                   out.data_ptr<scalar_t>(), row_max.data_ptr<scalar_t>(),
                                   row_sum.data_ptr<scalar_t>(), weights.data_ptr<scalar_t>(),
                                   workspace.data_ptr<scalar_t>());
  });
  return {out, weights, row_sum};
}

std::vector<at::Tensor> fourier_backward_cpu(const at::Tensor& q, const at::Tensor& k,
                                             const at::Tensor& v, const at::Tensor& r,
                                             const at::Tensor& out, const at::Tensor& weights,
                                             const at::Tensor& row_sum, const at::Tensor& grad_out,
                                             int64_t power, fourier::FactorMode mode, bool causal) {
  const auto prepared = prepare(q, k, v, r);
  const auto problem = problem_of(q, k, v, power, mode, causal);
  auto dq = at::empty_like(q);
  auto dk = at::empty_like(k);
  auto dv = at::empty_like(v);
  auto dr = at::empty_like(r);
  auto workspace = at::empty({cpu::fourier_backward_workspace(problem)}, q.options());
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "fourier_backward_cpu", [&] {
    cpu::fourier_backward<scalar_t>(
        problem, operands_of<scalar_t>(prepared), out.data_ptr<scalar_t>(),
        weights.data_ptr<scalar_t>(), row_sum.data_ptr<scalar_t>(), grad_out.data_ptr<scalar_t>(),
        dq.data_ptr<scalar_t>(), dk.data_ptr<scalar_t>(), dv.data_ptr<scalar_t>(),
        dr.data_ptr<scalar_t>(), workspace.data_ptr<scalar_t>());
  });
  return {dq, dk, dv, dr};
}

}  // namespace detail

torch::Tensor fourier_attention_fused_cpu(const torch::Tensor& q, const torch::Tensor& k,
                                          const torch::Tensor& v, const torch::Tensor& r,
                                          int64_t power, FourierPhi phi, bool causal) {
  check_op_inputs("fourier_attention_fused_cpu", q, k, v, r, power, causal);
  TORCH_CHECK(q.device().is_cpu(), "fourier_attention_fused_cpu: tensors are on ", q.device());
  TORCH_CHECK(q.scalar_type() == at::kFloat || q.scalar_type() == at::kDouble,
              "fourier_attention_fused_cpu: dtype must be float or double, got ", q.scalar_type());
  const int64_t mode = static_cast<int64_t>(factor_mode(phi, power));
  return FourierAttentionFunction::apply(q.contiguous(), k.contiguous(), v.contiguous(),
                                         r.contiguous(), power, mode, causal);
}

torch::Tensor fourier_attention_op(const torch::Tensor& q, const torch::Tensor& k,
                                   const torch::Tensor& v, const torch::Tensor& r, int64_t power,
                                   FourierPhi phi, bool causal) {
  check_op_inputs("fourier_attention", q, k, v, r, power, causal);
  const bool fused_dtype = q.scalar_type() == at::kFloat || q.scalar_type() == at::kDouble;
  const bool fused_phi = phi != FourierPhi::kSigmoid;
  if (q.is_cuda()) {
#if !defined(FLT_WITH_CUDA)
    TORCH_CHECK(false, "fourier_attention: got CUDA tensors (", q.device(),
                ") but FLT was built without CUDA; configure with -DFLT_WITH_CUDA=ON against a "
                "CUDA LibTorch, or move the tensors to the CPU");
#endif
  } else if (!q.device().is_cpu()) {
    return fourier_attention_composite(q, k, v, r, power, phi, causal);
  }
  if (!fused_dtype || !fused_phi)
    return fourier_attention_composite(q, k, v, r, power, phi, causal);
  const int64_t mode = static_cast<int64_t>(factor_mode(phi, power));
  return FourierAttentionFunction::apply(q.contiguous(), k.contiguous(), v.contiguous(),
                                         r.contiguous(), power, mode, causal);
}

torch::Tensor fourier_attention_composite(const torch::Tensor& q, const torch::Tensor& k,
                                          const torch::Tensor& v, const torch::Tensor& r,
                                          int64_t power, FourierPhi phi, bool causal) {
  check_op_inputs("fourier_attention_composite", q, k, v, r, power, causal);
  const double small = q.scalar_type() == at::kDouble ? fourier::Precision<double>::kSmall
                                                      : fourier::Precision<float>::kSmall;
  // x: (B, H, Lq, Lk, D) = R_d (q_id - k_jd)
  auto x = r.view({1, r.size(0), 1, 1, r.size(1)}) * (q.unsqueeze(3) - k.unsqueeze(2));
  const int64_t length = q.size(2);
  at::Tensor future;  // (Lq, Lk): causal, true for the keys a query does not see
  if (causal) {
    future = at::ones({length, length}, q.options().dtype(at::kBool)).triu(1);
    // A masked pair's difference is set to 0 before any function of it: its weight is masked
    // below, and its (zero) gradient is not multiplied by derivatives at a NaN of q_i or k_j.
    x = x.masked_fill(future.unsqueeze(-1), 0.0);
  }
  const auto near_zero = x.abs() < small;
  const auto x_safe = at::where(near_zero, at::ones_like(x), x);  // no 0/0 in either branch
  // The series' argument, 0 where the series is not taken: there it overflowed float (x^14 / 15!
  // from |x| ~ 4e3), and its derivative, times the unused branch's zero gradient, gave NaN.
  const auto x2 = at::where(near_zero, x * x, at::zeros_like(x));
  // s(x) near 0 from its Taylor series sum_n (-1)^n x^2n / (2n+1)! (n <= 7: below double
  // rounding for |x| < 0.5), so autograd differentiates a polynomial there, never 0/0.
  auto s_series = at::zeros_like(x2);
  double factorial = 1.0;
  std::vector<double> coeffs;
  for (int n = 0; n < 8; ++n) {
    if (n > 0) factorial *= (2.0 * n) * (2.0 * n + 1.0);
    coeffs.push_back((n % 2 == 0 ? 1.0 : -1.0) / factorial);
  }
  for (int n = 7; n >= 0; --n) s_series = s_series * x2 + coeffs[n];
  const auto s = at::where(near_zero, s_series, at::sin(x_safe) / x_safe);
  at::Tensor log_w;  // (B, H, Lq, Lk): log |weight|
  at::Tensor sign;   // (B, H, Lq, Lk): sign of the weight, undefined = +1
  const double p = static_cast<double>(power);
  switch (phi) {
    case FourierPhi::kPower:
      log_w = p * at::log(s.abs()).sum(-1);
      if (power % 2 == 1) sign = at::sign(s).prod(-1);
      break;
    case FourierPhi::kAbs: log_w = p * at::log(s.abs()).sum(-1); break;
    case FourierPhi::kRelu: {
      // log max(s, 0): -inf where s <= 0, with the log's argument kept at 1 there (no 0 * inf);
      // a NaN s stays NaN (a test for s > 0 would turn it into a zero weight).
      const auto non_positive = s <= 0;
      const auto minus_inf = at::full_like(s, -std::numeric_limits<double>::infinity());
      log_w = p * at::where(non_positive, minus_inf,
                            at::log(at::where(non_positive, at::ones_like(s), s)))
                      .sum(-1);
      break;
    }
    case FourierPhi::kSigmoid: log_w = at::log_sigmoid(s).sum(-1); break;
  }
  if (causal) log_w = log_w.masked_fill(future, -std::numeric_limits<double>::infinity());
  // Max shift; a row with every weight 0 (log -inf) gets shift 0 and weight sum 0.
  auto shift = std::get<0>(log_w.max(-1, /*keepdim=*/true)).detach();
  shift = at::where(at::isfinite(shift), shift, at::zeros_like(shift));
  auto w = at::exp(log_w - shift);
  if (sign.defined()) w = w * sign;
  const auto total = w.sum(-1, /*keepdim=*/true);
  const auto vanished = total == 0;
  // Causal: row i reads v_j for j <= i only, so a NaN in v_j stays out of the rows before j.
  const auto weighted = causal ? causal_matmul(w, v) : at::matmul(w, v);
  const auto out = weighted / at::where(vanished, at::ones_like(total), total);
  return at::where(vanished, at::zeros_like(out), out);
}

}  // namespace flt::kernels
