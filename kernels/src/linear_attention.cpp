#include "flt/kernels/linear_attention.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>

#include "flt/kernels/causal_matmul.h"
#include "kernel_dispatch.h"

namespace flt::kernels {
namespace {

void check_numerator_inputs(const torch::Tensor& phi_q, const torch::Tensor& phi_k,
                            const torch::Tensor& v, bool causal) {
  TORCH_CHECK(phi_q.dim() == 4 && phi_k.dim() == 4 && v.dim() == 4,
              "linear_attention_numerator: expected phi_q (B, H, Lq, M), phi_k (B, H, Lk, M), "
              "v (B, H, Lk, Dv), got ",
              phi_q.sizes(), ", ", phi_k.sizes(), ", ", v.sizes());
  TORCH_CHECK(phi_q.size(3) == phi_k.size(3),
              "linear_attention_numerator: feature counts differ: ", phi_q.sizes(), " vs ",
              phi_k.sizes());
  TORCH_CHECK(phi_k.size(2) == v.size(2), "linear_attention_numerator: phi_k has length ",
              phi_k.size(2), " but v has length ", v.size(2));
  TORCH_CHECK(phi_q.size(0) == phi_k.size(0) && phi_q.size(1) == phi_k.size(1) &&
                  v.size(0) == phi_k.size(0) && v.size(1) == phi_k.size(1),
              "linear_attention_numerator: batch and heads differ: ", phi_q.sizes(), ", ",
              phi_k.sizes(), ", ", v.sizes());
  TORCH_CHECK(phi_k.scalar_type() == phi_q.scalar_type() && v.scalar_type() == phi_q.scalar_type(),
              "linear_attention_numerator: dtypes differ: ", phi_q.scalar_type(), ", ",
              phi_k.scalar_type(), ", ", v.scalar_type());
  TORCH_CHECK(phi_k.device() == phi_q.device() && v.device() == phi_q.device(),
              "linear_attention_numerator: devices differ: ", phi_q.device(), ", ", phi_k.device(),
              ", ", v.device());
  TORCH_CHECK(!causal || phi_q.size(2) == phi_k.size(2),
              "linear_attention_numerator: causal needs Lq == Lk, got ", phi_q.size(2), " and ",
              phi_k.size(2));
}

// out_i = q_i^T sum_{j <= i} k_j v_j^T (j >= i when reverse) on the tensors' device.
// Undefined when the device has no fused scan for these sizes.
at::Tensor fused_scan(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool reverse) {
  if (q.is_cuda()) {
#if defined(FLT_WITH_CUDA)
    return detail::causal_linear_scan_cuda(q, k, v, reverse);
#else
    TORCH_CHECK(false, "linear_attention_numerator: got CUDA tensors (", q.device(),
                ") but FLT was built without CUDA; configure with -DFLT_WITH_CUDA=ON against a "
                "CUDA LibTorch, or move the tensors to the CPU");
#endif
  }
  return detail::causal_linear_scan_cpu(q, k, v, reverse);
}

// The causal numerator as an autograd function. With g = dL/dout:
//   dq_i = sum_{j <= i} (g_i . v_j) k_j   (forward scan of (g, v, k))
//   dk_j = sum_{i >= j} (v_j . g_i) q_i   (reverse scan of (v, g, q))
//   dv_j = sum_{i >= j} (k_j . q_i) g_i   (reverse scan of (k, q, g))
class CausalLinearFunction : public torch::autograd::Function<CausalLinearFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& q,
                            const at::Tensor& k, const at::Tensor& v) {
    ctx->save_for_backward({q, k, v});
    return fused_scan(q, k, v, /*reverse=*/false);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& q = saved[0];
    const auto& k = saved[1];
    const auto& v = saved[2];
    const auto g = grads[0].contiguous();
    return {fused_scan(g, v, k, /*reverse=*/false), fused_scan(v, g, q, /*reverse=*/true),
            fused_scan(k, q, g, /*reverse=*/true)};
  }
};

bool has_fused_scan(const at::Tensor& t) {
  const bool dtype = t.scalar_type() == at::kFloat || t.scalar_type() == at::kDouble;
  return dtype && (t.device().is_cpu() || t.is_cuda());
}

}  // namespace

