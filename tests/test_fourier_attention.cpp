// Fourier attention: fused CPU kernel vs the composite reference and a long-double loop, gradients,
// numerics near the singular points, the module, and input validation.
#include <torch/nn/functional/loss.h>
#include <torch/optim/adam.h>
#include <torch/serialize.h>

#include <cmath>
#include <limits>

#include "flt/attention/fourier.h"
#include "flt/attention/multihead.h"
#include "flt/attention/softmax.h"
#include "flt/attention/transformer.h"
#include "flt/kernels/fourier_attention.h"
#include "test_util.h"

namespace fa = flt::attention;
namespace fk = flt::kernels;
using namespace flt::testing;

namespace {

class FourierAttention : public flt::testing::SeededTest {};

using Op = torch::Tensor (*)(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&,
                             const torch::Tensor&, int64_t, fk::FourierPhi, bool);

struct Case {
  int64_t power;
  fk::FourierPhi phi;
  bool causal;
  bool per_dim_r;
};

// Output and the gradients of sum(out * w) for q, k, v and the raw R (through |R| and expand).
std::vector<torch::Tensor> run_with_grads(Op op, const torch::Tensor& q0, const torch::Tensor& k0,
                                          const torch::Tensor& v0, const torch::Tensor& r0,
                                          const torch::Tensor& w, const Case& c) {
  auto q = q0.clone().requires_grad_(true), k = k0.clone().requires_grad_(true);
  auto v = v0.clone().requires_grad_(true), r = r0.clone().requires_grad_(true);
  const auto r_hd = fa::fourier_r_per_head_dim("test", r, q.size(1), q.size(3));
  const auto out = op(q, k, v, r_hd, c.power, c.phi, c.causal);
  (out * w).sum().backward();
  return {out.detach(), q.grad(), k.grad(), v.grad(), r.grad()};
}

// ---- long-double reference (non-causal, phi = s^p): its own s and c, series to 40 terms near 0.
using LD = long double;

LD sinc_ld(LD x) {
  if (std::fabs(x) < 0.5L) {
    LD term = 1, sum = 1;
    for (int n = 1; n < 40; ++n) {
      term *= -x * x / ((2 * n) * (2 * n + 1));
      sum += term;
    }
    return sum;
  }
  return std::sin(x) / x;
}

// cot x - 1/x = s'(x) / s(x), with s' from its own series near 0.
LD cot_minus_inv_ld(LD x) {
  if (std::fabs(x) < 0.5L) {
    // s'(x) = x sum_{n>=1} 2n t_n, t_n = (-1)^n x^(2n-2) / (2n+1)!  (no division by x: x may be 0)
    LD t = -1.0L / 6, sum = 0;
    for (int n = 1; n < 40; ++n) {
      sum += 2 * n * t;
      t *= -x * x / ((2 * n + 2) * (2 * n + 3));
    }
    return x * sum / sinc_ld(x);
  }
  return std::cos(x) / std::sin(x) - 1 / x;
}

// out and the gradients of sum(out * w) for q, k, v, r (r: (H, D) = |R|), all in long double.
std::vector<torch::Tensor> reference_ld(const torch::Tensor& q, const torch::Tensor& k,
                                        const torch::Tensor& v, const torch::Tensor& r,
                                        const torch::Tensor& w, int power) {
  const auto qd = q.to(torch::kDouble).contiguous(), kd = k.to(torch::kDouble).contiguous();
  const auto vd = v.to(torch::kDouble).contiguous(), rd = r.to(torch::kDouble).contiguous();
  const auto wd = w.to(torch::kDouble).contiguous();
  const int64_t B = q.size(0), H = q.size(1), Lq = q.size(2), Lk = k.size(2), D = q.size(3),
                Dv = v.size(3);
  auto out = torch::zeros({B, H, Lq, Dv}, torch::kDouble);
  auto dq = torch::zeros_like(qd), dk = torch::zeros_like(kd), dv = torch::zeros_like(vd);
  auto dr = torch::zeros_like(rd);
  auto Q = qd.accessor<double, 4>(), K = kd.accessor<double, 4>(), V = vd.accessor<double, 4>();
  auto R = rd.accessor<double, 2>();
  auto W = wd.accessor<double, 4>();
  auto O = out.accessor<double, 4>(), dQ = dq.accessor<double, 4>(), dK = dk.accessor<double, 4>();
  auto dV = dv.accessor<double, 4>();
  auto dR = dr.accessor<double, 2>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < Lq; ++i) {
        std::vector<LD> logw(Lk);
        LD top = -INFINITY;
        for (int64_t j = 0; j < Lk; ++j) {
          LD acc = 0;
          for (int64_t d = 0; d < D; ++d) {
            acc += power *
                   std::log(std::fabs(sinc_ld(LD(R[h][d]) * (LD(Q[b][h][i][d]) - K[b][h][j][d]))));
          }
          logw[j] = acc;
          top = std::max(top, acc);
        }
        std::vector<LD> a(Lk);
        LD total = 0;
        for (int64_t j = 0; j < Lk; ++j) total += a[j] = std::exp(logw[j] - top);
        std::vector<LD> o(Dv, 0);
        for (int64_t j = 0; j < Lk; ++j) {
          a[j] /= total;
          for (int64_t c = 0; c < Dv; ++c) o[c] += a[j] * V[b][h][j][c];
        }
        LD delta = 0;
        for (int64_t c = 0; c < Dv; ++c) {
          O[b][h][i][c] = static_cast<double>(o[c]);
          delta += W[b][h][i][c] * o[c];
        }
        for (int64_t j = 0; j < Lk; ++j) {
          LD gv = 0;
          for (int64_t c = 0; c < Dv; ++c) {
            gv += W[b][h][i][c] * V[b][h][j][c];
            dV[b][h][j][c] += static_cast<double>(a[j] * W[b][h][i][c]);
          }
          const LD coupling = a[j] * (gv - delta);
          for (int64_t d = 0; d < D; ++d) {
            const LD diff = LD(Q[b][h][i][d]) - K[b][h][j][d];
            const LD t = coupling * power * cot_minus_inv_ld(LD(R[h][d]) * diff);
            dQ[b][h][i][d] += static_cast<double>(t * R[h][d]);
            dK[b][h][j][d] -= static_cast<double>(t * R[h][d]);
            dR[h][d] += static_cast<double>(t * diff);
          }
        }
      }
  return {out, dq, dk, dv, dr};
}

