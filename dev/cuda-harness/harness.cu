// Standalone check of the CUDA kernels against plain double-precision CPU loops (no LibTorch):
// Fourier attention forward and backward (scalar R expanded and per-dimension R, causal and not,
// more than 1024 keys, float and double, even and odd powers), every forward variant alone (every
// factor mode, ragged shapes) and the learned schedule's fused pass (against the rule on the host,
// and bitwise run to run). Then times the
// Fourier forward + backward at B=4, H=8, L=2048, D=64 in float, the schedule pass at 100M
// coordinates against a plain copy, and every forward variant at L = 1024, 2048, 4096 (the table
// scripts/gpu-check copies into its summary).
//
//   build: cmake --build build --target flt_cuda_check   (or flt_cuda_harness)
//   run:   ./build/flt_cuda_harness [--checks-only]   exit status 0 when every comparison passes
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "flt_cuda_kernels.h"
#include "fourier_reference.h"
#include "fourier_variants.h"

namespace fc = flt::kernels::cuda;
using fc::reference::Problem;
using fc::reference::scaled_error;

namespace {

#define CHECK_CUDA(expr)                                                                           \
  do {                                                                                             \
    const cudaError_t err_ = (expr);                                                               \
    if (err_ != cudaSuccess) {                                                                     \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(err_)); \
      std::exit(2);                                                                                \
    }                                                                                              \
  } while (0)

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

/// A problem's inputs drawn from `seed` (rounded through T, so the kernels and the reference see
/// the same numbers; a scalar R expanded to (H, D)), the double reference's outputs, gradients of
/// sum(out * w) and row totals, and the kernels' sizes.
struct ReferenceCase {
  std::vector<double> q, k, v, w, r, out, dq, dk, dv, dr;
  std::vector<fc::reference::RowTotal> row_totals;
  fc::FourierDims dims;
};

template <typename T>
ReferenceCase reference_case(const Problem& p, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> normal(0.0, 0.6);
  std::uniform_real_distribution<double> uniform(1.0, 2.5);
  auto fill = [&](size_t n, auto& dist) {
    std::vector<double> x(n);
    for (auto& e : x) e = T(dist(gen));
    return x;
  };
  const int64_t lk = fc::reference::keys_of(p);
  ReferenceCase c;
  c.q = fill(p.B * p.H * p.L * p.D, normal);
  c.k = fill(p.B * p.H * lk * p.D, normal);
  c.v = fill(p.B * p.H * lk * p.Dv, normal);
  c.w = fill(p.B * p.H * p.L * p.Dv, normal);
  c.r.resize(p.H * p.D);
  const double scalar_r = T(uniform(gen));
  for (auto& e : c.r) e = p.per_dim_r ? T(uniform(gen)) : scalar_r;
  fc::reference::fourier(p, c.q, c.k, c.v, c.r, c.w, c.out, c.dq, c.dk, c.dv, c.dr, nullptr,
                         &c.row_totals);
  c.dims.batch = p.B, c.dims.heads = p.H, c.dims.lq = p.L, c.dims.lk = lk;
  c.dims.dim = p.D, c.dims.dv = p.Dv, c.dims.power = p.power;
  c.dims.mode = fc::reference::mode_of(p);
  c.dims.causal = p.causal;
  return c;
}

