// The fused causal linear-attention kernel: against the explicit cumsum reference forward and
// backward, finite differences, and a peak-memory bound measured with a counting CPU allocator.
// The causal products of causal_matmul.h: the masked matmul's values, and non-finite inputs that
// reach only the rows that see them.
#include <cmath>
#include <limits>

#include "flt/detail/allocation_counter.h"
#include "flt/kernels/causal_matmul.h"
#include "flt/kernels/linear_attention.h"
#include "test_util.h"

namespace fk = flt::kernels;
using namespace flt::testing;

namespace {

class CausalLinear : public flt::testing::SeededTest {};

// The textbook reference: the (B, H, L, M, Dv) prefix tensor cumsum(phi_k_j v_j^T), contracted.
// phi_q: (B, H, L, M)  phi_k: (B, H, L, M)  v: (B, H, L, Dv) -> (B, H, L, Dv)
torch::Tensor cumsum_reference(const torch::Tensor& phi_q, const torch::Tensor& phi_k,
                               const torch::Tensor& v) {
  const auto states = (phi_k.unsqueeze(-1) * v.unsqueeze(-2)).cumsum(2);
  return (phi_q.unsqueeze(-1) * states).sum(-2);
}

std::vector<torch::Tensor> with_grads(
    const std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&,
                                      const torch::Tensor&)>& fn,
    const torch::Tensor& q0, const torch::Tensor& k0, const torch::Tensor& v0,
    const torch::Tensor& w) {
  auto q = q0.clone().requires_grad_(true), k = k0.clone().requires_grad_(true);
  auto v = v0.clone().requires_grad_(true);
  const auto out = fn(q, k, v);
  (out * w).sum().backward();
  return {out.detach(), q.grad(), k.grad(), v.grad()};
}

}  // namespace

TEST_F(CausalLinear, Fused_MatchesCumsumReference_ForwardAndBackward) {
  // L crosses the composite's chunk (64), Dv crosses the kernel's column block (64).
  const auto q = torch::rand({2, 3, 150, 7}, torch::kDouble);
  const auto k = torch::rand({2, 3, 150, 7}, torch::kDouble);
  const auto v = torch::randn({2, 3, 150, 70}, torch::kDouble);
  const auto w = torch::randn({2, 3, 150, 70}, torch::kDouble);
  const auto fused = with_grads(
      [](auto& a, auto& b, auto& c) { return fk::linear_attention_numerator(a, b, c, true); }, q, k,
      v, w);
  const auto reference = with_grads(cumsum_reference, q, k, v, w);
  const auto composite =
      with_grads([](auto& a, auto& b,
                    auto& c) { return fk::linear_attention_numerator_composite(a, b, c, true); },
                 q, k, v, w);
  for (int t = 0; t < 4; ++t) {
    const double floor = 1e-12 * reference[t].abs().max().item<double>();
    EXPECT_TRUE(all_close(fused[t], reference[t], 1e-10, floor)) << "fused vs cumsum, tensor " << t;
    EXPECT_TRUE(all_close(composite[t], reference[t], 1e-10, floor)) << "composite, tensor " << t;
  }
}

TEST_F(CausalLinear, Float_AgreesWithDouble) {
  const auto q = torch::rand({1, 2, 300, 16});
  const auto k = torch::rand({1, 2, 300, 16});
  const auto v = torch::randn({1, 2, 300, 8});
  const auto w = torch::randn({1, 2, 300, 8});
  auto fn = [](auto& a, auto& b, auto& c) { return fk::linear_attention_numerator(a, b, c, true); };
  const auto f = with_grads(fn, q, k, v, w);
  const auto d = with_grads(fn, q.to(torch::kDouble), k.to(torch::kDouble), v.to(torch::kDouble),
                            w.to(torch::kDouble));
  for (int t = 0; t < 4; ++t) {
    // Sums of up to 300 * 16 float products: a few 1e-6 of the tensor's scale.
    EXPECT_TRUE(all_close(f[t], d[t], 1e-4, 1e-5 * d[t].abs().max().item<double>())) << t;
  }
}

TEST_F(CausalLinear, Fused_GradientsMatchFiniteDifferences) {
  auto q = torch::rand({1, 2, 5, 3}, torch::kDouble).requires_grad_(true);
  auto k = torch::rand({1, 2, 5, 3}, torch::kDouble).requires_grad_(true);
  auto v = torch::randn({1, 2, 5, 4}, torch::kDouble).requires_grad_(true);
  expect_gradients_match(
      [](const std::vector<torch::Tensor>& in) {
        return fk::linear_attention_numerator(in[0], in[1], in[2], true);
      },
      {q, k, v});
}

