#include "batched_ops.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/autograd.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace flt::metatrain::detail {

namespace {

// Outputs of a 3x3 window with padding 1 along n inputs at a stride.
int64_t strided_size(int64_t n, int64_t stride) {
  return (n - 1) / stride + 1;
}

// The autograd function behind gather_rows: rows copied forward, added back backward, in plain
// loops. index_select's backward is index_add_, which in ATen 1.13 on the CPU costs about 40 ns a
// row: 2.5 of the 3.6 ms of a K = 64 factorization step at 512 cells a step.
class GatherRows : public torch::autograd::Function<GatherRows> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& data,
                               const torch::Tensor& idx) {
    TORCH_CHECK(data.dim() >= 2 && idx.dim() == 2 && idx.size(0) == data.size(0) &&
                    idx.scalar_type() == at::kLong,
                "gather_rows: expected data (K, N, ...) and int64 indices (K, B), got ",
                data.sizes(), " and ", idx.sizes(), " ", idx.scalar_type());
    const auto x = data.contiguous();
    const auto rows = idx.contiguous();
    const int64_t k = x.size(0), n = x.size(1), b = rows.size(1);
    auto sizes = x.sizes().vec();
    sizes[1] = b;
    auto out = at::empty(sizes, x.options());
    // Rows copied as words of the element's size (a memcpy call a row cost more than the copy:
    // rows here are 1-16 elements).
    const int64_t width = k * n == 0 ? 0 : x.numel() / (k * n);
    const int64_t* ip = rows.data_ptr<int64_t>();
    const auto copy = [&](auto word) {
      using Word = decltype(word);
      const auto* from = static_cast<const Word*>(x.data_ptr());
      auto* to = static_cast<Word*>(out.data_ptr());
      for (int64_t i = 0; i < k; ++i) {
        for (int64_t j = 0; j < b; ++j) {
          const int64_t r = ip[i * b + j];
          TORCH_CHECK(r >= 0 && r < n, "gather_rows: index ", r, " outside [0, ", n, ")");
          const Word* row = from + (i * n + r) * width;
          Word* dest = to + (i * b + j) * width;
          for (int64_t c = 0; c < width; ++c) dest[c] = row[c];
        }
      }
    };
    switch (x.element_size()) {
      case 1: copy(uint8_t{}); break;
      case 2: copy(uint16_t{}); break;
      case 4: copy(uint32_t{}); break;
      case 8: copy(uint64_t{}); break;
      default: TORCH_CHECK(false, "gather_rows: unsupported dtype ", x.scalar_type());
    }
    ctx->save_for_backward({rows});
    ctx->saved_data["sizes"] = x.sizes().vec();
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto rows = ctx->get_saved_variables()[0];
    const auto g = grads[0].contiguous();
    auto grad = at::zeros(ctx->saved_data["sizes"].toIntVector(), g.options());
    const int64_t k = grad.size(0), n = grad.size(1), b = rows.size(1);
    const int64_t width = k * n == 0 ? 0 : grad.numel() / (k * n);
    const int64_t* ip = rows.data_ptr<int64_t>();
    AT_DISPATCH_FLOATING_TYPES(g.scalar_type(), "gather_rows backward", [&] {
      const scalar_t* gp = g.data_ptr<scalar_t>();
      scalar_t* dp = grad.data_ptr<scalar_t>();
      for (int64_t i = 0; i < k; ++i) {
        for (int64_t j = 0; j < b; ++j) {
          scalar_t* to = dp + (i * n + ip[i * b + j]) * width;
          const scalar_t* from = gp + (i * b + j) * width;
          for (int64_t c = 0; c < width; ++c) to[c] += from[c];
        }
      }
    });
    return {grad, torch::Tensor()};
  }
};

