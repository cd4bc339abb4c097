// Standalone check of the CUDA kernels against plain double-precision CPU loops (no LibTorch):
// Fourier attention forward and backward (scalar R expanded and per-dimension R, causal and not,
// more than 1024 keys, float and double, even and odd powers) and the causal linear scan (forward
// and reverse). Then times the Fourier forward + backward at B=4, H=8, L=2048, D=64 in float.
//
//   build: cmake --build build --target flt_cuda_check   (or flt_cuda_harness)
//   run:   ./build/flt_cuda_harness        exit status 0 when every comparison passes
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "flt_cuda_kernels.h"

namespace fc = flt::kernels::cuda;

namespace {

#define CHECK_CUDA(expr)                                                                           \
  do {                                                                                             \
    const cudaError_t err_ = (expr);                                                               \
    if (err_ != cudaSuccess) {                                                                     \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(err_)); \
      std::exit(2);                                                                                \
    }                                                                                              \
  } while (0)

double sinc(double x) {
  return std::fabs(x) < 1e-4 ? 1 - x * x / 6 + x * x * x * x / 120 : std::sin(x) / x;
}
double cot_minus_inv(double x) {
  if (std::fabs(x) < 1e-2) return -x / 3 - x * x * x / 45 - 2 * std::pow(x, 5) / 945;
  const double s = std::sin(x);
  return s == 0 ? 0 : std::cos(x) / s - 1 / x;
}

struct Problem {
  int64_t B, H, L, D, Dv;
  int power;
  bool causal, per_dim_r;
};

// Plain double loops: out, dq, dk, dv, dr for sum(out * w).
void reference(const Problem& p, const std::vector<double>& q, const std::vector<double>& k,
               const std::vector<double>& v, const std::vector<double>& r,
               const std::vector<double>& w, std::vector<double>& out, std::vector<double>& dq,
               std::vector<double>& dk, std::vector<double>& dv, std::vector<double>& dr) {
  const int64_t L = p.L, D = p.D, Dv = p.Dv;
  out.assign(p.B * p.H * L * Dv, 0);
  dq.assign(q.size(), 0);
  dk.assign(k.size(), 0);
  dv.assign(v.size(), 0);
  dr.assign(r.size(), 0);
  std::vector<double> logw(L), a(L);
  for (int64_t bh = 0; bh < p.B * p.H; ++bh) {
    const double* rh = &r[(bh % p.H) * D];
    for (int64_t i = 0; i < L; ++i) {
      const int64_t n = p.causal ? i + 1 : L;
      double top = -INFINITY;
      std::vector<int> sign(n, 1);
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t d = 0; d < D; ++d) {
          const double s = sinc(rh[d] * (q[(bh * L + i) * D + d] - k[(bh * L + j) * D + d]));
          acc += p.power * std::log(std::fabs(s));
          if (s < 0 && p.power % 2 == 1) sign[j] = -sign[j];
        }
        logw[j] = acc;
        top = std::max(top, acc);
      }
      double total = 0;
      for (int64_t j = 0; j < n; ++j) total += a[j] = sign[j] * std::exp(logw[j] - top);
      double delta = 0;
      for (int64_t c = 0; c < Dv; ++c) {
        double o = 0;
        for (int64_t j = 0; j < n; ++j) o += a[j] * v[(bh * L + j) * Dv + c];
        out[(bh * L + i) * Dv + c] = o / total;
        delta += w[(bh * L + i) * Dv + c] * o / total;
      }
      for (int64_t j = 0; j < n; ++j) {
        const double aj = a[j] / total;
        double gv = 0;
        for (int64_t c = 0; c < Dv; ++c) {
          gv += w[(bh * L + i) * Dv + c] * v[(bh * L + j) * Dv + c];
          dv[(bh * L + j) * Dv + c] += aj * w[(bh * L + i) * Dv + c];
        }
        const double coupling = aj * (gv - delta);
        for (int64_t d = 0; d < D; ++d) {
          const double diff = q[(bh * L + i) * D + d] - k[(bh * L + j) * D + d];
          const double t = coupling * p.power * cot_minus_inv(rh[d] * diff);
          dq[(bh * L + i) * D + d] += t * rh[d];
          dk[(bh * L + j) * D + d] -= t * rh[d];
          dr[(bh % p.H) * D + d] += t * diff;
        }
      }
    }
  }
}

template <typename T>
T* upload(const std::vector<double>& host) {
  std::vector<T> converted(host.begin(), host.end());
  T* device = nullptr;
  CHECK_CUDA(cudaMalloc(&device, std::max<size_t>(1, converted.size()) * sizeof(T)));
  CHECK_CUDA(
      cudaMemcpy(device, converted.data(), converted.size() * sizeof(T), cudaMemcpyHostToDevice));
  return device;
}

template <typename T>
std::vector<double> download(const T* device, size_t n) {
  std::vector<T> host(n);
  CHECK_CUDA(cudaMemcpy(host.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost));
  return {host.begin(), host.end()};
}