/// A ReferenceCase's inputs on the device and room for every output (the backward's workspace,
/// which holds the forward's); freed with it.
template <typename T>
struct DeviceCase {
  T *q, *k, *v, *r, *w, *out, *row_max, *row_sum, *dq, *dk, *dv, *dr, *ws;
  explicit DeviceCase(const ReferenceCase& c)
      : q(upload<T>(c.q)),
        k(upload<T>(c.k)),
        v(upload<T>(c.v)),
        r(upload<T>(c.r)),
        w(upload<T>(c.w)) {
    const size_t rows = c.dims.batch * c.dims.heads * c.dims.lq;
    CHECK_CUDA(cudaMalloc(&out, c.out.size() * sizeof(T)));
    CHECK_CUDA(cudaMalloc(&row_max, rows * sizeof(T)));
    CHECK_CUDA(cudaMalloc(&row_sum, rows * sizeof(T)));
    CHECK_CUDA(cudaMalloc(&dq, c.q.size() * sizeof(T)));
    CHECK_CUDA(cudaMalloc(&dk, c.k.size() * sizeof(T)));
    CHECK_CUDA(cudaMalloc(&dv, c.v.size() * sizeof(T)));
    CHECK_CUDA(cudaMalloc(&dr, c.r.size() * sizeof(T)));
    CHECK_CUDA(cudaMalloc(&ws, fc::fourier_backward_workspace(c.dims) * sizeof(T)));
  }
  DeviceCase(const DeviceCase&) = delete;
  DeviceCase& operator=(const DeviceCase&) = delete;
  ~DeviceCase() {
    for (T* ptr : {q, k, v, r, w, out, row_max, row_sum, dq, dk, dv, dr, ws}) cudaFree(ptr);
  }
};