// The autograd function behind cross_entropy.
class InstanceCrossEntropy : public torch::autograd::Function<InstanceCrossEntropy> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& logits,
                               const torch::Tensor& labels) {
    const auto x = logits.contiguous();
    const auto y = labels.contiguous();
    const int64_t k = x.size(0), b = x.size(1), c = x.size(2);
    TORCH_CHECK(x.scalar_type() == at::kFloat && y.sizes() == x.sizes().slice(0, 2),
                "instance cross-entropy: expected float32 logits (K, B, C) and labels (K, B), got ",
                x.sizes(), " ", x.scalar_type(), " and ", y.sizes());
    auto lse = torch::empty({k, b}, x.options());
    auto loss = torch::empty({k}, x.options());
    const float* xp = x.data_ptr<float>();
    const int64_t* yp = y.data_ptr<int64_t>();
    float* lp = lse.data_ptr<float>();
    at::parallel_for(0, k, 1, [&](int64_t first, int64_t last) {
      for (int64_t i = first; i < last; ++i) {
        double total = 0.0;
        for (int64_t r = i * b; r < (i + 1) * b; ++r) {
          const float* row = xp + r * c;
          float m = row[0];
          for (int64_t j = 1; j < c; ++j) m = row[j] > m ? row[j] : m;
          float sum = 0.0f;
          for (int64_t j = 0; j < c; ++j) sum += std::exp(row[j] - m);
          lp[r] = m + std::log(sum);  // NaN anywhere in the row gives NaN here
          const int64_t label = yp[r];
          TORCH_CHECK(label >= 0 && label < c, "instance cross-entropy: label ", label,
                      " outside [0, ", c, ")");
          total += static_cast<double>(lp[r] - row[label]);
        }
        loss.data_ptr<float>()[i] = static_cast<float>(total / static_cast<double>(b));
      }
    });
    ctx->save_for_backward({x, y, lse});
    return loss;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &y = saved[1], &lse = saved[2];
    const auto g = grad_outputs[0].contiguous();
    const int64_t k = x.size(0), b = x.size(1), c = x.size(2);
    auto grad = torch::empty_like(x);
    const float* xp = x.data_ptr<float>();
    const int64_t* yp = y.data_ptr<int64_t>();
    const float* lp = lse.data_ptr<float>();
    float* gp = grad.data_ptr<float>();
    // d loss_k / d x[k, r, j] = (softmax_j - [j = label]) / B
    at::parallel_for(0, k, 1, [&](int64_t first, int64_t last) {
      for (int64_t i = first; i < last; ++i) {
        const float scale = g.data_ptr<float>()[i] / static_cast<float>(b);
        for (int64_t r = i * b; r < (i + 1) * b; ++r) {
          const float* row = xp + r * c;
          float* out = gp + r * c;
          for (int64_t j = 0; j < c; ++j) out[j] = scale * std::exp(row[j] - lp[r]);
          out[yp[r]] -= scale;
        }
      }
    });
    return {grad, torch::Tensor()};
  }
};

