// Causal linear attention scan on CUDA: one block per (batch, head); the (M, E) state stays in
// shared memory while the sequence is processed in chunks (in-chunk causal scores + the state from
// earlier chunks), so no (L, M, E) tensor and no atomics. The backward is three scans of this
// kernel (see kernels/src/linear_attention.cpp).
#include <cuda_runtime.h>

#include "flt_cuda_kernels.h"

namespace flt::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr size_t kSharedBudget = 48 * 1024;

size_t scan_shared_bytes(int64_t features, int64_t values, int chunk, size_t element) {
  return (features * values + chunk * (2 * features + values) + chunk * chunk) * element;
}

// Largest chunk in {64, 32, 16, 8} whose shared memory fits the budget; 0 when none does.
int scan_chunk(int64_t features, int64_t values, size_t element) {
  for (int chunk : {64, 32, 16, 8}) {
    if (scan_shared_bytes(features, values, chunk, element) <= kSharedBudget) return chunk;
  }
  return 0;
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    causal_linear_scan_kernel(int64_t length, int features, int values, int chunk,
                              const T* __restrict__ q, const T* __restrict__ k,
                              const T* __restrict__ v, T* __restrict__ out, bool reverse) {
  extern __shared__ unsigned char shared_raw[];
  const int F = features, E = values;
  T* state = reinterpret_cast<T*>(shared_raw);  // F x E
  T* qc = state + F * E;                        // chunk x F
  T* kc = qc + chunk * F;                       // chunk x F
  T* vc = kc + chunk * F;                       // chunk x E
  T* scores = vc + chunk * E;                   // chunk x chunk
  const int64_t bh = blockIdx.x;
  q += bh * length * F;
  k += bh * length * F;
  v += bh * length * E;
  out += bh * length * E;
  for (int e = threadIdx.x; e < F * E; e += blockDim.x) state[e] = T(0);
  for (int64_t t0 = 0; t0 < length; t0 += chunk) {
    const int n = static_cast<int>(min(static_cast<int64_t>(chunk), length - t0));
    __syncthreads();
    // Row a of the chunk is sequence position t0 + a in scan order (reversed when `reverse`).
    for (int e = threadIdx.x; e < n * F; e += blockDim.x) {
      const int a = e / F, f = e % F;
      const int64_t row = reverse ? length - 1 - (t0 + a) : t0 + a;
      qc[e] = q[row * F + f];
      kc[e] = k[row * F + f];
    }
    for (int e = threadIdx.x; e < n * E; e += blockDim.x) {
      const int a = e / E, c = e % E;
      const int64_t row = reverse ? length - 1 - (t0 + a) : t0 + a;
      vc[e] = v[row * E + c];
    }
    __syncthreads();
    for (int e = threadIdx.x; e < n * n; e += blockDim.x) {
      const int a = e / n, b = e % n;
      T s = 0;
      if (b <= a) {
        for (int f = 0; f < F; ++f) s += qc[a * F + f] * kc[b * F + f];
      }
      scores[a * chunk + b] = s;
    }
    __syncthreads();
    for (int e = threadIdx.x; e < n * E; e += blockDim.x) {
      const int a = e / E, c = e % E;
      T acc = 0;
      for (int f = 0; f < F; ++f) acc += qc[a * F + f] * state[f * E + c];
      for (int b = 0; b <= a; ++b) acc += scores[a * chunk + b] * vc[b * E + c];
      const int64_t row = reverse ? length - 1 - (t0 + a) : t0 + a;
      out[row * E + c] = acc;
    }
    __syncthreads();
    for (int e = threadIdx.x; e < F * E; e += blockDim.x) {
      const int f = e / E, c = e % E;
      T acc = 0;
      for (int b = 0; b < n; ++b) acc += kc[b * F + f] * vc[b * E + c];
      state[e] += acc;
    }
  }
}

}  // namespace

bool causal_linear_scan_supported(int64_t features, int64_t values, size_t element_size) {
  return features > 0 && values > 0 && scan_chunk(features, values, element_size) > 0;
}

template <typename T>
cudaError_t causal_linear_scan(int64_t batch_heads, int64_t length, int64_t features,
                               int64_t values, const T* q, const T* k, const T* v, T* out,
                               bool reverse, cudaStream_t stream) {
  const int chunk = scan_chunk(features, values, sizeof(T));
  if (chunk == 0 || batch_heads < 1 || batch_heads > 2147483647LL || length < 1) {
    return cudaErrorInvalidValue;
  }
  const size_t shared = scan_shared_bytes(features, values, chunk, sizeof(T));
  causal_linear_scan_kernel<T><<<static_cast<unsigned>(batch_heads), kThreads, shared, stream>>>(
      length, static_cast<int>(features), static_cast<int>(values), chunk, q, k, v, out, reverse);
  return cudaGetLastError();
}

template cudaError_t causal_linear_scan<float>(int64_t, int64_t, int64_t, int64_t, const float*,
                                               const float*, const float*, float*, bool,
                                               cudaStream_t);
template cudaError_t causal_linear_scan<double>(int64_t, int64_t, int64_t, int64_t, const double*,
                                                const double*, const double*, double*, bool,
                                                cudaStream_t);

}  // namespace flt::kernels::cuda
