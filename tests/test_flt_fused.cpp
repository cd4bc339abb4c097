// FLT's fused paths against their references: the position block's kernel against double, the
// position block projected once for queries and keys against the concatenated inputs, the float
// fused path against the composite, the blocked forward against one pass (and its peak memory:
// the position block made a block of tokens at a time), and the fused autograd function's backward
// against the composite path's, finite differences and NaN placement (and its peak memory: the
// position block made by rows in the backward too).
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "attention_module_util.h"
#include "flt/attention/flt.h"
#include "flt/detail/allocation_counter.h"
#include "flt/kernels/linear_attention.h"
#include "flt/kernels/position_features.h"
#include "test_util.h"

namespace fa = flt::attention;
using namespace flt::testing;

namespace {

class FLT : public flt::testing::SeededTest {};

// FLT with 2 heads of width 4, m = 16 and r = 8, in double.
fa::FLTAttention small_flt() {
  fa::FLTAttention flt(fa::FLTAttentionOptions().heads(2).head_dim(4).features(16).rpe_features(8));
  flt->to(torch::kDouble);
  return flt;
}

}  // namespace

// The fused position block (kernels::fourier_position_features, FLT's float CPU path without
// gradients) against cos and sin in double, for positions of dimension 1-3 up to 1e4 and
// frequencies of the Gaussian and Cauchy proposals' sizes: within 1e-6 (float rounds values near 1
// to 6e-8; the angle's float rounding adds up to 2e-7); positions and frequencies of different l
// throw naming both shapes; a NaN position shows in its own rows only.
TEST_F(FLT, FusedPositionBlockMatchesDoubleReference) {
  for (int64_t l : {1, 2, 3}) {
    const auto positions = torch::rand({2, 300, l}, torch::kDouble) * 1e4;
    const auto xi = torch::randn({3, 17, l}, torch::kDouble) * 3.0;
    const auto fused = flt::kernels::fourier_position_features(positions.to(torch::kFloat), xi);
    ASSERT_EQ(fused.sizes(), (std::vector<int64_t>{2, 3, 300, 34}));
    ASSERT_EQ(fused.scalar_type(), torch::kFloat);
    // The float positions are what the kernel sees: the reference uses the same rounded values.
    const auto phase =
        2.0 * M_PI *
        at::matmul(positions.to(torch::kFloat).to(torch::kDouble).unsqueeze(1), xi.transpose(1, 2));
    const auto expected = torch::cat({torch::cos(phase), torch::sin(phase)}, -1);
    EXPECT_LT((fused.to(torch::kDouble) - expected).abs().max().item<double>(), 1e-6) << "l " << l;
  }
  // A NaN position gives NaN in its own rows only.
  auto positions = torch::arange(6, torch::kFloat).view({1, 6, 1});
  positions[0][2][0] = std::numeric_limits<float>::quiet_NaN();
  const auto out = flt::kernels::fourier_position_features(positions, torch::randn({2, 4, 1}));
  EXPECT_TRUE(out.select(2, 2).isnan().all().item<bool>());
  EXPECT_TRUE(out.index_select(2, torch::tensor({0, 1, 3, 4, 5})).isfinite().all().item<bool>());
  expect_error(
      [] {
        flt::kernels::fourier_position_features(torch::zeros({1, 4, 2}), torch::zeros({3, 5, 1}));
      },
      {"[1, 4, 2]", "[3, 5, 1]"});
}

// FLT projects its position block once for queries and keys when N1 = N2 (no a_t < 0), and twice
// otherwise: either way the output equals the feature map applied to the concatenated inputs
// [N1, q D^{-1/4}] and [N2, k D^{-1/4}] (Algorithm 1 written out), causal and not.
TEST_F(FLT, SharedPositionProjectionEqualsConcatenatedInputs) {
  const auto q = torch::randn({2, 2, 10, 4}, torch::kDouble);
  const auto k = torch::randn({2, 2, 10, 4}, torch::kDouble);
  const auto v = torch::randn({2, 2, 10, 3}, torch::kDouble);
  auto positive = small_flt();
  auto mixed = small_flt();
  {
    torch::NoGradGuard no_grad;
    mixed->rpe->weights.select(1, 1).mul_(-1.5);
  }
  const auto positions = torch::arange(10, torch::kDouble).view({10, 1});
  const double quarter = std::pow(4.0, -0.25);
  for (auto* flt : {&positive, &mixed}) {
    const auto [n1, n2] = (*flt)->rpe_features(positions.unsqueeze(0));  // (1, H, L, 2r)
    EXPECT_EQ(torch::equal(n1, n2), flt == &positive);
    const auto qh = torch::cat({n1.expand({2, -1, -1, -1}), q * quarter}, -1);
    const auto kh = torch::cat({n2.expand({2, -1, -1, -1}), k * quarter}, -1);
    for (bool causal : {false, true}) {
      fa::AttentionCall call;
      call.causal = causal;
      call.positions = positions;
      const auto expected = flt::kernels::normalized_linear_attention(
          (*flt)->feature_map->query_features(qh), (*flt)->feature_map->key_features(kh, causal), v,
          causal, (*flt)->options.eps());
      EXPECT_TRUE(all_close((*flt)(q, k, v, call), expected, 1e-10, 1e-12))
          << (flt == &positive ? "positive" : "mixed") << " spectrum, causal " << causal;
    }
  }
}