// max |a - b| / (max |b|): error relative to the tensor's scale.
double scaled_error(const std::vector<double>& a, const std::vector<double>& b) {
  double err = 0, scale = 1e-300;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    err = std::max(err, std::fabs(a[i] - b[i]));
    scale = std::max(scale, std::fabs(b[i]));
  }
  return err / scale;
}

template <typename T>
bool check_fourier(const Problem& p, double tolerance) {
  std::mt19937 gen(7);
  std::normal_distribution<double> normal(0.0, 0.6);
  std::uniform_real_distribution<double> uniform(1.0, 2.5);
  auto fill = [&](size_t n, auto& dist) {
    std::vector<double> x(n);
    for (auto& e : x) e = T(dist(gen));  // round through T so both sides see the same inputs
    return x;
  };
  const auto q = fill(p.B * p.H * p.L * p.D, normal), k = fill(p.B * p.H * p.L * p.D, normal);
  const auto v = fill(p.B * p.H * p.L * p.Dv, normal), w = fill(p.B * p.H * p.L * p.Dv, normal);
  std::vector<double> r(p.H * p.D);
  const double scalar_r = T(uniform(gen));
  for (auto& e : r) e = p.per_dim_r ? T(uniform(gen)) : scalar_r;  // scalar R: expanded to (H, D)
  std::vector<double> out, dq, dk, dv, dr;
  reference(p, q, k, v, r, w, out, dq, dk, dv, dr);

  fc::FourierDims dims;
  dims.batch = p.B, dims.heads = p.H, dims.lq = p.L, dims.lk = p.L, dims.dim = p.D, dims.dv = p.Dv;
  dims.power = p.power;
  dims.mode = p.power % 2 == 0 ? 0 : 1;
  dims.causal = p.causal;
  T *dq_d, *dk_d, *dv_d, *dr_d, *out_d, *max_d, *sum_d, *ws;
  T *q_d = upload<T>(q), *k_d = upload<T>(k), *v_d = upload<T>(v), *r_d = upload<T>(r),
    *w_d = upload<T>(w);
  CHECK_CUDA(cudaMalloc(&out_d, out.size() * sizeof(T)));
  CHECK_CUDA(cudaMalloc(&max_d, p.B * p.H * p.L * sizeof(T)));
  CHECK_CUDA(cudaMalloc(&sum_d, p.B * p.H * p.L * sizeof(T)));
  CHECK_CUDA(cudaMalloc(&dq_d, q.size() * sizeof(T)));
  CHECK_CUDA(cudaMalloc(&dk_d, k.size() * sizeof(T)));
  CHECK_CUDA(cudaMalloc(&dv_d, v.size() * sizeof(T)));
  CHECK_CUDA(cudaMalloc(&dr_d, r.size() * sizeof(T)));
  CHECK_CUDA(cudaMalloc(&ws, fc::fourier_backward_workspace(dims) * sizeof(T)));
  CHECK_CUDA(fc::fourier_forward<T>(dims, q_d, k_d, v_d, r_d, out_d, max_d, sum_d, ws, nullptr));
  CHECK_CUDA(fc::fourier_backward<T>(dims, q_d, k_d, v_d, r_d, out_d, max_d, sum_d, w_d, dq_d, dk_d,
                                     dv_d, dr_d, ws, nullptr));
  CHECK_CUDA(cudaDeviceSynchronize());
  const double errors[] = {
      scaled_error(download(out_d, out.size()), out), scaled_error(download(dq_d, dq.size()), dq),
      scaled_error(download(dk_d, dk.size()), dk), scaled_error(download(dv_d, dv.size()), dv),
      scaled_error(download(dr_d, dr.size()), dr)};
  bool ok = true;
  std::printf("fourier %-6s L=%-5ld D=%-3ld power=%d causal=%d R=%-6s errors (out dq dk dv dR):",
              sizeof(T) == 4 ? "float" : "double", static_cast<long>(p.L), static_cast<long>(p.D),
              p.power, p.causal, p.per_dim_r ? "vector" : "scalar");
  for (double e : errors) {
    std::printf(" %.2e", e);
    ok = ok && e <= tolerance;
  }
  std::printf("  %s\n", ok ? "ok" : "FAIL");
  for (T* ptr : {q_d, k_d, v_d, r_d, w_d, out_d, max_d, sum_d, dq_d, dk_d, dv_d, dr_d, ws})
    cudaFree(ptr);
  return ok;
}