template <typename T>
bool check_fourier(const Problem& p, double tolerance) {
  const ReferenceCase c = reference_case<T>(p, 7);
  const DeviceCase<T> d(c);
  CHECK_CUDA(fc::fourier_forward<T>(c.dims, d.q, d.k, d.v, d.r, d.out, d.row_max, d.row_sum, d.ws,
                                    nullptr));
  CHECK_CUDA(fc::fourier_backward<T>(c.dims, d.q, d.k, d.v, d.r, d.out, d.row_max, d.row_sum, d.w,
                                     d.dq, d.dk, d.dv, d.dr, d.ws, nullptr));
  CHECK_CUDA(cudaDeviceSynchronize());
  const double errors[] = {scaled_error(download(d.out, c.out.size()), c.out),
                           scaled_error(download(d.dq, c.dq.size()), c.dq),
                           scaled_error(download(d.dk, c.dk.size()), c.dk),
                           scaled_error(download(d.dv, c.dv.size()), c.dv),
                           scaled_error(download(d.dr, c.dr.size()), c.dr)};
  bool ok = true;
  std::printf("fourier %-6s L=%-5ld D=%-3ld power=%d causal=%d R=%-6s errors (out dq dk dv dR):",
              sizeof(T) == 4 ? "float" : "double", static_cast<long>(p.L), static_cast<long>(p.D),
              p.power, p.causal, p.per_dim_r ? "vector" : "scalar");
  for (double e : errors) {
    std::printf(" %.2e", e);
    ok = ok && e <= tolerance;
  }
  std::printf("  %s\n", ok ? "ok" : "FAIL");
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

// ---- the forward variants: each against the double reference, then timed ----------------------

// Forward of every variant that supports the shape: out against the reference (scaled error) and
// the row statistics: the row's total weight row_sum 2^row_max against the reference's, as a
// fraction of the row's sum of absolute weights (an odd power's signed weights can cancel, and the
// float sum's error scales with sum |w|, not with the total it cancels to).
template <typename T>
bool check_forward_variants(const Problem& p, const ReferenceCase& c, const DeviceCase<T>& d,
                            double tolerance) {
  const size_t rows = p.B * p.H * p.L;
  bool ok = true;
  for (int variant = 0; variant < fc::fourier_forward_variants(); ++variant) {
    if (!fc::fourier_forward_variant_supported(variant, c.dims, sizeof(T))) continue;
    CHECK_CUDA(cudaMemset(d.out, 0xff, c.out.size() * sizeof(T)));  // NaN: every element written
    CHECK_CUDA(fc::fourier_forward_variant<T>(variant, c.dims, d.q, d.k, d.v, d.r, d.out, d.row_max,
                                              d.row_sum, d.ws, nullptr));
    CHECK_CUDA(cudaDeviceSynchronize());
    const double err = scaled_error(download(d.out, c.out.size()), c.out);
    const auto row_max = download(d.row_max, rows), row_sum = download(d.row_sum, rows);
    double stat_err = 0;
    for (size_t i = 0; i < rows; ++i) {
      const auto& total = c.row_totals[i];
      if (std::isinf(total.log2_abs)) {
        stat_err = std::max(stat_err, std::fabs(row_sum[i]));
        continue;
      }
      const double fraction = row_sum[i] * std::exp2(row_max[i] - total.log2_abs);
      stat_err = std::max(stat_err, std::fabs(fraction - total.fraction));
    }
    // 7e-4 and 7e-9: a log2 row total within 1e-3 and 1e-8 where no weight is negative.
    const bool pass = err <= tolerance && stat_err <= (sizeof(T) == 4 ? 7e-4 : 7e-9);
    ok = ok && pass;
    std::printf(
        "forward %-26s %-6s L=%-5ld Lk=%-5ld D=%-3ld Dv=%-3ld power=%d mode=%d causal=%d R=%-6s "
        "error out %.2e, row total %.2e  %s\n",
        fc::fourier_forward_variant_name(variant), sizeof(T) == 4 ? "float" : "double",
        static_cast<long>(p.L), static_cast<long>(c.dims.lk), static_cast<long>(p.D),
        static_cast<long>(p.Dv), p.power, c.dims.mode, p.causal, p.per_dim_r ? "vector" : "scalar",
        err, stat_err, pass ? "ok" : "FAIL");
  }
  return ok;
}

// Every backward variant against the reference's dq, dk, dv, dR (from the default forward's out
// and row statistics), as check_fourier does for the defaults.
template <typename T>
bool check_backward_variants(const Problem& p, const ReferenceCase& c, const DeviceCase<T>& d,
                             double tolerance) {
  CHECK_CUDA(fc::fourier_forward<T>(c.dims, d.q, d.k, d.v, d.r, d.out, d.row_max, d.row_sum, d.ws,
                                    nullptr));
  bool ok = true;
  for (int variant = 0; variant < fc::fourier_backward_variants(); ++variant) {
    if (!fc::fourier_backward_variant_supported(variant, c.dims, sizeof(T))) continue;
    // NaN everywhere first: every element must be written.
    CHECK_CUDA(cudaMemset(d.dq, 0xff, c.q.size() * sizeof(T)));
    CHECK_CUDA(cudaMemset(d.dk, 0xff, c.k.size() * sizeof(T)));
    CHECK_CUDA(cudaMemset(d.dv, 0xff, c.v.size() * sizeof(T)));
    CHECK_CUDA(fc::fourier_backward_variant<T>(variant, c.dims, d.q, d.k, d.v, d.r, d.out,
                                               d.row_max, d.row_sum, d.w, d.dq, d.dk, d.dv, d.dr,
                                               d.ws, nullptr));
    CHECK_CUDA(cudaDeviceSynchronize());
    const double errors[] = {scaled_error(download(d.dq, c.dq.size()), c.dq),
                             scaled_error(download(d.dk, c.dk.size()), c.dk),
                             scaled_error(download(d.dv, c.dv.size()), c.dv),
                             scaled_error(download(d.dr, c.dr.size()), c.dr)};
    bool pass = true;
    std::printf(
        "backward %-14s %-6s L=%-5ld Lk=%-5ld D=%-3ld Dv=%-3ld power=%d mode=%d causal=%d R=%-6s "
        "errors (dq dk dv dR):",
        fc::fourier_backward_variant_name(variant), sizeof(T) == 4 ? "float" : "double",
        static_cast<long>(p.L), static_cast<long>(c.dims.lk), static_cast<long>(p.D),
        static_cast<long>(p.Dv), p.power, c.dims.mode, p.causal, p.per_dim_r ? "vector" : "scalar");
    for (double e : errors) {
      std::printf(" %.2e", e);
      pass = pass && e <= tolerance;
    }
    std::printf("  %s\n", pass ? "ok" : "FAIL");
    ok = ok && pass;
  }
  return ok;
}

// Peak FP32 rate of device 0 in GFLOP/s: SMs x FP32 lanes x 2 (FMA) x clock; 0 if unknown.
double peak_gflops(std::string* how) {
  int sms = 0, clock_khz = 0, major = 0, minor = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0);
  int lanes = 0;  // FP32 lanes per SM (as bench/bench_gpu.cpp)
  if (major == 7) lanes = 64;
  if (major == 8) lanes = minor == 0 ? 64 : 128;
  if (major == 9 || major == 10) lanes = 128;
  *how = std::to_string(sms) + " SMs x " + std::to_string(lanes) + " lanes x 2 x " +
         std::to_string(clock_khz / 1000) + " MHz";
  return lanes == 0 ? 0.0 : 2.0 * sms * lanes * clock_khz * 1e-6;
}