void expect_finite(const std::vector<torch::Tensor>& ts, const std::string& what) {
  for (size_t i = 0; i < ts.size(); ++i) {
    EXPECT_TRUE(ts[i].isfinite().all().item<bool>()) << what << ": tensor " << i << " not finite";
  }
}

}  // namespace

TEST_F(FourierAttention, Fused_MatchesComposite_Double) {
  const Case cases[] = {
      {4, fk::FourierPhi::kPower, false, false}, {4, fk::FourierPhi::kPower, true, false},
      {4, fk::FourierPhi::kPower, false, true},  {4, fk::FourierPhi::kPower, true, true},
      {2, fk::FourierPhi::kPower, true, true},   {6, fk::FourierPhi::kPower, false, true},
      {3, fk::FourierPhi::kPower, false, true},  {1, fk::FourierPhi::kAbs, true, true},
      {1, fk::FourierPhi::kRelu, false, true},   {2, fk::FourierPhi::kRelu, true, false},
  };
  for (const auto& c : cases) {
    const int64_t lq = c.causal ? 140 : 9, lk = c.causal ? 140 : 150;  // > one key chunk (128)
    const auto q = torch::randn({2, 2, lq, 5}, torch::kDouble) * 0.8;
    const auto k = torch::randn({2, 2, lk, 5}, torch::kDouble) * 0.8;
    const auto v = torch::randn({2, 2, lk, 3}, torch::kDouble);
    const auto r = c.per_dim_r ? torch::randn({2, 5}, torch::kDouble) * 1.5
                               : torch::full({1}, -2.0, torch::kDouble);  // sign must not matter
    const auto w = torch::randn({2, 2, lq, 3}, torch::kDouble);
    const auto fused = run_with_grads(fk::fourier_attention_fused_cpu, q, k, v, r, w, c);
    const auto composite = run_with_grads(fk::fourier_attention_composite, q, k, v, r, w, c);
    const char* names[] = {"out", "dq", "dk", "dv", "dR"};
    for (int t = 0; t < 5; ++t) {
      // 1e-10 relative; the absolute floor covers entries that are sums cancelling to ~0.
      const double floor = 1e-12 * composite[t].abs().max().item<double>();
      EXPECT_TRUE(all_close(fused[t], composite[t], 1e-10, floor))
          << names[t] << " power=" << c.power << " phi=" << fk::fourier_phi_name(c.phi)
          << " causal=" << c.causal << " per_dim_r=" << c.per_dim_r;
    }
  }
}

TEST_F(FourierAttention, Fused_GradientsMatchFiniteDifferences) {
  for (bool causal : {false, true}) {
    for (int64_t power : {4, 3}) {
      auto q = torch::randn({1, 2, 4, 3}, torch::kDouble).requires_grad_(true);
      auto k = torch::randn({1, 2, 4, 3}, torch::kDouble).requires_grad_(true);
      auto v = torch::randn({1, 2, 4, 2}, torch::kDouble).requires_grad_(true);
      auto r = (torch::rand({2, 3}, torch::kDouble) + 0.5).requires_grad_(true);
      expect_gradients_match(
          [&](const std::vector<torch::Tensor>& in) {
            return fa::fourier_attention(in[0], in[1], in[2], in[3], power, causal);
          },
          {q, k, v, r});
    }
  }
}