TEST_F(CausalLinear, NonContiguousAndOtherDtypes) {
  const auto q = torch::rand({1, 9, 2, 3}).transpose(1, 2);
  const auto k = torch::rand({1, 9, 2, 3}).transpose(1, 2);
  const auto v = torch::randn({1, 9, 2, 4}).transpose(1, 2);
  EXPECT_TRUE(all_close(fk::linear_attention_numerator(q, k, v, true), cumsum_reference(q, k, v),
                        1e-5, 1e-6));
  const auto qb = q.to(torch::kBFloat16), kb = k.to(torch::kBFloat16), vb = v.to(torch::kBFloat16);
  const auto out = fk::linear_attention_numerator(qb, kb, vb, true);
  EXPECT_EQ(out.scalar_type(), torch::kBFloat16);
  // Against the double sums of the same (bfloat16) inputs. Each output entry is a sum of
  // products q_im k_jm v_jc over m < D and j <= i; whatever the order and the intermediates kept
  // in bfloat16, that is at most D + L - 2 additions and 2 multiplications on each term's path
  // plus the output's rounding: error <= gamma_{D+L+1} sum of |terms| (u = 2^-8), the sum of
  // |terms| being the same numerator of |q|, |k|, |v|.
  const auto qd = qb.to(torch::kDouble), kd = kb.to(torch::kDouble), vd = vb.to(torch::kDouble);
  const auto magnitude = cumsum_reference(qd.abs(), kd.abs(), vd.abs());
  const double gamma = rounding_gamma(3.0 + 9.0 + 1.0, unit_roundoff(torch::kBFloat16));
  EXPECT_TRUE(all_within(out, cumsum_reference(qd, kd, vd), gamma * magnitude));
}

// With one NaN in phi_q, phi_k or v, the fused scan and the chunked composite give NaN exactly
// where the cumsum reference does (a prefix sum, so a NaN at position p reaches the rows i >= p, or
// row p for a query), forward and backward, and the same values elsewhere. The composite's masked
// (C, C) scores, exact zeros, were multiplied by every v_j of the chunk (0 * NaN = NaN) and its
// backward by every q_i and k_j. L = 150 crosses two chunk boundaries (kCausalChunk = 64).
TEST_F(CausalLinear, NaN_SameRowsAsTheCumsumReference) {
  static_assert(fk::kCausalChunk < 70, "position 70 must lie in a later chunk");
  const int64_t len = 150;
  const auto w = torch::randn({1, 2, len, 3}, torch::kDouble);
  for (int which = 0; which < 3; ++which) {
    for (int64_t bad : {0, 5, 70, 149}) {
      std::vector<torch::Tensor> in = {torch::rand({1, 2, len, 4}, torch::kDouble),
                                       torch::rand({1, 2, len, 4}, torch::kDouble),
                                       torch::randn({1, 2, len, 3}, torch::kDouble)};
      in[which][0][1][bad][1] = NAN;
      const auto reference = with_grads(cumsum_reference, in[0], in[1], in[2], w);
      const auto fused = with_grads(
          [](auto& a, auto& b, auto& c) { return fk::linear_attention_numerator(a, b, c, true); },
          in[0], in[1], in[2], w);
      const auto composite = with_grads(
          [](auto& a, auto& b, auto& c) {
            return fk::linear_attention_numerator_composite(a, b, c, true);
          },
          in[0], in[1], in[2], w);
      const std::string label =
          std::string("NaN in ") + "qkv"[which] + " at " + std::to_string(bad) + ", tensor ";
      for (int t = 0; t < 4; ++t) {
        const auto nan = reference[t].isnan();
        EXPECT_TRUE(nan.any().item<bool>() || t > 0) << label << t;  // the output has some
        for (const auto& [name, got] :
             {std::pair{"fused", fused[t]}, std::pair{"composite", composite[t]}}) {
          EXPECT_TRUE(torch::equal(got.isnan(), nan)) << name << ", " << label << t;
          EXPECT_TRUE(
              all_close(got.masked_fill(nan, 0), reference[t].masked_fill(nan, 0), 1e-10,
                        1e-12 * reference[t].masked_fill(nan, 0).abs().max().item<double>()))
              << name << ", " << label << t;
        }
      }
    }
  }
}