// Median of `reps` timed calls of f (after one warm-up call), in ms.
template <class F>
double median_ms(F&& f, int reps) {
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  CHECK_CUDA(f());
  std::vector<float> ms(reps);
  for (auto& m : ms) {
    CHECK_CUDA(cudaEventRecord(start));
    CHECK_CUDA(f());
    CHECK_CUDA(cudaEventRecord(stop));
    CHECK_CUDA(cudaEventSynchronize(stop));
    CHECK_CUDA(cudaEventElapsedTime(&m, start, stop));
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(ms.begin(), ms.end());
  return ms[reps / 2];
}

// Every forward and backward variant at B=4, H=8, D=Dv=64, power 4, fp32, L in {1024, 2048,
// 4096}; q, k ~ 0.5 N(0, 1), v ~ N(0, 1), R = 2 (bench/bench_gpu.cpp's data). GFLOP/s counts 6
// FP32 operations per (query, key, dimension) of the forward (the targets' fixed count) for every
// row, backward and fwd+bwd rows included (their rate is that forward count over their time).
// "x naive" compares with the naive kernel of the same pass. Each variant's output (backward: dq)
// is also compared with the naive one's at that size (scaled error <= 1e-3).
bool time_variants() {
  std::string how;
  const double peak = peak_gflops(&how);
  std::printf(
      "\nFourier kernel variants (forward and backward), B=4 H=8 D=64 Dv=64 power 4 fp32 "
      "(peak %.0f GFLOP/s: %s)\n",
      peak, how.c_str());
  std::printf(
      "| harness: fourier kernel | ms | GFLOP/s (6 per q,k,d fwd) | %% FP32 peak | naive ms "
      "| x naive | max diff to naive |\n|---|---|---|---|---|---|---|\n");
  bool ok = true;
  for (const int64_t L : {1024, 2048, 4096}) {
    fc::FourierDims dims;
    dims.batch = 4, dims.heads = 8, dims.lq = L, dims.lk = L, dims.dim = 64, dims.dv = 64;
    dims.power = 4, dims.mode = 0, dims.causal = false;
    const size_t n = dims.batch * dims.heads * L * dims.dim;
    std::mt19937 gen(1);
    std::normal_distribution<double> normal(0.0, 1.0);
    std::vector<double> qh(n), kh(n), vh(n), rh(dims.heads * dims.dim, 2.0);
    for (auto& e : qh) e = 0.5 * normal(gen);
    for (auto& e : kh) e = 0.5 * normal(gen);
    for (auto& e : vh) e = normal(gen);
    float *q = upload<float>(qh), *k = upload<float>(kh), *v = upload<float>(vh),
          *g = upload<float>(vh), *r = upload<float>(rh);
    float *out, *mx, *sm, *dq, *dk, *dv, *dr, *ws;
    for (float** p : {&out, &dq, &dk, &dv}) CHECK_CUDA(cudaMalloc(p, n * sizeof(float)));
    for (float** p : {&mx, &sm}) CHECK_CUDA(cudaMalloc(p, n / dims.dim * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&dr, dims.heads * dims.dim * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&ws, fc::fourier_backward_workspace(dims) * sizeof(float)));
    const double gflop = 6.0 * dims.batch * dims.heads * double(L) * double(L) * dims.dim * 1e-9;
    const int reps = L >= 4096 ? 3 : 5;
    double naive_ms = 0, best_ms = 0;
    std::vector<double> naive_out;
    std::string best;
    // One table row; naive: the naive kernel's time for the same pass (the ratio's reference).
    auto row = [&](const std::string& name, double ms, double naive, const std::string& diff) {
      const double rate = gflop / (ms * 1e-3);
      std::printf("| %s B4 H8 L%ld D64 fp32 | %.3f | %.0f | %.1f%% | %.3f | %.2fx | %s |\n",
                  name.c_str(), static_cast<long>(L), ms, rate, peak > 0 ? 100 * rate / peak : 0.0,
                  naive, naive > 0 ? naive / ms : 0.0, diff.c_str());
    };
    // The naive variant (0) is the others' reference: it records its time and result; the others
    // are compared with them. Returns the table's last column.
    const auto against_naive = [&](int variant, double ms, std::vector<double> got,
                                   double& naive_time, std::vector<double>& naive_result,
                                   const char* what) {
      if (variant == 0) {
        naive_time = ms;
        naive_result = std::move(got);
        return std::string("(reference)");
      }
      const double err = scaled_error(got, naive_result);
      ok = ok && err <= 1e-3;
      char text[64];
      std::snprintf(text, sizeof text, "%s%.1e %s", what, err, err <= 1e-3 ? "ok" : "FAIL");
      return std::string(text);
    };
    for (int variant = 0; variant < fc::fourier_forward_variants(); ++variant) {
      if (!fc::fourier_forward_variant_supported(variant, dims, sizeof(float))) continue;
      const double ms = median_ms(
          [&] {
            return fc::fourier_forward_variant<float>(variant, dims, q, k, v, r, out, mx, sm, ws,
                                                      nullptr);
          },
          reps);
      const std::string diff =
          against_naive(variant, ms, download(out, n), naive_ms, naive_out, "");
      if (variant > 0 && (best.empty() || ms < best_ms))
        best_ms = ms, best = fc::fourier_forward_variant_name(variant);
      row(std::string("fourier fwd ") + fc::fourier_forward_variant_name(variant), ms, naive_ms,
          diff);
    }
    const double default_ms = median_ms(
        [&] { return fc::fourier_forward<float>(dims, q, k, v, r, out, mx, sm, ws, nullptr); },
        reps);
    row("fourier fwd default (fourier_forward)", default_ms, naive_ms, "");
    // Backward variants: the naive one is about 3x its forward, so fewer repetitions at 4096.
    std::vector<double> naive_dq;
    double naive_bwd_ms = 0;
    for (int variant = 0; variant < fc::fourier_backward_variants(); ++variant) {
      if (!fc::fourier_backward_variant_supported(variant, dims, sizeof(float))) continue;
      const double ms = median_ms(
          [&] {
            return fc::fourier_backward_variant<float>(variant, dims, q, k, v, r, out, mx, sm, g,
                                                       dq, dk, dv, dr, ws, nullptr);
          },
          variant == 0 ? (L >= 4096 ? 1 : 3) : reps);
      const std::string diff =
          against_naive(variant, ms, download(dq, n), naive_bwd_ms, naive_dq, "dq ");
      row(std::string("fourier bwd ") + fc::fourier_backward_variant_name(variant), ms,
          naive_bwd_ms, diff);
    }
    const double bwd_ms = median_ms(
        [&] {
          return fc::fourier_backward<float>(dims, q, k, v, r, out, mx, sm, g, dq, dk, dv, dr, ws,
                                             nullptr);
        },
        reps);
    row("fourier bwd default (fourier_backward)", bwd_ms, naive_bwd_ms, "");
    row("fourier fwd+bwd default", default_ms + bwd_ms, naive_ms + naive_bwd_ms, "");
    std::printf("| fastest forward at L%ld: %s | %.3f | | | | %.2fx | |\n", static_cast<long>(L),
                best.c_str(), best_ms, best_ms > 0 ? naive_ms / best_ms : 0.0);
    for (float* ptr : {q, k, v, g, r, out, mx, sm, dq, dk, dv, dr, ws}) cudaFree(ptr);
  }
  std::printf("\n");
  return ok;
}

}  // namespace