TEST_F(FourierAttention, Fused_MatchesLongDoubleReference) {
  const auto q = torch::randn({1, 2, 20, 8}, torch::kDouble);
  const auto k = torch::randn({1, 2, 30, 8}, torch::kDouble);
  const auto v = torch::randn({1, 2, 30, 4}, torch::kDouble);
  const auto r = torch::rand({2, 8}, torch::kDouble) * 3;
  const auto w = torch::randn({1, 2, 20, 4}, torch::kDouble);
  const auto fused = run_with_grads(fk::fourier_attention_fused_cpu, q, k, v, r, w,
                                    {4, fk::FourierPhi::kPower, false, true});
  const auto ref = reference_ld(q, k, v, r, w, 4);
  for (int t = 0; t < 5; ++t) {
    EXPECT_TRUE(all_close(fused[t], ref[t], 1e-10, 1e-12 * ref[t].abs().max().item<double>()))
        << "tensor " << t;
  }
}

TEST_F(FourierAttention, FloatAgreesWithDouble) {
  const auto q = torch::randn({1, 2, 200, 16}, torch::kDouble) * 0.5;
  const auto k = torch::randn({1, 2, 200, 16}, torch::kDouble) * 0.5;
  const auto v = torch::randn({1, 2, 200, 8}, torch::kDouble);
  const auto r = torch::full({1}, 2.0, torch::kDouble);
  const auto w = torch::randn({1, 2, 200, 8}, torch::kDouble);
  const Case c{4, fk::FourierPhi::kPower, true, false};
  const auto d = run_with_grads(fk::fourier_attention_fused_cpu, q, k, v, r, w, c);
  const auto f =
      run_with_grads(fk::fourier_attention_fused_cpu, q.to(torch::kFloat), k.to(torch::kFloat),
                     v.to(torch::kFloat), r.to(torch::kFloat), w.to(torch::kFloat), c);
  for (int t = 0; t < 5; ++t) {
    // Float tolerance: log-weights are sums of 16 * 4 terms with relative error ~1e-7 each, and the
    // exponentials of differences of such sums amplify them; 1e-4 of each tensor's scale.
    const double scale = d[t].abs().max().item<double>();
    EXPECT_TRUE(all_close(f[t], d[t], 1e-3, 1e-4 * scale)) << "tensor " << t;
  }
}

// D = 64, R = 2, unit-variance q, k: the plain product of 64 sinc^4 factors underflows float for
// most pairs; the fused kernel's rows stay finite, sum to 1 and match the double reference.
TEST_F(FourierAttention, D64R2_RowsFiniteAndNonDegenerate) {
  const auto q = torch::randn({1, 2, 96, 64});
  const auto k = torch::randn({1, 2, 96, 64});
  const auto v = torch::randn({1, 2, 96, 16});
  const auto R = torch::full({1}, 2.0);
  const auto x = 2.0 * (q.unsqueeze(3) - k.unsqueeze(2));
  const auto naive = (torch::sin(x) / x).pow(4).prod(-1);  // float, as the authors' kernel
  const double naive_zero = (naive == 0).to(torch::kDouble).mean().item<double>();
  EXPECT_GT(naive_zero, 0.5) << "the test case must be the hard case";
  const auto weights = fa::fourier_attention_weights(q, k, R);
  ASSERT_TRUE(weights.isfinite().all().item<bool>());
  EXPECT_TRUE(all_close(weights.sum(-1), torch::ones({1, 2, 96}), 1e-5, 1e-5));
  const auto out = fa::fourier_attention(q, k, v, R);
  const auto ref = fk::fourier_attention_composite(
      q.to(torch::kDouble), k.to(torch::kDouble), v.to(torch::kDouble),
      torch::full({2, 64}, 2.0, torch::kDouble), 4, fk::FourierPhi::kPower, false);
  EXPECT_TRUE(all_close(out, ref, 1e-3, 1e-4));
  // Non-degenerate: outputs are not the uniform average of v.
  EXPECT_GT((out - v.mean(2, true)).abs().max().item<double>(), 0.1);
}

// q == k exactly, and |R (q - k)| in [1e-8, 1e-2]: the series branches of s and cot x - 1/x.
TEST_F(FourierAttention, NearZeroDifferences_GradientsMatchSeries) {
  const int64_t D = 6;
  const auto q = torch::randn({1, 1, 3, D}, torch::kDouble) * 1e-2;
  // keys: q_0 itself, and q_0 plus offsets of magnitudes 1e-8 .. 1e-2 (R = 1).
  auto offsets = torch::logspace(-8, -2, 2 * D, 10, torch::kDouble).view({1, 1, 2, D});
  offsets = offsets * (torch::randint(0, 2, offsets.sizes(), torch::kDouble) * 2 - 1);
  const auto k = torch::cat({q.narrow(2, 0, 1), q.narrow(2, 0, 1) + offsets}, 2);
  const auto v = torch::randn({1, 1, 3, 2}, torch::kDouble);
  const auto r = torch::ones({1, D}, torch::kDouble);
  const auto w = torch::randn({1, 1, 3, 2}, torch::kDouble);
  const auto ref = reference_ld(q, k, v, r, w, 4);
  const Case c{4, fk::FourierPhi::kPower, false, true};
  const auto d = run_with_grads(fk::fourier_attention_fused_cpu, q, k, v, r, w, c);
  for (int t = 0; t < 5; ++t) {
    EXPECT_TRUE(all_close(d[t], ref[t], 1e-9, 1e-300)) << "double tensor " << t;
  }
  // Float: the authors' float cot x - 1/x returns 0 for |x| = 1e-4; ours keeps 1e-4 relative.
  const auto f =
      run_with_grads(fk::fourier_attention_fused_cpu, q.to(torch::kFloat), k.to(torch::kFloat),
                     v.to(torch::kFloat), r.to(torch::kFloat), w.to(torch::kFloat), c);
  const auto ref_f = reference_ld(q.to(torch::kFloat), k.to(torch::kFloat), v.to(torch::kFloat),
                                  r.to(torch::kFloat), w.to(torch::kFloat), 4);
  for (int t = 0; t < 5; ++t) {
    // dR (t = 4) sums G_ij c(x) (q - k) over pairs whose couplings G have both signs: the
    // cancellation costs a decade of float accuracy, hence 1e-3 there.
    EXPECT_TRUE(all_close(f[t], ref_f[t], t == 4 ? 1e-3 : 1e-4, 1e-30)) << "float tensor " << t;
  }
}

