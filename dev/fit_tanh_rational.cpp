// Fits the rational tanh of kernels/src/coordinate_step.cpp: tanh(x)/x ~ P(t)/Q(t), t =
// x^2/81, x in [0, 9], by Sanathanan-Koerner iterations of weighted linear least squares in double
// precision; prints the coefficients (in t and, as used in float, in y = x^2) and the float
// evaluation's max error over 2e6 points of [0, 10].
//   g++ -O2 -std=c++17 dev/fit_tanh_rational.cpp -o /tmp/fit_tanh \
//       -I/usr/include/torch/csrc/api/include -ltorch -ltorch_cpu -lc10 && /tmp/fit_tanh 5 4
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
int main(int argc, char** argv) {
  const int np = argc > 1 ? atoi(argv[1]) : 6, nq = argc > 2 ? atoi(argv[2]) : 6;
  const int n = 4000;
  auto opts = torch::kDouble;
  // Chebyshev-like clustering toward both ends
  auto u = torch::linspace(0, M_PI, n, opts);
  auto x = 4.5 * (1 - torch::cos(u));
  auto t = x * x / 81.0;
  auto r = torch::where(x > 1e-8, torch::tanh(x) / x, torch::ones_like(x));
  auto w = torch::ones_like(x);
  torch::Tensor p, q;
  for (int it = 0; it < 30; ++it) {
    // unknowns: p0..p_np, q1..q_nq ; residual: (P(t) - r Q(t)) * w, weight to get abs error of
    // x*P/Q: * x
    std::vector<torch::Tensor> cols;
    for (int k = 0; k <= np; ++k) cols.push_back(t.pow(k));
    for (int k = 1; k <= nq; ++k) cols.push_back(-r * t.pow(k));
    auto A = torch::stack(cols, 1) * (w * x.clamp_min(0.05)).unsqueeze(1);
    auto b = r * w * x.clamp_min(0.05);
    auto sol =
        std::get<0>(torch::linalg::lstsq(A, b.unsqueeze(1), c10::nullopt, c10::nullopt)).squeeze(1);
    p = sol.slice(0, 0, np + 1);
    q = torch::cat({torch::ones({1}, opts), sol.slice(0, np + 1)});
    torch::Tensor Q = torch::zeros_like(t);
    for (int k = nq; k >= 0; --k) Q = Q * t + q[k];
    w = 1.0 / Q.abs();
  }
  std::printf("P:");
  for (int k = 0; k <= np; ++k) std::printf(" %.17g", p[k].item<double>());
  std::printf("\n");
  std::printf("Q:");
  for (int k = 0; k <= nq; ++k) std::printf(" %.17g", q[k].item<double>());
  std::printf("\n");
  // float evaluation over a dense grid
  double worst = 0, worst_rel = 0, at = 0;
  std::vector<float> pf(np + 1), qf(nq + 1);
  for (int k = 0; k <= np; ++k) pf[k] = static_cast<float>(p[k].item<double>() / std::pow(81.0, k));
  for (int k = 0; k <= nq; ++k) qf[k] = static_cast<float>(q[k].item<double>() / std::pow(81.0, k));
  for (int i = 0; i <= 2000000; ++i) {
    const float xf = 10.0f * i / 2000000.0f;
    const float xc = std::min(xf, 9.0f);
    const float y = xc * xc;
    float P = pf[np];
    for (int k = np - 1; k >= 0; --k) P = P * y + pf[k];
    float Q = qf[nq];
    for (int k = nq - 1; k >= 0; --k) Q = Q * y + qf[k];
    const float v = std::min(xc * P / Q, 1.0f);
    const double e = std::abs(v - std::tanh(static_cast<double>(xf)));
    if (e > worst) {
      worst = e;
      at = xf;
    }
    if (xf > 1e-3) worst_rel = std::max(worst_rel, e / std::tanh(static_cast<double>(xf)));
  }
  std::printf("float max abs error %.3g at x=%.4f, max rel error %.3g\n", worst, at, worst_rel);
  std::printf("Pf:");
  for (auto c : pf) std::printf(" %.9g", c);
  std::printf("\nQf:");
  for (auto c : qf) std::printf(" %.9g", c);
  std::printf("\n");
}