// Every forward and every backward variant on one problem's inputs (float within 1e-3 of the
// double reference, scaled; double within 1e-9).
template <typename T>
bool check_variants(const Problem& p) {
  const double tolerance = sizeof(T) == sizeof(float) ? 1e-3 : 1e-9;
  const ReferenceCase c = reference_case<T>(p, 11);
  const DeviceCase<T> d(c);
  const bool forward = check_forward_variants<T>(p, c, d, tolerance);
  return check_backward_variants<T>(p, c, d, tolerance) && forward;
}

// ---- the learned schedule's fused pass ----------------------------------------------------------

struct ScheduleCase {
  std::vector<int64_t> sizes;
  std::vector<std::vector<float>> param, grad, m, v;
};

ScheduleCase schedule_case(const std::vector<int64_t>& sizes, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  ScheduleCase c{sizes, {}, {}, {}, {}};
  for (const int64_t n : sizes) {
    std::vector<float> p(n), g(n), m(n), v(n);
    for (int64_t i = 0; i < n; ++i) {
      p[i] = normal(gen);
      g[i] = i % 1009 == 3 ? NAN : (i % 1013 == 7 ? INFINITY : normal(gen));
      m[i] = 0.1f * normal(gen);
      v[i] = 0.01f + 0.01f * std::fabs(normal(gen));
    }
    c.param.push_back(p), c.grad.push_back(g), c.m.push_back(m), c.v.push_back(v);
  }
  return c;
}