// Keys on zeros of sin: weight 0 (to the precision of pi), no NaN in outputs or gradients; rows
// whose weights all vanish output 0.
TEST_F(FourierAttention, ZerosOfSin_GiveZeroWeightAndNoNaN) {
  for (auto dtype : {torch::kFloat, torch::kDouble}) {
    auto q = torch::zeros({1, 1, 2, 3}, dtype);
    auto k = torch::randn({1, 1, 4, 3}, dtype) * 0.3;
    k.index_put_({0, 0, 0, 1}, M_PI);      // x = -pi: sin vanishes
    k.index_put_({0, 0, 2, 0}, 2 * M_PI);  // x = -2 pi
    const auto v = torch::randn({1, 1, 4, 2}, dtype);
    const auto R = torch::ones({1}, dtype);
    const auto weights = fa::fourier_attention_weights(q, k, R);
    EXPECT_LT(weights.select(3, 0).max().item<double>(), 1e-20) << dtype;
    EXPECT_LT(weights.select(3, 2).max().item<double>(), 1e-20) << dtype;
    const auto w = torch::randn({1, 1, 2, 2}, dtype);
    const auto g = run_with_grads(fk::fourier_attention_fused_cpu, q, k, v, R, w,
                                  {4, fk::FourierPhi::kPower, false, false});
    expect_finite(g, "zeros of sin");
  }
  // ReLU: s(-4) < 0 for every key, so every weight of the row is exactly 0: output 0, gradient 0.
  const auto q = torch::zeros({1, 1, 1, 2}, torch::kDouble);
  const auto k = torch::full({1, 1, 3, 2}, 4.0, torch::kDouble);
  const auto v = torch::randn({1, 1, 3, 2}, torch::kDouble);
  const auto w = torch::randn({1, 1, 1, 2}, torch::kDouble);
  const auto g =
      run_with_grads(fk::fourier_attention_fused_cpu, q, k, v, torch::ones({1}, torch::kDouble), w,
                     {1, fk::FourierPhi::kRelu, false, false});
  expect_finite(g, "vanished row");
  EXPECT_EQ(g[0].abs().max().item<double>(), 0.0);
  EXPECT_EQ(g[1].abs().max().item<double>(), 0.0);
  const auto c =
      run_with_grads(fk::fourier_attention_composite, q, k, v, torch::ones({1}, torch::kDouble), w,
                     {1, fk::FourierPhi::kRelu, false, false});
  EXPECT_EQ(c[0].abs().max().item<double>(), 0.0);
}

