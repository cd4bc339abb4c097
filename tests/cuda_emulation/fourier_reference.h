#pragma once
// The double-precision reference of Fourier attention for the CUDA checks: plain loops over
// (query, key, dimension) in the log domain, no LibTorch. Used by the nvcc harness (GPU against
// it) and by the host emulation of the tiled kernel (tests/cuda_emulation, built by g++).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace flt::kernels::cuda::reference {

inline double sinc(double x) {
  return std::fabs(x) < 1e-4 ? 1 - x * x / 6 + x * x * x * x / 120 : std::sin(x) / x;
}
inline double cot_minus_inv(double x) {
  if (std::fabs(x) < 1e-2) return -x / 3 - x * x * x / 45 - 2 * std::pow(x, 5) / 945;
  const double s = std::sin(x);
  return s == 0 ? 0 : std::cos(x) / s - 1 / x;
}

/// One checked shape: q (B, H, L, D), k (B, H, Lk, D), v (B, H, Lk, Dv), r (H, D).
struct Problem {
  int64_t B, H, L, D, Dv;
  int power;
  bool causal, per_dim_r;
  int mode = -1;   ///< fourier::FactorMode; -1: kPowerEven or kPowerOdd by the parity of power
  int64_t Lk = 0;  ///< keys; 0: as many as queries (L)
};

inline int mode_of(const Problem& p) {
  return p.mode >= 0 ? p.mode : (p.power % 2 == 0 ? 0 : 1);
}
inline int64_t keys_of(const Problem& p) {
  return p.Lk > 0 ? p.Lk : p.L;
}

/// A row's sum of weights as a fraction of its sum of absolute weights: sum |w| = 2^log2_abs, sum w
/// = fraction 2^log2_abs (fraction 1 where no weight is negative; small where signed weights
/// cancel).
struct RowTotal {
  double log2_abs = -INFINITY;
  double fraction = 0;
};

/// Plain double loops: out, dq, dk, dv, dr for sum(out * w); log2_total (B, H, L), if given, gets
/// log2 of each row's sum of weights (-inf when every weight vanished; such rows output 0), and
/// row_totals, if given, the same sums against the sums of absolute weights.
/// Modes: 0 |s|^p (p even), 1 s^p (p odd, signed), 2 |s|^p, 3 max(s, 0)^p.
inline void fourier(const Problem& p, const std::vector<double>& q, const std::vector<double>& k,
                    const std::vector<double>& v, const std::vector<double>& r,
                    const std::vector<double>& w, std::vector<double>& out, std::vector<double>& dq,
                    std::vector<double>& dk, std::vector<double>& dv, std::vector<double>& dr,
                    std::vector<double>* log2_total = nullptr,
                    std::vector<RowTotal>* row_totals = nullptr) {
  const int64_t L = p.L, Lk = keys_of(p), D = p.D, Dv = p.Dv;
  const int mode = mode_of(p);
  out.assign(p.B * p.H * L * Dv, 0);
  dq.assign(q.size(), 0);
  dk.assign(k.size(), 0);
  dv.assign(v.size(), 0);
  dr.assign(r.size(), 0);
  if (log2_total) log2_total->assign(p.B * p.H * L, -INFINITY);
  if (row_totals) row_totals->assign(p.B * p.H * L, RowTotal{});
  std::vector<double> logw(Lk), a(Lk);
  for (int64_t bh = 0; bh < p.B * p.H; ++bh) {
    const double* rh = &r[(bh % p.H) * D];
    for (int64_t i = 0; i < L; ++i) {
      const int64_t n = p.causal ? std::min(i + 1, Lk) : Lk;
      double top = -INFINITY;
      std::vector<int> sign(n, 1);
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t d = 0; d < D; ++d) {
          const double s = sinc(rh[d] * (q[(bh * L + i) * D + d] - k[(bh * Lk + j) * D + d]));
          acc += p.power * std::log(std::fabs(s));
          if (s < 0 && mode == 1) sign[j] = -sign[j];
          if (s < 0 && mode == 3) sign[j] = 0;
        }
        logw[j] = sign[j] == 0 ? -INFINITY : acc;
        top = std::max(top, logw[j]);
      }
      if (top == -INFINITY) continue;  // every weight vanished: output 0, no gradient
      double total = 0, abs_total = 0;
      for (int64_t j = 0; j < n; ++j) {
        total += a[j] = sign[j] * std::exp(logw[j] - top);
        abs_total += std::fabs(a[j]);
      }
      if (log2_total)
        (*log2_total)[bh * L + i] = (top + std::log(std::fabs(total))) / std::log(2.0);
      if (row_totals) {
        (*row_totals)[bh * L + i] = {(top + std::log(abs_total)) / std::log(2.0),
                                     total / abs_total};
      }
      double delta = 0;
      for (int64_t c = 0; c < Dv; ++c) {
        double o = 0;
        for (int64_t j = 0; j < n; ++j) o += a[j] * v[(bh * Lk + j) * Dv + c];
        out[(bh * L + i) * Dv + c] = o / total;
        delta += w[(bh * L + i) * Dv + c] * o / total;
      }
      for (int64_t j = 0; j < n; ++j) {
        const double aj = a[j] / total;
        double gv = 0;
        for (int64_t c = 0; c < Dv; ++c) {
          gv += w[(bh * L + i) * Dv + c] * v[(bh * Lk + j) * Dv + c];
          dv[(bh * Lk + j) * Dv + c] += aj * w[(bh * L + i) * Dv + c];
        }
        const double coupling = aj * (gv - delta);
        for (int64_t d = 0; d < D; ++d) {
          const double diff = q[(bh * L + i) * D + d] - k[(bh * Lk + j) * D + d];
          const double t = coupling * p.power * cot_minus_inv(rh[d] * diff);
          dq[(bh * L + i) * D + d] += t * rh[d];
          dk[(bh * Lk + j) * D + d] -= t * rh[d];
          dr[(bh % p.H) * D + d] += t * diff;
        }
      }
    }
  }
}

/// max |a - b| / (max |b|): error relative to the tensor's scale (inf when a is not finite).
inline double scaled_error(const std::vector<double>& a, const std::vector<double>& b) {
  double err = 0, scale = 1e-300;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    err = std::max(err, std::fabs(a[i] - b[i]));
    scale = std::max(scale, std::fabs(b[i]));
  }
  return err / scale;
}

}  // namespace flt::kernels::cuda::reference