// The autograd function behind conv3x3's patches: for each output pixel (b, i, j) of each instance,
// the 3x3 neighbourhood of input pixel (i stride, j stride) with padding 1, as row (b, i, j) of a
// (K, B H' W', C 9) matrix whose column c 9 + di 3 + dj holds x[b, i s + di - 1, j s + dj - 1, c]
// (0 outside the image). Written from the input in one pass and added back in one pass: built from
// a padded copy, nine slices and a stack, the backward made nine zero tensors of the padded size
// (ATen's slice backward) and added them (half of a small CNN's step at K = 64).
class Patches3x3 : public torch::autograd::Function<Patches3x3> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& input,
                               int64_t stride) {
    TORCH_CHECK(input.dim() == 5 && stride >= 1,
                "conv3x3: expected images (K, B, H, W, C) and a positive stride, got ",
                input.sizes(), " and stride ", stride);
    const auto x = input.contiguous();
    const Geometry g(x.sizes(), stride);
    auto patches = at::empty({g.k, g.b * g.out_h * g.out_w, g.c * 9}, x.options());
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "conv3x3 patches", [&] {
      const scalar_t* xp = x.data_ptr<scalar_t>();
      scalar_t* pp = patches.data_ptr<scalar_t>();
      g.for_each_tap([&](int64_t row, int64_t column, int64_t pixel) {
        pp[row + column] = pixel < 0 ? scalar_t(0) : xp[pixel];
      });
    });
    ctx->saved_data["sizes"] = x.sizes().vec();
    ctx->saved_data["stride"] = stride;
    return patches;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto sizes = ctx->saved_data["sizes"].toIntVector();
    const Geometry g(sizes, ctx->saved_data["stride"].toInt());
    const auto gp_tensor = grads[0].contiguous();
    auto grad = at::zeros(sizes, gp_tensor.options());
    AT_DISPATCH_FLOATING_TYPES(gp_tensor.scalar_type(), "conv3x3 patches backward", [&] {
      const scalar_t* gp = gp_tensor.data_ptr<scalar_t>();
      scalar_t* dp = grad.data_ptr<scalar_t>();
      g.for_each_tap([&](int64_t row, int64_t column, int64_t pixel) {
        if (pixel >= 0) dp[pixel] += gp[row + column];
      });
    });
    return {grad, torch::Tensor()};
  }

 private:
  struct Geometry {
    int64_t k, b, h, w, c, stride, out_h, out_w;
    Geometry(at::IntArrayRef sizes, int64_t s)
        : k(sizes[0]),
          b(sizes[1]),
          h(sizes[2]),
          w(sizes[3]),
          c(sizes[4]),
          stride(s),
          out_h(strided_size(h, s)),
          out_w(strided_size(w, s)) {}
    // visit(row, column, pixel) for every entry of the patches: its row's offset, its column, and
    // the input element's offset (-1 in the padding), in the patches' memory order.
    template <class Visit>
    void for_each_tap(const Visit& visit) const {
      const int64_t width = c * 9;
      for (int64_t image = 0; image < k * b; ++image) {
        for (int64_t i = 0; i < out_h; ++i) {
          for (int64_t j = 0; j < out_w; ++j) {
            const int64_t row = ((image * out_h + i) * out_w + j) * width;
            for (int64_t ch = 0; ch < c; ++ch) {
              for (int64_t di = 0; di < 3; ++di) {
                const int64_t y = i * stride + di - 1;
                for (int64_t dj = 0; dj < 3; ++dj) {
                  const int64_t x = j * stride + dj - 1;
                  const bool inside = y >= 0 && y < h && x >= 0 && x < w;
                  visit(row, ch * 9 + di * 3 + dj,
                        inside ? ((image * h + y) * w + x) * c + ch : -1);
                }
              }
            }
          }
        }
      }
    }
  };
};

// y += a x over n contiguous elements.
template <typename T>
inline void axpy(T* __restrict y, T a, const T* __restrict x, int64_t n) {
  for (int64_t e = 0; e < n; ++e) y[e] += a * x[e];
}