// A NaN in q or k is not a zero weight: it shows in every output row that depends on it, as in
// every other variant (the fused kernel turned NaN factors into finite mantissas and exponents, so
// rows came out finite but arbitrary). Forward and backward, every phi mode, float and double.
TEST_F(FourierAttention, NaNInputs_ShowInTheRowsThatDependOnThem) {
  const int64_t len = 6, bad = 2;
  const auto isnan_rows = [](const torch::Tensor& t) { return t.isnan().any(-1)[0][0]; };  // (L)
  const auto finite_rows = [](const torch::Tensor& t) { return t.isfinite().all(-1)[0][0]; };
  for (auto dtype : {torch::kFloat, torch::kDouble}) {
    for (auto [power, phi] :
         {std::pair{4, fk::FourierPhi::kPower}, std::pair{3, fk::FourierPhi::kPower},
          std::pair{2, fk::FourierPhi::kRelu}, std::pair{1, fk::FourierPhi::kAbs}}) {
      for (bool causal : {false, true}) {
        for (bool in_key : {false, true}) {
          auto q = torch::randn({1, 1, len, 4}, dtype), k = torch::randn({1, 1, len, 4}, dtype);
          (in_key ? k : q)[0][0][bad][1] = NAN;
          q.requires_grad_();
          k.requires_grad_();
          const auto v = torch::randn({1, 1, len, 3}, dtype);
          const auto r = torch::full({1, 4}, 1.5, dtype);
          const auto out = fk::fourier_attention_fused_cpu(q, k, v, r, power, phi, causal);
          const auto composite = fk::fourier_attention_composite(q, k, v, r, power, phi, causal);
          out.sum().backward();
          const std::string label = std::string(in_key ? "NaN key" : "NaN query") +
                                    " causal=" + std::to_string(causal) +
                                    " phi=" + fk::fourier_phi_name(phi) +
                                    " p=" + std::to_string(power) + " " + c10::toString(dtype);
          for (int64_t i = 0; i < len; ++i) {
            // Row i depends on the NaN: the query row itself, or (a key) every row that sees it.
            const bool tainted = in_key ? (!causal || i >= bad) : i == bad;
            EXPECT_EQ(isnan_rows(out)[i].item<bool>(), tainted) << label << " row " << i;
            EXPECT_EQ(finite_rows(out)[i].item<bool>(), !tainted) << label << " row " << i;
            EXPECT_EQ(isnan_rows(composite)[i].item<bool>(), tainted)
                << label << " composite row " << i;
            // dq_i depends on row i only.
            EXPECT_EQ(isnan_rows(q.grad())[i].item<bool>(), tainted) << label << " dq row " << i;
            EXPECT_EQ(finite_rows(q.grad())[i].item<bool>(), !tainted) << label << " dq row " << i;
            // dk_j sums over the rows that see key j: NaN when one of them is tainted.
            const bool key_tainted = in_key || (causal ? i <= bad : true);
            EXPECT_EQ(isnan_rows(k.grad())[i].item<bool>(), key_tainted)
                << label << " dk row " << i;
            EXPECT_EQ(finite_rows(k.grad())[i].item<bool>(), !key_tainted)
                << label << " dk row " << i;
          }
        }
      }
    }
  }
}

// The composite, causal, with one NaN in q, k or v: it reaches exactly the output rows that read it
// (row i reads q_i, and k_j, v_j for j <= i; a NaN in v its own column only), and no gradient of a
// position that shares no row with it. The masked weights, exact zeros, were multiplied by every
// v_j (0 * NaN = NaN), and the masked pairs' differences q_i - k_j were differentiated at the NaN.
// phi sigmoid and power (ReLU weights can be exactly 0 for any v: the fused kernel skips them).
TEST_F(FourierAttention, Composite_CausalNaNStaysInTheRowsThatReadIt) {
  const int64_t len = 6, bad = 2;
  for (auto [power, phi] :
       {std::pair{1, fk::FourierPhi::kSigmoid}, std::pair{4, fk::FourierPhi::kPower}}) {
    for (int which = 0; which < 3; ++which) {
      std::vector<torch::Tensor> in = {torch::randn({1, 1, len, 4}, torch::kDouble),
                                       torch::randn({1, 1, len, 4}, torch::kDouble),
                                       torch::randn({1, 1, len, 3}, torch::kDouble),
                                       torch::full({1, 4}, 1.5, torch::kDouble)};
      in[which][0][0][bad][0] = NAN;
      for (auto& t : in) t.requires_grad_();
      const auto out = fk::fourier_attention_composite(in[0], in[1], in[2], in[3], power, phi,
                                                       /*causal=*/true);
      (out * torch::randn_like(out)).sum().backward();
      const std::string label = std::string(fk::fourier_phi_name(phi)) + ", NaN in " + "qkv"[which];
      for (int64_t i = 0; i < len; ++i) {
        for (int64_t c = 0; c < 3; ++c) {
          EXPECT_EQ(out[0][0][i][c].isnan().item<bool>(),
                    causal_reads(which, i, bad) && (which != 2 || c == 0))
              << label << " row " << i << " column " << c;
        }
      }
      expect_finite_gradients_apart_from(in, which, bad, label);
    }
  }
}

// The composite in float at |q|, |k| of 1e4: outputs were finite but every gradient was NaN, from
// the Taylor branch of sin(x) / x evaluated where it is not used (x^14 / 15! overflowed, and its
// derivative times the unused branch's zero gradient is NaN).
TEST_F(FourierAttention, Composite_LargeInputsGiveFiniteGradients) {
  for (auto phi : {fk::FourierPhi::kSigmoid, fk::FourierPhi::kPower}) {
    for (bool causal : {false, true}) {
      const auto q = torch::randn({1, 2, 8, 4}) * 1e4;
      const auto k = torch::randn({1, 2, 8, 4}) * 1e4;
      const auto v = torch::randn({1, 2, 8, 3});
      const auto w = torch::randn({1, 2, 8, 3});
      const auto got = run_with_grads(fk::fourier_attention_composite, q, k, v,
                                      torch::full({1}, 2.0), w, {4, phi, causal, false});
      for (size_t t = 0; t < got.size(); ++t) {
        EXPECT_TRUE(got[t].isfinite().all().item<bool>())
            << fk::fourier_phi_name(phi) << (causal ? " causal" : "") << ", tensor " << t;
      }
    }
  }
}