flt::kernels::schedule::RuleConstants schedule_constants() {
  flt::kernels::schedule::RuleConstants k{};
  for (int j = 0; j < flt::kernels::schedule::kCorrectorHidden; ++j)
    k.in_a[j] = 0.4f * (j + 1), k.in_b[j] = -0.3f * j, k.bias[j] = 0.1f * (j - 2),
    k.out[j] = 0.05f * (1 - j);
  k.out_bias = 0.02f, k.bc1 = 1.0f / (1.0f - 0.729f), k.bc2 = 1.0f / (1.0f - 0.997003f);
  return k;
}

/// The pass over a case's tensors on the device: the tensors after it (p, m, v concatenated) and
/// the sums.
std::pair<std::vector<double>, std::vector<double>> run_schedule(const ScheduleCase& c) {
  const auto k = schedule_constants();
  const int count = static_cast<int>(c.sizes.size());
  std::vector<fc::ScheduleTensor> tensors;
  std::vector<float*> buffers;
  for (int s = 0; s < count; ++s) {
    const int64_t n = c.sizes[s];
    float* d = nullptr;
    CHECK_CUDA(cudaMalloc(&d, std::max<int64_t>(1, 4 * n) * sizeof(float)));
    const std::vector<float>* parts[] = {&c.param[s], &c.grad[s], &c.m[s], &c.v[s]};
    for (int part = 0; part < 4 && n > 0; ++part)
      CHECK_CUDA(
          cudaMemcpy(d + part * n, parts[part]->data(), n * sizeof(float), cudaMemcpyHostToDevice));
    tensors.push_back({d, d + n, d + 2 * n, d + 3 * n, n, {1e-3f * (s + 1), 1.0f - 1e-4f, 0.7f}});
    buffers.push_back(d);
  }
  double *sums = nullptr, *ws = nullptr;
  CHECK_CUDA(
      cudaMalloc(&sums, std::max(1, count) * flt::kernels::schedule::kSums * sizeof(double)));
  CHECK_CUDA(cudaMalloc(
      &ws,
      std::max<size_t>(1, fc::schedule_step_workspace(tensors.data(), count)) * sizeof(double)));
  CHECK_CUDA(fc::schedule_step(k, tensors.data(), count, sums, ws, nullptr));
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<double> state;
  for (int s = 0; s < count; ++s) {
    const int64_t n = c.sizes[s];
    for (int part : {0, 2, 3}) {
      if (n == 0) break;  // no copy of zero bytes from an empty vector's null data()
      const auto x = download(buffers[s] + part * n, n);
      state.insert(state.end(), x.begin(), x.end());
    }
    cudaFree(buffers[s]);
  }
  auto out_sums = download(sums, count * flt::kernels::schedule::kSums);
  cudaFree(sums), cudaFree(ws);
  return {state, out_sums};
}