torch::Tensor linear_attention_numerator(const torch::Tensor& phi_q, const torch::Tensor& phi_k,
                                         const torch::Tensor& v, bool causal) {
  check_numerator_inputs(phi_q, phi_k, v, causal);
  if (!causal || !has_fused_scan(phi_q)) {
    return linear_attention_numerator_composite(phi_q, phi_k, v, causal);
  }
  const auto q = phi_q.contiguous(), k = phi_k.contiguous(), vc = v.contiguous();
#if defined(FLT_WITH_CUDA)
  // The CUDA scan keeps the (M, Dv) state in shared memory; larger states take the composite.
  if (q.is_cuda() &&
      !(detail::causal_linear_scan_cuda_supported(q.size(3), vc.size(3), q.scalar_type()) &&
        detail::causal_linear_scan_cuda_supported(vc.size(3), q.size(3), q.scalar_type()))) {
    return linear_attention_numerator_composite(phi_q, phi_k, v, causal);
  }
#endif
  return CausalLinearFunction::apply(q, k, vc);
}

torch::Tensor linear_attention_numerator_composite(const torch::Tensor& phi_q,
                                                   const torch::Tensor& phi_k,
                                                   const torch::Tensor& v, bool causal) {
  check_numerator_inputs(phi_q, phi_k, v, causal);
  if (!causal) {
    // (B, H, M, Dv): the whole key/value summary, then one matmul per query block.
    return at::matmul(phi_q, at::matmul(phi_k.transpose(-2, -1), v));
  }
  // Within a chunk the masked (C, C) scores go through causal_matmul.h, which never reads the
  // masked pairs: a NaN in one token reaches only the outputs that see it.
  const auto local_causal = [](const at::Tensor& q_blk, const at::Tensor& k_blk,
                               const at::Tensor& v_blk) {
    return causal_matmul(causal_scores(q_blk, k_blk, /*fill=*/0.0), v_blk);
  };
  const int64_t length = phi_q.size(2);
  if (length <= kCausalChunk) return local_causal(phi_q, phi_k, v);
  auto state = at::zeros({phi_k.size(0), phi_k.size(1), phi_k.size(3), v.size(3)}, v.options());
  std::vector<torch::Tensor> outputs;
  outputs.reserve((length + kCausalChunk - 1) / kCausalChunk);
  for (int64_t start = 0; start < length; start += kCausalChunk) {
    const int64_t size = std::min(kCausalChunk, length - start);
    const auto q_blk = phi_q.narrow(2, start, size);
    const auto k_blk = phi_k.narrow(2, start, size);
    const auto v_blk = v.narrow(2, start, size);
    outputs.push_back(local_causal(q_blk, k_blk, v_blk) + at::matmul(q_blk, state));
    state = state + at::matmul(k_blk.transpose(-2, -1), v_blk);
  }
  return at::cat(outputs, 2);
}

torch::Tensor normalized_linear_attention(const torch::Tensor& phi_q, const torch::Tensor& phi_k,
                                          const torch::Tensor& v, bool causal,
                                          const torch::Tensor& floor) {
  TORCH_CHECK(v.dim() == 4, "normalized_linear_attention: v must have shape (B, H, Lk, Dv), got ",
              v.sizes());
  TORCH_CHECK(floor.defined(), "normalized_linear_attention: floor must be a defined tensor");
  const int64_t dv = v.size(-1);
  const auto v_and_ones = at::cat({v, at::ones_like(v.narrow(-1, 0, 1))}, -1);
  const auto both = linear_attention_numerator(phi_q, phi_k, v_and_ones, causal);
  return both.narrow(-1, 0, dv) / at::maximum(both.narrow(-1, dv, 1), floor.to(v.scalar_type()));
}

torch::Tensor normalized_linear_attention(const torch::Tensor& phi_q, const torch::Tensor& phi_k,
                                          const torch::Tensor& v, bool causal, double eps) {
  return normalized_linear_attention(phi_q, phi_k, v, causal, at::scalar_tensor(eps, v.options()));
}

}  // namespace flt::kernels