// In float the forward takes the fused position block and the shared projection; positions that
// need gradients send it through the composite (matmul, cos, sin, cat) instead. The two agree to
// float accuracy, batch 2, causal and not.
TEST_F(FLT, FloatFusedPathEqualsComposite) {
  auto flt = small_flt();
  flt->to(torch::kFloat);
  const auto q = torch::randn({2, 2, 12, 4}), k = torch::randn({2, 2, 12, 4});
  const auto v = torch::randn({2, 2, 12, 3});
  const auto positions = torch::arange(12, torch::kFloat).view({12, 1}) * 3.0;
  for (bool causal : {false, true}) {
    fa::AttentionCall fused, composite;
    fused.causal = composite.causal = causal;
    fused.positions = positions;
    composite.positions = positions.clone().requires_grad_();
    const auto a = flt(q, k, v, fused), b = flt(q, k, v, composite);
    EXPECT_TRUE(all_close(a, b.detach(), 1e-4, 1e-5)) << "causal " << causal;
  }
}

namespace {
// FLT at the shape of the blocked-pass tests (heads 8, head_dim 8, m 64: three blocks at B 4,
// L 300), with a positive (weight 1) or signed (-1) spectrum.
fa::FLTAttention make_three_block_flt(double weight, bool learn_proposal) {
  fa::FLTAttention flt(fa::FLTAttentionOptions()
                           .heads(8)
                           .head_dim(8)
                           .features(64)
                           .rpe_features(8)
                           .rpe_weight(weight)
                           .learn_proposal(learn_proposal));
  flt->to(torch::kDouble);
  return flt;
}
}  // namespace

// The blocked forward without autograd (favor_attention; causal: three blocks of 128, 128 and 44
// tokens here; non-causal: panels of whole heads, batch by batch) equals the one-pass autograd path
// up to rounding, for a positive spectrum (the position block projected once per block for queries
// and keys when causal) and a signed one.
TEST_F(FLT, BlockedForwardEqualsOnePass) {
  const int64_t batch = 4, heads = 8, dim = 8, length = 300;
  static_assert(fa::kFavorBlockBytes / (4 * 8 * 64 * 8) < 300 / 2, "needs at least three blocks");
  for (double weight : {1.0, -1.0}) {
    auto flt = make_three_block_flt(weight, /*learn_proposal=*/false);
    expect_blocked_equals_one_pass(flt, batch, heads, length, dim,
                                   "weight " + std::to_string(weight));
  }
}

// The fused backward's cases: in double over three blocks (L = 300, the later keys doubled), causal
// and not, with the spectrum's parameters and the proposal's width learning, for a positive
// spectrum (one [cos, sin] block and scale shared by queries and keys) and a signed one (separate
// scales). `check(flt, q, k, v, call, label)` runs on each.
template <class Check>
void for_each_fused_backward_case(const Check& check) {
  const int64_t batch = 4, heads = 8, dim = 8, length = 300;
  for (double weight : {1.0, -1.0}) {
    auto flt = make_three_block_flt(weight, /*learn_proposal=*/true);
    const auto q = torch::randn({batch, heads, length, dim}, torch::kDouble);
    auto k = torch::randn({batch, heads, length, dim}, torch::kDouble);
    k.narrow(2, 2 * length / 3, length - 2 * length / 3).mul_(2.0);
    const auto v = torch::randn({batch, heads, length, 5}, torch::kDouble);
    for (bool causal : {false, true}) {
      fa::AttentionCall call;
      call.causal = causal;
      check(flt, q, k, v, call, "weight " + std::to_string(weight) + (causal ? " causal" : ""));
    }
  }
}

// With autograd, CPU calls take the fused autograd function of favor_attention (inputs kept,
// features recomputed block by block in the backward): the outputs and the gradients of q, k, v
// and of every parameter (through the position block's scales and its closed-form norm) equal the
// composite path's up to rounding.
TEST_F(FLT, FusedBackwardEqualsComposite) {
  for_each_fused_backward_case(
      [](auto&&... args) { expect_fused_backward_equals_composite(args...); });
}