template <typename T>
bool check_scan(int64_t bh, int64_t L, int64_t M, int64_t E, bool reverse, double tolerance) {
  std::mt19937 gen(3);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  std::vector<double> q(bh * L * M), k(bh * L * M), v(bh * L * E), ref(bh * L * E, 0);
  for (auto* x : {&q, &k, &v})
    for (auto& e : *x) e = T(uniform(gen));
  for (int64_t b = 0; b < bh; ++b)
    for (int64_t i = 0; i < L; ++i)
      for (int64_t j = 0; j < L; ++j) {
        if (reverse ? j < i : j > i) continue;
        double s = 0;
        for (int64_t m = 0; m < M; ++m) s += q[(b * L + i) * M + m] * k[(b * L + j) * M + m];
        for (int64_t c = 0; c < E; ++c) ref[(b * L + i) * E + c] += s * v[(b * L + j) * E + c];
      }
  T *q_d = upload<T>(q), *k_d = upload<T>(k), *v_d = upload<T>(v), *o_d;
  CHECK_CUDA(cudaMalloc(&o_d, ref.size() * sizeof(T)));
  CHECK_CUDA(fc::causal_linear_scan<T>(bh, L, M, E, q_d, k_d, v_d, o_d, reverse, nullptr));
  CHECK_CUDA(cudaDeviceSynchronize());
  const double err = scaled_error(download(o_d, ref.size()), ref);
  const bool ok = err <= tolerance;
  std::printf("scan    %-6s L=%-5ld M=%-3ld E=%-3ld reverse=%d error %.2e  %s\n",
              sizeof(T) == 4 ? "float" : "double", static_cast<long>(L), static_cast<long>(M),
              static_cast<long>(E), reverse, err, ok ? "ok" : "FAIL");
  for (T* ptr : {q_d, k_d, v_d, o_d}) cudaFree(ptr);
  return ok;
}

void time_fourier() {
  fc::FourierDims dims;
  dims.batch = 4, dims.heads = 8, dims.lq = 2048, dims.lk = 2048, dims.dim = 64, dims.dv = 64;
  const size_t n = dims.batch * dims.heads * dims.lq * dims.dim;
  std::vector<double> host(n);
  std::mt19937 gen(1);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (auto& e : host) e = normal(gen);
  float *q = upload<float>(host), *k = upload<float>(host), *v = upload<float>(host);
  float *g = upload<float>(host), *r, *out, *mx, *sm, *dq, *dk, *dv, *dr, *ws;
  CHECK_CUDA(cudaMalloc(&r, dims.heads * dims.dim * sizeof(float)));
  CHECK_CUDA(cudaMemset(r, 0, dims.heads * dims.dim * sizeof(float)));
  for (float** p : {&out, &dq, &dk, &dv}) CHECK_CUDA(cudaMalloc(p, n * sizeof(float)));
  for (float** p : {&mx, &sm}) CHECK_CUDA(cudaMalloc(p, n / dims.dim * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&dr, dims.heads * dims.dim * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&ws, fc::fourier_backward_workspace(dims) * sizeof(float)));
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  float ms[2] = {0, 0};
  for (int rep = 0; rep < 3; ++rep) {
    CHECK_CUDA(cudaEventRecord(start));
    CHECK_CUDA(fc::fourier_forward<float>(dims, q, k, v, r, out, mx, sm, ws, nullptr));
    CHECK_CUDA(cudaEventRecord(stop));
    CHECK_CUDA(cudaEventSynchronize(stop));
    CHECK_CUDA(cudaEventElapsedTime(&ms[0], start, stop));
    CHECK_CUDA(cudaEventRecord(start));
    CHECK_CUDA(
        fc::fourier_backward<float>(dims, q, k, v, r, out, mx, sm, g, dq, dk, dv, dr, ws, nullptr));
    CHECK_CUDA(cudaEventRecord(stop));
    CHECK_CUDA(cudaEventSynchronize(stop));
    CHECK_CUDA(cudaEventElapsedTime(&ms[1], start, stop));
  }
  std::printf(
      "timing float B=4 H=8 L=2048 D=64: forward %.2f ms, backward %.2f ms, "
      "forward+backward %.2f ms (R = 0 here: only the timing is meaningful)\n",
      ms[0], ms[1], ms[0] + ms[1]);
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device: nothing to check\n");
    return 77;
  }
  bool ok = true;
  for (bool causal : {false, true}) {
    for (bool per_dim : {false, true}) {
      // Float: 1e-3 of each tensor's scale (log-weights sum 16 * 4 float terms); double: 1e-9.
      ok &= check_fourier<float>({1, 2, 1500, 16, 8, 4, causal, per_dim}, 1e-3);
      ok &= check_fourier<double>({1, 2, 1500, 16, 8, 4, causal, per_dim}, 1e-9);
    }
  }
  ok &= check_fourier<double>({2, 3, 100, 8, 5, 3, true, true}, 1e-9);
  ok &= check_fourier<double>({1, 1, 37, 128, 128, 6, false, true}, 1e-9);
  for (bool reverse : {false, true}) {
    ok &= check_scan<float>(3, 1000, 64, 64, reverse, 1e-4);
    ok &= check_scan<double>(3, 777, 32, 70, reverse, 1e-11);
  }
  time_fourier();
  std::printf("%s\n", ok ? "ALL CHECKS PASSED" : "SOME CHECKS FAILED");
  return ok ? 0 : 1;
}