TEST_F(FourierAttention, CausalOutputsIgnoreFutureKeys) {
  const auto q = torch::randn({1, 2, 12, 4});
  auto k = torch::randn({1, 2, 12, 4});
  const auto v = torch::randn({1, 2, 12, 3});
  const auto R = torch::full({1}, 2.0);
  const auto before = fa::fourier_attention(q, k, v, R, 4, true);
  k.index_put_({0, 0, 11}, torch::randn({4}));
  const auto after = fa::fourier_attention(q, k, v, R, 4, true);
  EXPECT_TRUE(torch::equal(before.narrow(2, 0, 11), after.narrow(2, 0, 11)));
  const auto weights = fa::fourier_attention_weights(q, k, R, 4, true);
  EXPECT_EQ(weights.triu(1).abs().max().item<double>(), 0.0);
}

TEST_F(FourierAttention, SigmoidAndOtherDtypes_UseTheComposite) {
  auto q = torch::randn({1, 1, 3, 2}, torch::kDouble).requires_grad_(true);
  auto k = torch::randn({1, 1, 3, 2}, torch::kDouble).requires_grad_(true);
  auto v = torch::randn({1, 1, 3, 2}, torch::kDouble).requires_grad_(true);
  auto R = torch::full({1}, 1.5, torch::kDouble).requires_grad_(true);
  expect_gradients_match(
      [](const std::vector<torch::Tensor>& in) {
        return fa::fourier_attention(in[0], in[1], in[2], in[3], 1, false,
                                     fk::FourierPhi::kSigmoid);
      },
      {q, k, v, R});
  const auto qb = torch::randn({1, 1, 4, 2}).to(torch::kBFloat16);
  const auto out = fa::fourier_attention(qb, qb, qb, torch::ones({1}).to(torch::kBFloat16));
  EXPECT_EQ(out.scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(out.isfinite().all().item<bool>());
  // Against double on the same (bfloat16) inputs: K_ij = prod_d s(x_d)^4, s = sin x / x,
  // x_d = R (q_id - k_jd). Per weight, to first order in u = 2^-8: x rounds twice (difference,
  // times R), which moves log s by 2u |x cot x - 1|; sin and the division add 2u to s, the power
  // takes 4x that; each factor's log and the product add u; the log-domain weight l_ij and its
  // shift by the row's max round at u (|l_ij| + |l_ij - max_l l_il|); exp adds u. The output is
  // then within convex_combination_error_bound (test_util.h) with these per-weight errors.
  const auto xb = qb.to(torch::kDouble);
  const auto x = xb.unsqueeze(-2) - xb.unsqueeze(-3);  // (1, 1, Lq, Lk, D), R = 1
  const auto s = torch::where(x == 0, torch::ones_like(x), torch::sin(x) / x);
  const auto log_k = 4.0 * s.abs().log().sum(-1);  // (1, 1, Lq, Lk)
  const auto weights = torch::softmax(log_k, -1);
  const auto reference = torch::matmul(weights, xb);
  const double u = unit_roundoff(torch::kBFloat16);
  const auto sensitivity =
      torch::where(x == 0, torch::zeros_like(x), (x / torch::tan(x) - 1).abs());
  const auto log_error =
      (4.0 * (2.0 * u * sensitivity + 2.0 * u) + u).sum(-1) +
      u * (log_k.abs() + (log_k - std::get<0>(log_k.max(-1, /*keepdim=*/true))).abs()) + 2.0 * u;
  EXPECT_TRUE(all_within(out, reference,
                         convex_combination_error_bound(weights, xb, reference, log_error.expm1(),
                                                        /*terms=*/4.0, u)));
}

TEST_F(FourierAttention, NonContiguousInputs_AreMadeContiguous) {
  const auto q = torch::randn({1, 5, 2, 4}).transpose(1, 2);  // (1, 2, 5, 4), strided
  const auto k = torch::randn({1, 5, 2, 4}).transpose(1, 2);
  const auto v = torch::randn({1, 2, 3, 5}).transpose(2, 3);
  const auto R = torch::full({2, 1}, 2.0);
  ASSERT_FALSE(q.is_contiguous());
  EXPECT_TRUE(
      torch::equal(fa::fourier_attention(q, k, v, R),
                   fa::fourier_attention(q.contiguous(), k.contiguous(), v.contiguous(), R)));
}

TEST_F(FourierAttention, Validation_NamesTheBadArgument) {
  const auto q = torch::randn({1, 2, 3, 4});
  const auto v = torch::randn({1, 2, 3, 5});
  const auto R = torch::full({1}, 2.0);
  expect_error(
      [&] {
        fa::fourier_attention(q, torch::randn({1, 2, 3, 5}), v, R);
      },
      {"fourier_attention", "head dim", "[1, 2, 3, 5]"});
  expect_error(
      [&] {
        fa::fourier_attention(q, q, torch::randn({1, 2, 4, 5}), R);
      },
      {"fourier_attention", "v must agree"});
  expect_error([&] { fa::fourier_attention(q, q, v, torch::ones({3})); },
               {"R must be a scalar", "(D) = (4)", "[3]"});
  expect_error(
      [&] {
        fa::fourier_attention(q, q, v, torch::ones({3, 4}));
      },
      {"(H, D) = (2, 4)", "[3, 4]"});
  expect_error([&] { fa::fourier_attention(q, q, v, R, 0); },
               {"power must be in [1, 32]", "got 0"});
  expect_error([&] { fa::fourier_attention(q, q, v, R, 40); }, {"got 40"});
  expect_error([&] { fa::fourier_attention(q, q.to(torch::kDouble), v, R); },
               {"k has dtype Double", "q has Float"});
  expect_error([&] { fa::fourier_attention(q, q, v, R.to(torch::kDouble)); },
               {"R has dtype Double", "q has Float"});
  expect_error([&] { fa::fourier_attention(q, q, v, torch::full({1}, NAN)); },
               {"R must be finite"});
  // R = 0 makes every weight 1 whatever q and k: rejected, as every other bad option, naming it.
  expect_error([&] { fa::fourier_attention(q, q, v, torch::zeros({1})); },
               {"R must be finite and nonzero", "got 0"});
  expect_error(
      [&] {
        fa::fourier_attention(q, q, v, torch::tensor({1.f, 0.f, 2.f, 3.f}));
      },
      {"R must be finite and nonzero", "got 0"});
  expect_error([&] { fa::FourierAttention(fa::FourierAttentionOptions().r_init(-1.0)); },
               {"FourierAttention: r_init must be positive and finite", "got -1"});
  expect_error([&] { fa::FourierAttention(fa::FourierAttentionOptions().r_init(INFINITY)); },
               {"FourierAttention: r_init must be positive and finite", "got inf"});
  expect_error([&] { fa::FourierAttention(fa::FourierAttentionOptions().r_init(NAN)); },
               {"FourierAttention: r_init must be positive and finite", "got nan"});
  expect_error([&] { fa::FourierAttention(fa::FourierAttentionOptions().heads(-1)); },
               {"FourierAttention: heads must be >= 0", "got -1"});
  expect_error(
      [&] {
        fa::FourierAttention(fa::FourierAttentionOptions().r_shape(fa::FourierRShape::kPerHead));
      },
      {"FourierAttention", "per-head R needs heads > 0", "got 0"});
  expect_error(
      [&] {
        fa::FourierAttention(
            fa::FourierAttentionOptions().r_shape(fa::FourierRShape::kPerDimension));
      },
      {"head_dim > 0"});
  expect_error(
      [&] {
        fk::fourier_attention_op(q, q, v, torch::ones({2, 3}), 4, fk::FourierPhi::kPower, false);
      },
      {"(H, D) = (2, 4)"});
}

TEST_F(FourierAttention, Module_RShapesParametersAndMaterialize) {
  const auto q = torch::randn({2, 3, 5, 4});
  const auto v = torch::randn({2, 3, 5, 6});
  struct Expect {
    fa::FourierRShape shape;
    int64_t count;
  } expects[] = {{fa::FourierRShape::kScalar, 1},
                 {fa::FourierRShape::kPerDimension, 4},
                 {fa::FourierRShape::kPerHead, 3},
                 {fa::FourierRShape::kPerHeadDimension, 12}};
  for (const auto& e : expects) {
    fa::FourierAttention m(fa::FourierAttentionOptions().heads(3).head_dim(4).r_shape(e.shape));
    EXPECT_EQ(m->parameter_count(), e.count);
    EXPECT_EQ(m->name(), "fourier");
    const auto out = m(q, q, v);
    EXPECT_EQ(out.sizes(), torch::IntArrayRef({2, 3, 5, 6}));
    const auto a = m->materialize(q, q);
    EXPECT_TRUE(all_close(at::matmul(a, v), out, 1e-4, 1e-5));
    out.sum().backward();
    EXPECT_TRUE(m->R.grad().defined());
    EXPECT_TRUE(m->R.grad().isfinite().all().item<bool>());
  }
  fa::FourierAttention fixed(fa::FourierAttentionOptions().learn_r(false));
  EXPECT_EQ(fixed->parameter_count(), 0);
  std::ostringstream text;
  text << *fa::FourierAttention(fa::FourierAttentionOptions().power(6));
  EXPECT_NE(text.str().find("power=6"), std::string::npos) << text.str();
}

TEST_F(FourierAttention, TransformerLM_TrainsWithFourierAttention) {
  // A 2-layer LM learns to copy a fixed token pattern with Fourier attention chosen by options.
  fa::TransformerLM lm(fa::TransformerOptions(11, 32, 4, 2)
                           .max_length(16)
                           .attention(fa::FourierAttentionOptions().r_init(1.0).r_shape(
                               fa::FourierRShape::kPerHead)));
  torch::optim::Adam opt(lm->parameters(), torch::optim::AdamOptions(3e-3));
  const auto tokens = torch::arange(16).remainder(11).view({1, 16}).repeat({4, 1});
  double first = 0, last = 0;
  for (int step = 0; step < 60; ++step) {
    opt.zero_grad();
    const auto logits = lm(tokens.narrow(1, 0, 15));
    const auto loss = torch::nn::functional::cross_entropy(logits.reshape({-1, 11}),
                                                           tokens.narrow(1, 1, 15).reshape(-1));
    loss.backward();
    opt.step();
    if (step == 0) first = loss.item<double>();
    last = loss.item<double>();
  }
  EXPECT_TRUE(std::isfinite(last));
  EXPECT_LT(last, 0.5 * first) << "first " << first << " last " << last;
}

// PEERS.md: the authors' CUDA backward ran one thread per key (broken beyond 1024 keys) and their
// CPU R gradient was a data race across threads. More than 1024 keys, and thread counts 1 vs 2.
TEST_F(FourierAttention, ManyKeysAndThreadCounts_AgreeWithComposite) {
  const auto q = torch::randn({1, 2, 5, 4}, torch::kDouble) * 0.5;
  const auto k = torch::randn({1, 2, 1100, 4}, torch::kDouble) * 0.5;
  const auto v = torch::randn({1, 2, 1100, 3}, torch::kDouble);
  const auto r = torch::rand({2, 4}, torch::kDouble) + 1;
  const auto w = torch::randn({1, 2, 5, 3}, torch::kDouble);
  const Case c{4, fk::FourierPhi::kPower, false, true};
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  const auto one = run_with_grads(fk::fourier_attention_fused_cpu, q, k, v, r, w, c);
  at::set_num_threads(2);
  const auto two = run_with_grads(fk::fourier_attention_fused_cpu, q, k, v, r, w, c);
  at::set_num_threads(threads);
  const auto composite = run_with_grads(fk::fourier_attention_composite, q, k, v, r, w, c);
  for (int t = 0; t < 5; ++t) {
    const double floor = 1e-12 * composite[t].abs().max().item<double>();
    EXPECT_TRUE(all_close(one[t], composite[t], 1e-10, floor)) << "1 thread, tensor " << t;
    EXPECT_TRUE(all_close(two[t], composite[t], 1e-10, floor)) << "2 threads, tensor " << t;
  }
}

// The default R matches softmax's temperature: near q = k the kernel is
// exp(-(c/6) R^2 |q - k|^2), so over keys of one norm its weights are softmax's with scale
// 1/sqrt(D). At |q|, |k| of 0.05 sqrt(D) the higher orders are below 1e-3 of the logits.
TEST_F(FourierAttention, DefaultR_MatchesSoftmaxTemperature) {
  const int64_t dim = 16;
  EXPECT_NEAR(fa::fourier_softmax_matched_r(dim), std::sqrt(3.0 / (4.0 * 4.0)), 1e-15);
  EXPECT_NEAR(fa::fourier_softmax_matched_r(64, 2), std::sqrt(3.0 / (2.0 * 8.0)), 1e-15);
  auto q = torch::randn({1, 2, 5, dim}, torch::kDouble);
  auto k = torch::randn({1, 2, 7, dim}, torch::kDouble);
  const double norm = 0.05 * std::sqrt(static_cast<double>(dim));
  q = q / q.norm(2, -1, true) * norm;
  k = k / k.norm(2, -1, true) * norm;
  for (auto phi : {fa::FourierPhi::kPower, fa::FourierPhi::kSigmoid}) {
    const double r = fa::fourier_softmax_matched_r(dim, 4, phi);
    const auto fourier =
        fa::fourier_attention_weights(q, k, torch::full({}, r, torch::kDouble), 4, false, phi);
    const auto softmax = fa::softmax_attention_weights(q, k);
    // Logit differences of 0.05^2 * 16 / 4 = 0.01 at most: compare the deviations from uniform,
    // to 0.2% of each and of the largest (the x^4 terms do not shrink with a small deviation).
    const auto uniform = 1.0 / 7.0;
    const double largest = (softmax - uniform).abs().max().item<double>();
    EXPECT_TRUE(all_close(fourier - uniform, softmax - uniform, 2e-3, 2e-3 * largest))
        << fk::fourier_phi_name(phi);
  }
  expect_error([] { fa::fourier_softmax_matched_r(0); }, {"head_dim must be positive", "got 0"});
}

// r_init 0 without head_dim: R comes from the first call's D, once, and survives save and load.
TEST_F(FourierAttention, DefaultR_FromTheFirstCallWithoutHeadDim) {
  fa::FourierAttention module;
  const auto q = torch::randn({1, 2, 4, 9});
  module(q, q, q);
  EXPECT_NEAR(module->R.item<double>(), fa::fourier_softmax_matched_r(9), 1e-6);
  {
    torch::NoGradGuard no_grad;
    module->R.fill_(0.7);  // as training would move it
  }
  module(q, q, q);
  EXPECT_NEAR(module->R.item<double>(), 0.7, 1e-7);
  const std::string path = temp_path("fourier_pending.pt");
  torch::save(module, path);
  fa::FourierAttention loaded;
  torch::load(loaded, path);
  loaded(q, q, q);
  EXPECT_NEAR(loaded->R.item<double>(), 0.7, 1e-7);
  // With head_dim the value is set at construction.
  fa::FourierAttention sized(fa::FourierAttentionOptions().head_dim(16));
  EXPECT_NEAR(sized->R.item<double>(), fa::fourier_softmax_matched_r(16), 1e-7);
}