// The fused backward against central differences along random directions, for q, k, v and every
// parameter (SpectrumGradientsNonZeroAtInitAndMatchFiniteDifferences and
// GradientsForInputsMatchFiniteDifferences check every coordinate at one block).
TEST_F(FLT, FusedBackwardMatchesDirectionalDifferences) {
  for_each_fused_backward_case([](auto&&... args) { expect_directional_derivatives(args...); });
}

// A NaN position or query with autograd: the fused path puts NaN in the same outputs and gradients
// as the composite path, causal and not.
TEST_F(FLT, FusedBackwardKeepsNaNPlacement) {
  auto flt = small_flt();
  const auto q = torch::randn({1, 2, 10, 4}, torch::kDouble);
  const auto k = torch::randn({1, 2, 10, 4}, torch::kDouble);
  const auto v = torch::randn({1, 2, 10, 3}, torch::kDouble);
  auto positions = torch::arange(10, torch::kDouble).view({10, 1});
  positions[3][0] = std::numeric_limits<double>::quiet_NaN();
  auto qn = q.clone();
  qn[0][1][4][2] = std::numeric_limits<double>::quiet_NaN();
  for (bool causal : {false, true}) {
    fa::AttentionCall call;
    call.causal = causal;
    const std::string label = causal ? " causal" : "";
    expect_fused_backward_equals_composite(flt, qn, k, v, call, "NaN query" + label);
    call.positions = positions;
    expect_fused_backward_equals_composite(flt, q, k, v, call, "NaN position" + label);
  }
}

// Without autograd the position block is made a block of tokens at a time (PrecomputedInput's
// leading_rows), never for the whole sequence: the forward's peak of CPU bytes stays below half
// the whole [cos, sin] block's, causal and not, while forming that block alone (rpe_features)
// reaches it. H = 8, r = 32, L = 2048 in float: the whole block is 4 MB, q, k, v and the output
// (head width 4) 256 KB each.
TEST_F(FLT, ForwardWithoutAutogradNeverFormsThePositionBlockWhole) {
  const int64_t heads = 8, length = 2048, dim = 4;
  fa::FLTAttention flt(
      fa::FLTAttentionOptions().heads(heads).head_dim(dim).features(16).rpe_features(32));
  const auto q = torch::randn({1, heads, length, dim}), k = torch::randn({1, heads, length, dim});
  const auto v = torch::randn({1, heads, length, dim});
  const size_t whole_block_bytes = heads * length * 2 * 32 * sizeof(float);
  torch::NoGradGuard no_grad;
  const auto positions = torch::arange(length, torch::kFloat).view({1, length, 1});
  const size_t formed = flt::peak_cpu_bytes_during([&] { flt->rpe_features(positions); });
  EXPECT_GE(formed, whole_block_bytes) << "the counting allocator must see the whole block";
  for (bool causal : {false, true}) {
    fa::AttentionCall call;
    call.causal = causal;
    const size_t peak = flt::peak_cpu_bytes_during([&] { flt(q, k, v, call); });
    EXPECT_LT(peak, whole_block_bytes / 2) << "causal " << causal;
  }
}

// With autograd the fused function keeps the position block's maker, not the block, for its
// backward, which makes each block's rows again: forward and backward together stay below the size
// of the [cos, sin] block of the whole sequence (32 MB here; the rest of the call, its 2 MB blocks
// of features with their graphs and the q-sized outputs and gradients, peaks at 19 MB, and at
// 51 MB with the block formed whole). That the gradients are the composite path's
// (which forms the block whole, as does a proposal width that learns) is
// FusedBackwardEqualsComposite's.
TEST_F(FLT, BackwardMakesThePositionBlockByRows) {
  const int64_t heads = 8, length = 16384, dim = 4, rpe = 32;
  fa::FLTAttention flt(
      fa::FLTAttentionOptions().heads(heads).head_dim(dim).features(64).rpe_features(rpe));
  const size_t whole_block_bytes = heads * length * 2 * rpe * sizeof(float);
  const auto positions = torch::arange(length, torch::kFloat).view({1, length, 1});
  const size_t formed = flt::peak_cpu_bytes_during([&] { flt->rpe_features(positions); });
  EXPECT_GE(formed, whole_block_bytes) << "the counting allocator must see the whole block";
  const auto q = torch::randn({1, heads, length, dim}).requires_grad_();
  const auto k = torch::randn({1, heads, length, dim}).requires_grad_();
  const auto v = torch::randn({1, heads, length, dim}).requires_grad_();
  const auto weights = torch::randn({1, heads, length, dim});
  const size_t peak =
      flt::peak_cpu_bytes_during([&] { (flt(q, k, v) * weights).sum().backward(); });
  EXPECT_LT(peak, whole_block_bytes);
  EXPECT_TRUE(q.grad().isfinite().all().item<bool>() && k.grad().isfinite().all().item<bool>());
}
