// The fused causal linear-attention kernel: against the explicit cumsum reference forward and
// backward, finite differences, and a peak-memory bound measured with a counting CPU allocator.
#include "flt/allocation_counter.h"
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
  const auto out = fk::linear_attention_numerator(q.to(torch::kBFloat16), k.to(torch::kBFloat16),
                                                  v.to(torch::kBFloat16), true);
  EXPECT_EQ(out.scalar_type(), torch::kBFloat16);
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
