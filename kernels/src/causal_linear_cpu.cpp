// Fused causal linear attention on the CPU: out_i = q_i^T S_i, S_i = sum_{j <= i} k_j v_j^T, as a
// running (M, E-block) state per (batch, head, block of value columns): O(M E) memory per thread,
// never the (L, M, E) prefix tensor. The backward is three scans of the same kernel (see
// linear_attention.cpp), so one loop serves forward and backward. A scan may start from a carried
// state and leave its last one there, so a long sequence runs in blocks with the same arithmetic,
// addition for addition, as in one piece.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <omp.h>

#include <algorithm>

#include "flt/detail/cpu_clones.h"  // FLT_CLONES: one AVX2/FMA clone and the baseline
#include "kernel_dispatch.h"

namespace flt::kernels::detail {
namespace {

// Value columns per work item: the state block (M x kColumns) stays in L1/L2 across the scan.
constexpr int64_t kColumns = 64;

template <typename T>
inline __attribute__((always_inline)) void scan_block(const T* __restrict q, const T* __restrict k,
                                                      const T* __restrict v, T* __restrict out,
                                                      T* __restrict state, T* __restrict carry,
                                                      int64_t length, int64_t features,
                                                      int64_t values, int64_t c0, int64_t cols,
                                                      bool reverse) {
  // carry: (M, E) rows of the whole state; this item's columns c0 .. c0 + cols in and out.
  for (int64_t m = 0; m < features; ++m)
    for (int64_t c = 0; c < cols; ++c)
      state[m * cols + c] = carry != nullptr ? carry[m * values + c0 + c] : T(0);
  alignas(64) T acc[kColumns];
  for (int64_t step = 0; step < length; ++step) {
    const int64_t i = reverse ? length - 1 - step : step;
    const T* qi = q + i * features;
    const T* ki = k + i * features;
    const T* vi = v + i * values + c0;
    for (int64_t c = 0; c < cols; ++c) acc[c] = T(0);
    for (int64_t m = 0; m < features; ++m) {
      const T km = ki[m], qm = qi[m];
      T* row = state + m * cols;
#pragma omp simd
      for (int64_t c = 0; c < cols; ++c) {
        row[c] += km * vi[c];
        acc[c] += qm * row[c];
      }
    }
    T* oi = out + i * values + c0;
    for (int64_t c = 0; c < cols; ++c) oi[c] = acc[c];
  }
  if (carry == nullptr) return;
  for (int64_t m = 0; m < features; ++m)
    for (int64_t c = 0; c < cols; ++c) carry[m * values + c0 + c] = state[m * cols + c];
}

FLT_CLONES void scan_block_float(const float* q, const float* k, const float* v, float* out,
                                 float* state, float* carry, int64_t length, int64_t features,
                                 int64_t values, int64_t c0, int64_t cols, bool reverse) {
  scan_block(q, k, v, out, state, carry, length, features, values, c0, cols, reverse);
}
FLT_CLONES void scan_block_double(const double* q, const double* k, const double* v, double* out,
                                  double* state, double* carry, int64_t length, int64_t features,
                                  int64_t values, int64_t c0, int64_t cols, bool reverse) {
  scan_block(q, k, v, out, state, carry, length, features, values, c0, cols, reverse);
}
void scan_block_any(const float* q, const float* k, const float* v, float* out, float* state,
                    float* carry, int64_t length, int64_t features, int64_t values, int64_t c0,
                    int64_t cols, bool reverse) {
  scan_block_float(q, k, v, out, state, carry, length, features, values, c0, cols, reverse);
}
void scan_block_any(const double* q, const double* k, const double* v, double* out, double* state,
                    double* carry, int64_t length, int64_t features, int64_t values, int64_t c0,
                    int64_t cols, bool reverse) {
  scan_block_double(q, k, v, out, state, carry, length, features, values, c0, cols, reverse);
}

// cp: (B H, M, E) carried states, or null (every scan from zero).
template <typename T>
void scan_all(const T* qp, const T* kp, const T* vp, T* op, T* sp, T* cp, int64_t batch_heads,
              int64_t length, int64_t features, int64_t values, int threads, bool reverse) {
  const int64_t blocks = (values + kColumns - 1) / kColumns;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
  for (int64_t item = 0; item < batch_heads * blocks; ++item) {
    const int64_t bh = item / blocks;
    const int64_t c0 = (item % blocks) * kColumns;
    scan_block_any(qp + bh * length * features, kp + bh * length * features,
                   vp + bh * length * values, op + bh * length * values,
                   sp + omp_get_thread_num() * features * kColumns,
                   cp != nullptr ? cp + bh * features * values : nullptr, length, features, values,
                   c0, std::min(kColumns, values - c0), reverse);
  }
}

}  // namespace

at::Tensor causal_linear_scan_cpu(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                  bool reverse, at::Tensor* carry) {
  const int64_t batch_heads = q.size(0) * q.size(1);
  const int64_t length = q.size(2), features = q.size(3), values = v.size(3);
  const int threads = std::max(1, at::get_num_threads());
  TORCH_INTERNAL_ASSERT(
      carry == nullptr || (carry->is_contiguous() && carry->scalar_type() == v.scalar_type() &&
                           carry->numel() == batch_heads * features * values),
      "causal_linear_scan_cpu: carry must be a contiguous (B, H, M, E) tensor");
  auto out = at::empty({q.size(0), q.size(1), length, values}, v.options());
  auto state = at::empty({threads, features * kColumns}, v.options());
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "causal_linear_scan_cpu", [&] {
    scan_all(q.data_ptr<scalar_t>(), k.data_ptr<scalar_t>(), v.data_ptr<scalar_t>(),
             out.data_ptr<scalar_t>(), state.data_ptr<scalar_t>(),
             carry != nullptr ? carry->data_ptr<scalar_t>() : nullptr, batch_heads, length,
             features, values, threads, reverse);
  });
  return out;
}

}  // namespace flt::kernels::detail