/// The pass against the rule applied on the host (the same function; the device contracts into
/// FMAs where the host may not, so floats agree to a few units in the last place), its sums against
/// the host's, and two runs bitwise alike.
bool check_schedule(const std::vector<int64_t>& sizes) {
  const auto c = schedule_case(sizes, 11);
  const auto k = schedule_constants();
  std::vector<double> state, sums;
  for (size_t s = 0; s < sizes.size(); ++s) {
    auto p = c.param[s], m = c.m[s], v = c.v[s];
    double row[flt::kernels::schedule::kSums] = {0, 0, 0, 0, 0};
    const flt::kernels::schedule::TensorDecision d{1e-3f * (s + 1), 1.0f - 1e-4f, 0.7f};
    for (int64_t i = 0; i < sizes[s]; ++i) {
      const auto y = flt::kernels::schedule::step_coordinate(k, d, c.grad[s][i], p[i], m[i], v[i]);
      p[i] = y.param, m[i] = y.m, v[i] = y.v;
      row[0] += double(y.grad) * y.d_prev, row[1] += double(y.grad) * y.grad;
      row[2] += double(y.d_prev) * y.d_prev, row[3] += double(y.param) * y.param;
      row[4] += y.ok ? 0 : 1;
    }
    for (const auto* x : {&p, &m, &v}) state.insert(state.end(), x->begin(), x->end());
    sums.insert(sums.end(), row, row + flt::kernels::schedule::kSums);
  }
  const auto [got_state, got_sums] = run_schedule(c);
  const auto [again_state, again_sums] = run_schedule(c);
  const double state_err = scaled_error(got_state, state), sums_err = scaled_error(got_sums, sums);
  bool skipped_equal = true;
  for (size_t s = 0; s < sizes.size(); ++s)
    skipped_equal &= got_sums[s * flt::kernels::schedule::kSums + 4] ==
                     sums[s * flt::kernels::schedule::kSums + 4];
  const bool repeatable = got_state == again_state && got_sums == again_sums;
  const bool ok = state_err <= 1e-6 && sums_err <= 1e-6 && skipped_equal && repeatable;
  std::printf(
      "schedule %zu tensors, %s coordinates: state error %.2e, sums error %.2e, skipped %s, "
      "bitwise repeatable %s  %s\n",
      sizes.size(), std::to_string(state.size() / 3).c_str(), state_err, sums_err,
      skipped_equal ? "equal" : "DIFFER", repeatable ? "yes" : "NO", ok ? "ok" : "FAIL");
  return ok;
}

