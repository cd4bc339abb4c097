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

// out_i = q_i^T sum_{j <= i} k_j v_j^T (j >= i when reverse): the CPU scan (float, double).
at::Tensor fused_scan(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool reverse) {
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
  return dtype && t.device().is_cpu();
}

}  // namespace

torch::Tensor linear_attention_numerator(const torch::Tensor& phi_q, const torch::Tensor& phi_k,
                                         const torch::Tensor& v, bool causal) {
  check_numerator_inputs(phi_q, phi_k, v, causal);
  // On a GPU the chunked composite runs every chunk of every head at once; the scan runs one
  // thread block per head, and at B H = 8 leaves most of the device idle (H200: 93 ms against
  // SDPA's 129 ms at L = 64k, B 1, H 8, docs/benchmarks.md). The CPU's scan (a core per head, no
  // (C, C) scores) stays the fastest there.
  if (!causal || !has_fused_scan(phi_q)) {
    return linear_attention_numerator_composite(phi_q, phi_k, v, causal);
  }
  return CausalLinearFunction::apply(phi_q.contiguous(), phi_k.contiguous(), v.contiguous());
}

torch::Tensor causal_linear_attention_block(const torch::Tensor& phi_q, const torch::Tensor& phi_k,
                                            const torch::Tensor& v, torch::Tensor& state,
                                            bool reverse) {
  check_numerator_inputs(phi_q, phi_k, v, /*causal=*/true);
  TORCH_CHECK(has_fused_scan(phi_q),
              "causal_linear_attention_block: CPU float or double only, got ", phi_q.scalar_type(),
              " on ", phi_q.device());
  TORCH_CHECK(state.defined() && state.is_contiguous() &&
                  state.sizes() ==
                      at::IntArrayRef({phi_k.size(0), phi_k.size(1), phi_k.size(3), v.size(3)}) &&
                  state.scalar_type() == v.scalar_type(),
              "causal_linear_attention_block: state must be a contiguous (B, H, M, Dv) = (",
              phi_k.size(0), ", ", phi_k.size(1), ", ", phi_k.size(3), ", ", v.size(3),
              ") tensor of the values' dtype, got ",
              state.defined() ? state.sizes() : at::IntArrayRef{});
  TORCH_CHECK(!at::GradMode::is_enabled() ||
                  !(phi_q.requires_grad() || phi_k.requires_grad() || v.requires_grad()),
              "causal_linear_attention_block: no autograd (use linear_attention_numerator)");
  return detail::causal_linear_scan_cpu(phi_q.contiguous(), phi_k.contiguous(), v.contiguous(),
                                        reverse, &state);
}

torch::Tensor linear_attention_numerator_composite(const torch::Tensor& phi_q,
                                                   const torch::Tensor& phi_k,
                                                   const torch::Tensor& v, bool causal) {
  check_numerator_inputs(phi_q, phi_k, v, causal);
  if (!causal) {
    // (B, H, M, Dv): the whole key/value summary, then one matmul per query block.
    return at::matmul(phi_q, at::matmul(phi_k.transpose(-2, -1), v));
  }
  // Chunks of C keys, all at once: the sequence padded to n C with zeros (zero keys and values
  // add nothing; the padded queries' rows are dropped), then per chunk c
  //   out_c = causal(q_c k_c^T) v_c + q_c S_{c-1},   S_c = sum_{c' <= c} k_c'^T v_c',
  // the within-chunk part through causal_matmul.h (it never reads the masked pairs, so a NaN in
  // one token reaches only the outputs that see it), the states by a cumulative sum over chunks
  // shifted by one (not cumsum - own term, which would carry a chunk's NaN into its own earlier
  // rows), summed in float at least. A handful of batched matmuls whatever L: no loop over
  // chunks, so a GPU runs every chunk of every head at once.
  const int64_t batch = phi_q.size(0), heads = phi_q.size(1), length = phi_q.size(2);
  const int64_t features = phi_q.size(3), values = v.size(3);
  const int64_t chunk = std::min(kCausalChunk, length);
  const int64_t chunks = (length + chunk - 1) / chunk, padded = chunks * chunk;
  const auto blocks = [&](const at::Tensor& x) {  // (B, H, L, E) -> (B, H n, C, E)
    const auto full = padded == length ? x : at::constant_pad_nd(x, {0, 0, 0, padded - length});
    return full.reshape({batch, heads * chunks, chunk, x.size(3)});
  };
  const auto q_blk = blocks(phi_q), k_blk = blocks(phi_k), v_blk = blocks(v);
  auto out = causal_matmul(causal_scores(q_blk, k_blk, /*fill=*/0.0), v_blk);
  if (chunks > 1) {
    const auto sum_type = at::promote_types(v.scalar_type(), at::kFloat);
    const auto per_chunk = at::matmul(k_blk.transpose(-2, -1), v_blk)
                               .reshape({batch, heads, chunks, features, values})
                               .to(sum_type);
    const auto before = at::constant_pad_nd(per_chunk.narrow(2, 0, chunks - 1).cumsum(2),
                                            {0, 0, 0, 0, 1, 0});  // S_{c-1}; S_{-1} = 0
    out = out +
          at::matmul(q_blk,
                     before.to(v.scalar_type()).reshape({batch, heads * chunks, features, values}));
  }
  return out.reshape({batch, heads, padded, values}).narrow(2, 0, length);
}

torch::Tensor normalized_linear_attention(const torch::Tensor& phi_q, const torch::Tensor& phi_k,
                                          const torch::Tensor& v, bool causal,
                                          const torch::Tensor& floor) {
  TORCH_CHECK(v.dim() == 4, "normalized_linear_attention: v must have shape (B, H, Lk, Dv), got ",
              v.sizes());
  TORCH_CHECK(floor.defined(), "normalized_linear_attention: floor must be a defined tensor");
  if (!causal) {
    // The numerator and the normaliser as their own products, phi_q (phi_k^T v) and
    // phi_q (phi_k^T 1): [v, 1] concatenated and the product split would copy v, and with autograd
    // the split's two slices would each take a zero-filled gradient of the whole product and the
    // concatenation another copy (a fifth of a Performer's forward + backward at m = 64, L = 1024).
    check_numerator_inputs(phi_q, phi_k, v, causal);
    const auto numerator = at::matmul(phi_q, at::matmul(phi_k.transpose(-2, -1), v));
    const auto normaliser = at::matmul(phi_q, phi_k.sum(-2).unsqueeze(-1));  // (B, H, Lq, 1)
    return numerator / at::maximum(normaliser, floor.to(v.scalar_type()));
  }
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
