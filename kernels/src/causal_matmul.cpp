#include "flt/kernels/causal_matmul.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

namespace flt::kernels {
namespace {

// (L, L): true above the diagonal (j > i), the entries a causal row never sees.
at::Tensor future_mask(int64_t length, const at::Device& device) {
  return at::ones({length, length}, at::TensorOptions().dtype(at::kBool).device(device)).triu(1);
}

void check_operands(const at::Tensor& a, const at::Tensor& x) {
  TORCH_CHECK(a.dim() >= 2 && a.dim() == x.dim() && a.size(-1) == a.size(-2) &&
                  a.size(-2) == x.size(-2) &&
                  a.sizes().slice(0, a.dim() - 2) == x.sizes().slice(0, x.dim() - 2),
              "causal_matmul: expected a (..., L, L) and x (..., L, E) with the same leading dims, "
              "got ",
              a.sizes(), " and ", x.sizes());
}

// a x, where a is zero outside its triangle (below the diagonal; above it when `reverse`). x's
// non-finite entries stay out of the matmul, where the zeros of a would turn each into NaN in every
// row, and are carried instead by a prefix sum over the rows that see them (j <= i; j >= i when
// `reverse`): unweighted, which keeps NaN as NaN and inf as inf. For finite x the sum adds exact
// zeros, so the result is the plain matmul's.
at::Tensor triangular_matmul(const at::Tensor& a, const at::Tensor& x, bool reverse) {
  const auto x_finite = x.masked_fill(at::isfinite(x).logical_not(), 0);
  const auto rest = x - x_finite;  // 0, or x's NaN / inf
  const auto carried = reverse ? rest.flip(-2).cumsum(-2).flip(-2) : rest.cumsum(-2);
  return at::matmul(a, x_finite) + carried;
}

class CausalMatmulFunction : public torch::autograd::Function<CausalMatmulFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& a,
                            const at::Tensor& x) {
    ctx->save_for_backward({a, x});
    return triangular_matmul(a, x, /*reverse=*/false);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& a = saved[0];
    const auto& x = saved[1];
    const auto& g = grads[0];
    // da_ij = g_i . x_j for j <= i: a sum over E, not over the mask, so masking the product is
    // enough. dx reads a below the diagonal only (a row that is NaN is NaN above it too).
    return {at::matmul(g, x.transpose(-2, -1)).tril_(),
            triangular_matmul(a.tril().transpose(-2, -1), g, /*reverse=*/true)};
  }
};

class CausalScoresFunction : public torch::autograd::Function<CausalScoresFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& q,
                            const at::Tensor& k, double fill) {
    ctx->save_for_backward({q, k});
    return at::matmul(q, k.transpose(-2, -1))
        .masked_fill_(future_mask(q.size(-2), q.device()), fill);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& q = saved[0];
    const auto& k = saved[1];
    // What arrives above the diagonal is not a gradient of anything (a softmax's backward puts
    // 0 * NaN there in a row that depends on a NaN): it is dropped, not multiplied.
    const auto ds = grads[0].masked_fill(future_mask(q.size(-2), q.device()), 0);
    return {triangular_matmul(ds, k, /*reverse=*/false),
            triangular_matmul(ds.transpose(-2, -1), q, /*reverse=*/true), at::Tensor()};
  }
};

}  // namespace

torch::Tensor causal_matmul(const torch::Tensor& a, const torch::Tensor& x) {
  check_operands(a, x);
  return CausalMatmulFunction::apply(a, x);
}

torch::Tensor causal_scores(const torch::Tensor& q, const torch::Tensor& k, double fill) {
  TORCH_CHECK(q.dim() >= 2 && q.sizes() == k.sizes(),
              "causal_scores: expected q and k of one shape (..., L, D), got ", q.sizes(), " and ",
              k.sizes());
  return CausalScoresFunction::apply(q, k, fill);
}

}  // namespace flt::kernels