/// The pass over 100M coordinates (10 tensors of 10M) against a plain device-to-device copy of the
/// same 100M floats: the pass moves 28 bytes a coordinate (reads g, p, m, v; writes p, m, v), the
/// copy 8; the target is >= 60% of the copy's bandwidth.
void time_schedule() {
  constexpr int kTensors = 10;
  constexpr int64_t kEach = 10000000;
  float* d = nullptr;
  CHECK_CUDA(cudaMalloc(&d, 4 * kTensors * kEach * sizeof(float)));
  CHECK_CUDA(cudaMemset(d, 0, 4 * kTensors * kEach * sizeof(float)));
  std::vector<fc::ScheduleTensor> tensors;
  for (int s = 0; s < kTensors; ++s) {
    float* base = d + 4 * s * kEach;
    tensors.push_back(
        {base, base + kEach, base + 2 * kEach, base + 3 * kEach, kEach, {1e-3f, 1.0f, 0.0f}});
  }
  double *sums = nullptr, *ws = nullptr;
  CHECK_CUDA(cudaMalloc(&sums, kTensors * flt::kernels::schedule::kSums * sizeof(double)));
  CHECK_CUDA(
      cudaMalloc(&ws, fc::schedule_step_workspace(tensors.data(), kTensors) * sizeof(double)));
  const auto k = schedule_constants();
  const double pass_ms = median_ms(
      [&] { return fc::schedule_step(k, tensors.data(), kTensors, sums, ws, nullptr); }, 20);
  float *src = d, *dst = d + kTensors * kEach;
  const double copy_ms = median_ms(
      [&] {
        return cudaMemcpyAsync(dst, src, kTensors * kEach * sizeof(float),
                               cudaMemcpyDeviceToDevice);
      },
      20);
  const double n = double(kTensors) * kEach;
  const double pass_gbs = 28 * n / (pass_ms * 1e-3) / 1e9,
               copy_gbs = 8 * n / (copy_ms * 1e-3) / 1e9;
  std::printf(
      "| harness: schedule pass 100M coordinates (10 x 10M) | %.3f ms | %.0f GB/s | plain "
      "copy %.3f ms, %.0f GB/s | %.0f%% of the copy's bandwidth (target >= 60%%) |\n",
      pass_ms, pass_gbs, copy_ms, copy_gbs, 100 * pass_gbs / copy_gbs);
  cudaFree(d), cudaFree(sums), cudaFree(ws);
}

int main(int argc, char** argv) {
  // --checks-only: the comparisons without the timings (a short device session's verification).
  const bool timings = !(argc > 1 && std::string(argv[1]) == "--checks-only");
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
  // Every forward and backward variant against the reference (output, row statistics, gradients
  // of every input): ragged L, odd D, causal, every factor mode, two value chunks (Dv > 64),
  // D = 128, more or fewer keys than queries (variants whose shared memory cannot hold a shape
  // skip it).
  for (bool causal : {false, true}) {
    ok &= check_variants<float>({1, 2, 1100, 16, 8, 4, causal, true});
    ok &= check_variants<double>({1, 2, 500, 16, 8, 4, causal, false});
  }
  const Problem float_cases[] = {
      {2, 3, 333, 13, 7, 3, true, true},
      {1, 2, 400, 64, 64, 4, false, true},
      {1, 1, 300, 33, 100, 2, true, true},
      {1, 1, 200, 128, 128, 6, false, true},
      {1, 1, 200, 100, 128, 6, true, true},
      {1, 2, 400, 16, 12, 4, false, true, /*mode=*/3},
      {1, 2, 400, 16, 12, 3, true, true, /*mode=*/2},
      {1, 2, 300, 16, 8, 4, true, true, -1, /*Lk=*/777},
      {2, 2, 700, 16, 8, 3, false, true, -1, /*Lk=*/99},
  };
  for (const Problem& p : float_cases) ok &= check_variants<float>(p);
  const Problem double_cases[] = {
      {1, 1, 37, 128, 128, 6, false, true},
      {1, 1, 60, 128, 100, 2, false, true},
      {1, 2, 150, 16, 12, 3, true, true, /*mode=*/3},
      {1, 2, 150, 16, 12, 3, false, true, /*mode=*/2},
  };
  for (const Problem& p : double_cases) ok &= check_variants<double>(p);
  // The learned schedule's pass: empty and ragged tensors, more tensors than one launch takes.
  ok &= check_schedule({0, 1, 4095, 4096, 4097, 70001, 0, 3});
  std::vector<int64_t> many;
  for (int s = 0; s < 101; ++s) many.push_back((s * 7919) % 20000);
  ok &= check_schedule(many);
  if (timings) {
    time_fourier();
    time_schedule();
    ok &= time_variants();
  }
  std::printf("%s\n", ok ? "ALL CHECKS PASSED" : "SOME CHECKS FAILED");
  return ok ? 0 : 1;
}
