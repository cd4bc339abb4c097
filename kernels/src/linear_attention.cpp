#include "flt/kernels/linear_attention.h"

#include <ATen/ATen.h>

#include <algorithm>

namespace flt::kernels {

torch::Tensor linear_attention_numerator(const torch::Tensor& phi_q, const torch::Tensor& phi_k,
                                         const torch::Tensor& v, bool causal) {
  TORCH_CHECK(phi_q.dim() == 4 && phi_k.dim() == 4 && v.dim() == 4,
              "linear_attention_numerator: expected phi_q (B, H, Lq, M), phi_k (B, H, Lk, M), "
              "v (B, H, Lk, Dv), got ", phi_q.sizes(), ", ", phi_k.sizes(), ", ", v.sizes());
  TORCH_CHECK(phi_q.size(3) == phi_k.size(3), "linear_attention_numerator: feature counts differ: ",
              phi_q.sizes(), " vs ", phi_k.sizes());
  TORCH_CHECK(phi_k.size(2) == v.size(2), "linear_attention_numerator: phi_k has length ",
              phi_k.size(2), " but v has length ", v.size(2));
  if (!causal) {
    // (B, H, M, Dv): the whole key/value summary, then one matmul per query block.
    return at::matmul(phi_q, at::matmul(phi_k.transpose(-2, -1), v));
  }
  TORCH_CHECK(phi_q.size(2) == phi_k.size(2), "linear_attention_numerator: causal needs Lq == Lk, got ",
              phi_q.size(2), " and ", phi_k.size(2));
  const int64_t length = phi_q.size(2);
  if (length <= kCausalChunk) {
    const auto scores = at::matmul(phi_q, phi_k.transpose(-2, -1)).tril();
    return at::matmul(scores, v);
  }
  auto state = at::zeros({phi_k.size(0), phi_k.size(1), phi_k.size(3), v.size(3)}, v.options());
  std::vector<torch::Tensor> outputs;
  outputs.reserve((length + kCausalChunk - 1) / kCausalChunk);
  for (int64_t start = 0; start < length; start += kCausalChunk) {
    const int64_t size = std::min(kCausalChunk, length - start);
    const auto q_blk = phi_q.narrow(2, start, size);
    const auto k_blk = phi_k.narrow(2, start, size);
    const auto v_blk = v.narrow(2, start, size);
    const auto local = at::matmul(at::matmul(q_blk, k_blk.transpose(-2, -1)).tril(), v_blk);
    outputs.push_back(local + at::matmul(q_blk, state));
    state = state + at::matmul(k_blk.transpose(-2, -1), v_blk);
  }
  return at::cat(outputs, 2);
}

torch::Tensor normalized_linear_attention(const torch::Tensor& phi_q, const torch::Tensor& phi_k,
                                          const torch::Tensor& v, bool causal, double eps) {
  const int64_t dv = v.size(-1);
  const auto v_and_ones = at::cat({v, at::ones_like(v.narrow(-1, 0, 1))}, -1);
  const auto both = linear_attention_numerator(phi_q, phi_k, v_and_ones, causal);
  return both.narrow(-1, 0, dv) / both.narrow(-1, dv, 1).clamp_min(eps);
}

}  // namespace flt::kernels