// For finite inputs causal_matmul and causal_scores are the masked matmuls, forward and backward,
// and their gradients match finite differences.
TEST_F(CausalLinear, CausalMatmul_EqualsTheMaskedMatmulForFiniteInputs) {
  const auto future = torch::ones({9, 9}, torch::kBool).triu(1);
  const auto a0 = torch::randn({2, 3, 9, 9}, torch::kDouble).tril();
  const auto x0 = torch::randn({2, 3, 9, 4}, torch::kDouble);
  const auto g = torch::randn({2, 3, 9, 4}, torch::kDouble);
  auto a = a0.clone().requires_grad_(), x = x0.clone().requires_grad_();
  const auto out = fk::causal_matmul(a, x);
  EXPECT_TRUE(torch::equal(out, torch::matmul(a0, x0)));
  (out * g).sum().backward();
  auto a_ref = a0.clone().requires_grad_(), x_ref = x0.clone().requires_grad_();
  (torch::matmul(a_ref.tril(), x_ref) * g).sum().backward();
  EXPECT_TRUE(all_close(a.grad(), a_ref.grad(), 1e-12, 1e-12));
  EXPECT_TRUE(all_close(x.grad(), x_ref.grad(), 1e-12, 1e-12));

  const auto q0 = torch::randn({2, 3, 9, 5}, torch::kDouble);
  const auto k0 = torch::randn({2, 3, 9, 5}, torch::kDouble);
  const auto gs = torch::randn({2, 3, 9, 9}, torch::kDouble);
  auto q = q0.clone().requires_grad_(), k = k0.clone().requires_grad_();
  const auto scores = fk::causal_scores(q, k, -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(
      torch::equal(scores, torch::matmul(q0, k0.transpose(-2, -1))
                               .masked_fill(future, -std::numeric_limits<double>::infinity())));
  (scores.masked_fill(future, 0) * gs).sum().backward();
  auto q_ref = q0.clone().requires_grad_(), k_ref = k0.clone().requires_grad_();
  (torch::matmul(q_ref, k_ref.transpose(-2, -1)).masked_fill(future, 0) * gs).sum().backward();
  EXPECT_TRUE(all_close(q.grad(), q_ref.grad(), 1e-12, 1e-12));
  EXPECT_TRUE(all_close(k.grad(), k_ref.grad(), 1e-12, 1e-12));

  expect_gradients_match(
      [](const std::vector<torch::Tensor>& in) { return fk::causal_matmul(in[0].tril(), in[1]); },
      {torch::randn({1, 2, 5, 5}, torch::kDouble).requires_grad_(),
       torch::randn({1, 2, 5, 3}, torch::kDouble).requires_grad_()});
  expect_gradients_match(
      [](const std::vector<torch::Tensor>& in) { return fk::causal_scores(in[0], in[1], 0.0); },
      {torch::randn({1, 2, 5, 3}, torch::kDouble).requires_grad_(),
       torch::randn({1, 2, 5, 3}, torch::kDouble).requires_grad_()});
}

// A NaN or inf in x_j reaches the rows i >= j of its column only (inf as inf), and leaves every
// other entry as the finite product gives it; a NaN in k_j reaches dq_i for i >= j only.
TEST_F(CausalLinear, CausalMatmul_NonFiniteEntriesReachOnlyTheRowsThatSeeThem) {
  const int64_t len = 8;
  const auto a = torch::rand({1, 1, len, len}, torch::kDouble).tril().requires_grad_();
  auto x_finite = torch::randn({1, 1, len, 3}, torch::kDouble);
  auto x = x_finite.clone();
  x[0][0][3][1] = NAN;
  x[0][0][5][2] = std::numeric_limits<double>::infinity();
  x_finite[0][0][3][1] = 0;
  x_finite[0][0][5][2] = 0;
  x.requires_grad_();
  const auto out = fk::causal_matmul(a, x);
  const auto expected = torch::matmul(a.detach(), x_finite);
  for (int64_t i = 0; i < len; ++i) {
    for (int64_t c = 0; c < 3; ++c) {
      const double got = out[0][0][i][c].item<double>();
      if (c == 1 && i >= 3) {
        EXPECT_TRUE(std::isnan(got)) << i << ", " << c;
      } else if (c == 2 && i >= 5) {
        EXPECT_EQ(got, std::numeric_limits<double>::infinity()) << i << ", " << c;
      } else {
        EXPECT_EQ(got, expected[0][0][i][c].item<double>()) << i << ", " << c;
      }
    }
  }
  out.sum().backward();
  // da_ij = g_i . x_j for j <= i: non-finite in columns 3 and 5 on and below the diagonal only.
  const auto da = a.grad()[0][0];
  for (int64_t i = 0; i < len; ++i) {
    for (int64_t j = 0; j < len; ++j) {
      EXPECT_EQ(da[i][j].isfinite().item<bool>(), !((j == 3 || j == 5) && j <= i))
          << i << ", " << j;
    }
  }
  EXPECT_TRUE(x.grad().isfinite().all().item<bool>());  // dx = a^T g never reads x

  auto q = torch::randn({1, 1, len, 4}, torch::kDouble).requires_grad_();
  auto k = torch::randn({1, 1, len, 4}, torch::kDouble);
  k[0][0][3][0] = NAN;
  k.requires_grad_();
  fk::causal_scores(q, k, 0.0).sum().backward();
  for (int64_t i = 0; i < len; ++i) {
    EXPECT_EQ(q.grad()[0][0][i].isfinite().all().item<bool>(), i < 3) << i;
  }
  EXPECT_TRUE(k.grad().isfinite().all().item<bool>());  // dk = ds^T q never reads k
}

TEST_F(CausalLinear, Validation_NamesTheBadArgument) {
  const auto q = torch::rand({1, 2, 5, 3});
  const auto v = torch::randn({1, 2, 5, 4});
  expect_error(
      [&] {
        fk::linear_attention_numerator(q, torch::rand({1, 2, 5, 4}), v, true);
      },
      {"feature counts differ"});
  expect_error(
      [&] {
        fk::linear_attention_numerator(q, q, torch::randn({1, 2, 6, 4}), true);
      },
      {"v has length 6"});
  expect_error([&] { fk::linear_attention_numerator(q, q.to(torch::kDouble), v, true); },
               {"dtypes differ", "Double"});
  expect_error(
      [&] {
        fk::linear_attention_numerator(torch::rand({1, 2, 4, 3}), q, v, true);
      },
      {"causal needs Lq == Lk", "4 and 5"});
  expect_error(
      [&] {
        fk::linear_attention_numerator(q, torch::rand({1, 3, 5, 3}), torch::randn({1, 3, 5, 4}),
                                       true);
      },
      {"batch and heads differ"});
}

// Peak memory of the fused causal forward + backward grows like L (M + Dv), never like L M Dv;
// the cumsum reference's peak (at least the (L, M, Dv) prefix tensor) shows the counter works.
TEST_F(CausalLinear, PeakMemory_DoesNotGrowWithLMDv) {
  const int64_t B = 1, H = 2, M = 64, Dv = 64;
  std::vector<size_t> fused_peaks;
  for (int64_t L : {1024, 4096}) {
    auto q = torch::rand({B, H, L, M}, torch::kDouble).requires_grad_(true);
    auto k = torch::rand({B, H, L, M}, torch::kDouble).requires_grad_(true);
    auto v = torch::randn({B, H, L, Dv}, torch::kDouble).requires_grad_(true);
    const size_t io_bytes = B * H * L * (M + M + Dv) * sizeof(double);
    const size_t prefix_bytes = B * H * L * M * Dv * sizeof(double);
    const size_t fused = flt::peak_cpu_bytes_during(
        [&] { fk::linear_attention_numerator(q, k, v, true).sum().backward(); });
    fused_peaks.push_back(fused);
    // out, grad_out, dq, dk, dv and small workspaces: a few times the inputs. Here the prefix
    // tensor is M Dv / (2M + Dv) = 21 times the inputs, so the fused peak must stay far below it.
    EXPECT_LT(fused, 4 * io_bytes) << "L=" << L;
    EXPECT_LT(fused, prefix_bytes / 8) << "L=" << L;
    if (L == 1024) {
      const size_t reference =
          flt::peak_cpu_bytes_during([&] { cumsum_reference(q, k, v).sum().backward(); });
      EXPECT_GE(reference, prefix_bytes) << "the counting allocator must see the prefix tensor";
    }
  }
  // 4x the length: about 4x the memory (linear), with slack for fixed-size workspaces.
  EXPECT_LT(fused_peaks[1], 5 * fused_peaks[0]);
}