// The autograd function behind affine's small products, per instance and row i, as updates along
// contiguous rows (so each inner loop vectorises):
//   y_i = b + sum_q x_iq w_q,  dx_i = sum_j g_ij (w^T)_j,  dw_q += x_iq g_i,  db += g_i
class SmallAffine : public torch::autograd::Function<SmallAffine> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& input,
                               const torch::Tensor& weight, const torch::Tensor& bias) {
    const auto x = input.contiguous(), w = weight.contiguous(), b = bias.contiguous();
    const int64_t k = x.size(0), rows = x.size(1), in = x.size(2), out = w.size(2);
    auto y = at::empty({k, rows, out}, x.options());
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "affine", [&] {
      const scalar_t *xp = x.data_ptr<scalar_t>(), *wp = w.data_ptr<scalar_t>(),
                     *bp = b.data_ptr<scalar_t>();
      scalar_t* yp = y.data_ptr<scalar_t>();
      for (int64_t n = 0; n < k; ++n) {
        for (int64_t i = 0; i < rows; ++i) {
          scalar_t* yi = yp + (n * rows + i) * out;
          const scalar_t* xi = xp + (n * rows + i) * in;
          std::copy(bp + n * out, bp + (n + 1) * out, yi);
          for (int64_t q = 0; q < in; ++q) axpy(yi, xi[q], wp + (n * in + q) * out, out);
        }
      }
    });
    ctx->save_for_backward({x, w});
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &w = saved[1];
    const auto g = grads[0].contiguous();
    const int64_t k = x.size(0), rows = x.size(1), in = x.size(2), out = w.size(2);
    const auto w_t = w.transpose(1, 2).contiguous();  // (K, Out, In)
    auto dx = at::zeros_like(x), dw = at::zeros_like(w), db = at::zeros({k, out}, g.options());
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "affine backward", [&] {
      const scalar_t *xp = x.data_ptr<scalar_t>(), *wtp = w_t.data_ptr<scalar_t>(),
                     *gp = g.data_ptr<scalar_t>();
      scalar_t *dxp = dx.data_ptr<scalar_t>(), *dwp = dw.data_ptr<scalar_t>(),
               *dbp = db.data_ptr<scalar_t>();
      for (int64_t n = 0; n < k; ++n) {
        for (int64_t i = 0; i < rows; ++i) {
          const scalar_t* gi = gp + (n * rows + i) * out;
          const scalar_t* xi = xp + (n * rows + i) * in;
          scalar_t* dxi = dxp + (n * rows + i) * in;
          for (int64_t j = 0; j < out; ++j) axpy(dxi, gi[j], wtp + (n * out + j) * in, in);
          for (int64_t q = 0; q < in; ++q) axpy(dwp + (n * in + q) * out, xi[q], gi, out);
          axpy(dbp + n * out, scalar_t(1), gi, out);
        }
      }
    });
    return {dx, dw, db};
  }
};

}  // namespace

torch::Tensor affine(const torch::Tensor& x, const torch::Tensor& weight,
                     const torch::Tensor& bias) {
  TORCH_CHECK(x.dim() == 3 && weight.dim() == 3 && weight.size(0) == x.size(0) &&
                  weight.size(1) == x.size(2) && bias.dim() == 2 && bias.size(0) == x.size(0) &&
                  bias.size(1) == weight.size(2),
              "affine: expected x (K, B, In), weight (K, In, Out) and bias (K, Out), got ",
              x.sizes(), ", ", weight.sizes(), " and ", bias.sizes());
  // Up to this many multiply-adds an instance the plain loops win (K = 64, forward and backward,
  // one thread, against baddbmm: 768 MACs 3.3x, 1,024-1,536 1.0-2.2x, 3,072 1.5x, 240 0.9x);
  // from 6,144 on they lose (0.3-1.0x), their inner loops too short for the vector units.
  constexpr int64_t kLoopMacs = 3072;
  if (x.size(1) * x.size(2) * weight.size(2) <= kLoopMacs)
    return SmallAffine::apply(x, weight, bias);
  return at::baddbmm(bias.unsqueeze(1), x, weight);
}

torch::Tensor gather_rows(const torch::Tensor& data, const torch::Tensor& idx) {
  return GatherRows::apply(data, idx);
}

torch::Tensor cross_entropy(const torch::Tensor& logits, const torch::Tensor& labels) {
  return InstanceCrossEntropy::apply(logits, labels);
}

torch::Tensor conv3x3(const torch::Tensor& x, const torch::Tensor& weight,
                      const torch::Tensor& bias, int64_t stride) {
  const int64_t k = x.size(0), b = x.size(1), c = x.size(4), c_out = weight.size(1);
  // (K, B H' W', C 9): entry (c, di 3 + dj) meets weight[:, :, c, di, dj]
  const auto patches = Patches3x3::apply(x, stride);
  const auto out =
      at::baddbmm(bias.unsqueeze(1), patches, weight.reshape({k, c_out, c * 9}).transpose(1, 2));
  return out.view({k, b, strided_size(x.size(2), stride), strided_size(x.size(3), stride), c_out});
}

}  // namespace flt::metatrain::detail
