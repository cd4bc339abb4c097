// Exact attention (softmax, linear) against naive double-precision loops, gradients, validation.
#include <cmath>
#include <limits>

#include "attention_module_util.h"
#include "flt/attention/linear.h"
#include "flt/attention/softmax.h"
#include "flt/kernels/linear_attention.h"
#include "test_util.h"

namespace fa = flt::attention;
using namespace flt::testing;

namespace {

// Weight of key j for query i, from the raw D-vectors.
using Loop = std::function<double(const double* qi, const double* kj, int64_t dim)>;

// out[b,h,i] = sum_j w(q_i, k_j) v_j / sum_j w(q_i, k_j), one scalar at a time, in double.
torch::Tensor naive_attention(const torch::Tensor& q, const torch::Tensor& k,
                              const torch::Tensor& v, bool causal, const Loop& weight) {
  const auto qd = q.to(torch::kDouble).contiguous(), kd = k.to(torch::kDouble).contiguous();
  const auto vd = v.to(torch::kDouble).contiguous();
  const auto qa = qd.accessor<double, 4>(), ka = kd.accessor<double, 4>(),
             va = vd.accessor<double, 4>();
  auto out = torch::zeros({q.size(0), q.size(1), q.size(2), v.size(3)}, torch::kDouble);
  auto oa = out.accessor<double, 4>();
  const int64_t dim = q.size(3);
  for (int64_t b = 0; b < q.size(0); ++b)
    for (int64_t h = 0; h < q.size(1); ++h)
      for (int64_t i = 0; i < q.size(2); ++i) {
        std::vector<double> w(k.size(2), 0.0);
        double total = 0.0;
        for (int64_t j = 0; j < k.size(2) && !(causal && j > i); ++j) {
          w[j] = weight(&qa[b][h][i][0], &ka[b][h][j][0], dim);
          total += w[j];
        }
        for (int64_t d = 0; d < v.size(3); ++d) {
          double acc = 0.0;
          for (int64_t j = 0; j < k.size(2); ++j) acc += w[j] * va[b][h][j][d];
          oa[b][h][i][d] = acc / total;
        }
      }
  return out;
}

double elu1(double x) {
  return x > 0 ? x + 1.0 : std::exp(x);
}

// exp(q.k / sqrt(D)): softmax weights up to the row's constant factor, which cancels in the ratio.
double softmax_weight(const double* qi, const double* kj, int64_t dim) {
  double s = 0.0;
  for (int64_t d = 0; d < dim; ++d) s += qi[d] * kj[d];
  return std::exp(s / std::sqrt(static_cast<double>(dim)));
}

double linear_weight(const double* qi, const double* kj, int64_t dim) {
  double s = 0.0;
  for (int64_t d = 0; d < dim; ++d) s += elu1(qi[d]) * elu1(kj[d]);
  return s;
}

class ExactAttention : public flt::testing::SeededTest {};

}  // namespace

TEST_F(ExactAttention, Softmax_MatchesNaiveLoop) {
  for (bool causal : {false, true}) {
    const auto q = torch::randn({2, 3, 7, 5}, torch::kDouble);
    const auto k = torch::randn({2, 3, 7, 5}, torch::kDouble);
    const auto v = torch::randn({2, 3, 7, 4}, torch::kDouble);
    EXPECT_TRUE(all_close(fa::softmax_attention(q, k, v, causal),
                          naive_attention(q, k, v, causal, softmax_weight), 1e-12, 1e-12))
        << "causal=" << causal;
  }
}

TEST_F(ExactAttention, Softmax_CrossLengths) {
  const auto q = torch::randn({1, 2, 3, 4}, torch::kDouble);
  const auto k = torch::randn({1, 2, 6, 4}, torch::kDouble);
  const auto v = torch::randn({1, 2, 6, 2}, torch::kDouble);
  EXPECT_TRUE(all_close(fa::softmax_attention(q, k, v),
                        naive_attention(q, k, v, false, softmax_weight), 1e-12, 1e-12));
}

TEST_F(ExactAttention, Softmax_WeightsAreRowStochasticAndCausal) {
  const auto q = torch::randn({1, 2, 9, 4});
  const auto k = torch::randn({1, 2, 9, 4});
  const auto a = fa::softmax_attention_weights(q, k, /*causal=*/true);
  EXPECT_TRUE(all_close(a.sum(-1), torch::ones({1, 2, 9}), 1e-6, 1e-6));
  EXPECT_EQ(a.triu(1).abs().max().item<float>(), 0.0f);
}

// Logits of 1e4 (q, k of scale 100): finite, and within float's rounding of a double reference.
// The bound: a float logit s_ij = q_i . k_j / sqrt(D) is off by at most gamma_{D+1} S_ij,
// S_ij = sum_d |q_id k_jd| / sqrt(D); a weight exp(s_ij - max_l s_il) takes that twice (its logit
// and the row's max), the subtraction's rounding (u |s_ij - max|, at most u 104 for any weight
// float's exp does not flush to 0) and exp's u: relative error
// e <= exp(2 gamma_{D+1} max S + 105 u) - 1; convex_combination_error_bound (test_util.h) carries
// e and the L-term sums to the output.
TEST_F(ExactAttention, Softmax_LargeLogitsStayFinite) {
  const auto q = 100.0 * torch::randn({1, 1, 16, 8});
  const auto k = 100.0 * torch::randn({1, 1, 16, 8});
  const auto v = torch::randn({1, 1, 16, 8});
  const auto out = fa::softmax_attention(q, k, v, true);
  EXPECT_TRUE(out.isfinite().all().item<bool>());
  const double root = std::sqrt(8.0);
  const auto qd = q.to(torch::kDouble), kd = k.to(torch::kDouble), vd = v.to(torch::kDouble);
  const auto scores = torch::matmul(qd, kd.transpose(-2, -1)) / root;
  const auto future = torch::ones({16, 16}, torch::kBool).triu(1);
  const auto weights = torch::softmax(scores.masked_fill(future, -INFINITY), -1);
  const auto reference = torch::matmul(weights, vd);
  const double u = unit_roundoff(torch::kFloat);
  const double terms =
      torch::matmul(qd.abs(), kd.abs().transpose(-2, -1)).max().item<double>() / root;
  const double weight_error = std::expm1(2.0 * rounding_gamma(9.0, u) * terms + 105.0 * u);
  // Weights below float's normal range round in absolute steps of 1.4e-45 (normaliser >= 1).
  const double underflow =
      16.0 * std::numeric_limits<float>::denorm_min() * 2.0 * v.abs().max().item<double>();
  EXPECT_TRUE(all_within(
      out, reference,
      convex_combination_error_bound(weights, vd, reference, weight_error, 16.0, u, underflow)));
}

// Causal softmax with one NaN in q, k or v: the NaN shows in exactly the output rows that read it
// (row i reads q_i, and k_j, v_j for j <= i) and in exactly the gradients of the positions that
// share an output row with it; other batch elements and heads stay finite. The masked weights are
// exact zeros, but a plain matmul multiplies them by every v_j (0 * NaN = NaN: a NaN in the last
// v made all five earlier rows NaN), and the backward of q k^T multiplied the masked zeros of its
// gradient by q_i and k_j. The gradient of v never reads v, so a NaN in v leaves it finite.
TEST_F(ExactAttention, Softmax_CausalNaNReachesExactlyTheRowsThatReadIt) {
  const int64_t len = 6, bad = 2;
  for (int which = 0; which < 3; ++which) {  // the NaN in q, k or v
    std::vector<torch::Tensor> in = {torch::randn({2, 2, len, 4}), torch::randn({2, 2, len, 4}),
                                     torch::randn({2, 2, len, 3})};
    in[which][1][1][bad][0] = NAN;
    for (auto& t : in) t.requires_grad_();
    const auto out = fa::softmax_attention(in[0], in[1], in[2], /*causal=*/true);
    (out * torch::randn_like(out)).sum().backward();
    const std::string label = std::string("NaN in ") + "qkv"[which];
    for (int64_t i = 0; i < len; ++i) {
      const bool tainted = causal_reads(which, i, bad);
      for (int64_t c = 0; c < 3; ++c) {  // a NaN in v reaches its own column only
        EXPECT_EQ(out[1][1][i][c].isnan().item<bool>(), tainted && (which != 2 || c == 0))
            << label << " row " << i << " column " << c;
      }
      for (int input = 0; input < 3; ++input) {
        const bool expected =
            causal_rows_share(which, bad, input, i, len) && !(which == 2 && input == 2);
        const auto g = in[input].grad()[1][1][i];
        EXPECT_EQ(g.isnan().any().item<bool>(), expected) << label << ": gradient of "
                                                          << "qkv"[input] << " at " << i;
        EXPECT_EQ(g.isfinite().all().item<bool>(), !expected) << label << ": gradient of "
                                                              << "qkv"[input] << " at " << i;
      }
    }
    auto elsewhere = torch::ones({2, 2}, torch::kBool);
    elsewhere[1][1] = false;
    EXPECT_TRUE(out.index({elsewhere}).isfinite().all().item<bool>()) << label;
    for (const auto& t : in)
      EXPECT_TRUE(t.grad().index({elsewhere}).isfinite().all().item<bool>()) << label;
  }
  // The weights of a NaN row stay 0 above the diagonal (they do not depend on anything).
  auto q = torch::randn({1, 1, len, 4});
  q[0][0][bad][0] = NAN;
  const auto weights = fa::softmax_attention_weights(q, torch::randn({1, 1, len, 4}), true);
  EXPECT_TRUE(weights[0][0][bad].narrow(0, 0, bad + 1).isnan().all().item<bool>());
  EXPECT_EQ(weights.triu(1).abs().max().item<float>(), 0.0f);
}

TEST_F(ExactAttention, Linear_MatchesNaiveLoop) {
  // L = 150 spans three causal chunks (kCausalChunk = 64), so the carried state is exercised.
  static_assert(flt::kernels::kCausalChunk < 150, "test must cross chunk boundaries");
  for (int64_t length : {5, 150}) {
    for (bool causal : {false, true}) {
      const auto q = torch::randn({1, 2, length, 3}, torch::kDouble);
      const auto k = torch::randn({1, 2, length, 3}, torch::kDouble);
      const auto v = torch::randn({1, 2, length, 2}, torch::kDouble);
      EXPECT_TRUE(all_close(fa::linear_attention(q, k, v, causal),
                            naive_attention(q, k, v, causal, linear_weight), 1e-11, 1e-12))
          << "L=" << length << " causal=" << causal;
    }
  }
}

TEST_F(ExactAttention, Linear_MaterializeTimesVEqualsForward) {
  for (bool causal : {false, true}) {
    const auto q = torch::randn({2, 2, 70, 4}, torch::kDouble);
    const auto k = torch::randn({2, 2, 70, 4}, torch::kDouble);
    const auto v = torch::randn({2, 2, 70, 3}, torch::kDouble);
    fa::LinearAttention attention;
    fa::AttentionCall call;
    call.causal = causal;
    EXPECT_TRUE(all_close(attention(q, k, v, call),
                          torch::matmul(attention->materialize(q, k, call), v), 1e-11, 1e-12));
  }
}

TEST_F(ExactAttention, CausalOutputsIgnoreFutureTokens) {
  const auto q = torch::randn({1, 2, 100, 4}, torch::kDouble);
  const auto k = torch::randn({1, 2, 100, 4}, torch::kDouble);
  const auto v = torch::randn({1, 2, 100, 3}, torch::kDouble);
  auto k2 = k.clone(), v2 = v.clone();
  k2.narrow(2, 60, 40).normal_();
  v2.narrow(2, 60, 40).normal_();
  for (auto fn : {&fa::softmax_attention, &fa::linear_attention}) {
    const auto a = fn(q, k, v, true, fn == &fa::softmax_attention ? 0.0 : 1e-6).narrow(2, 0, 60);
    const auto b = fn(q, k2, v2, true, fn == &fa::softmax_attention ? 0.0 : 1e-6).narrow(2, 0, 60);
    EXPECT_TRUE(all_close(a, b, 1e-13, 1e-14));
  }
}

// Linear attention at L = 70 crosses a causal chunk boundary, so the state's gradient is checked
// too.
TEST_F(ExactAttention, SoftmaxAndLinear_GradientsMatchFiniteDifferences) {
  for (bool causal : {false, true}) {
    expect_attention_gradients(
        [](const auto& q, const auto& k, const auto& v, const fa::AttentionCall& call) {
          return fa::softmax_attention(q, k, v, call.causal);
        },
        {1, 2, 5, 3}, 2, causal);
    expect_attention_gradients(
        [](const auto& q, const auto& k, const auto& v, const fa::AttentionCall& call) {
          return fa::linear_attention(q, k, v, call.causal);
        },
        {1, 1, 70, 2}, 2, causal);
  }
}

TEST_F(ExactAttention, Float_AgreesWithDouble) {
  const auto q = torch::randn({2, 4, 33, 16}, torch::kDouble);
  const auto k = torch::randn({2, 4, 33, 16}, torch::kDouble);
  const auto v = torch::randn({2, 4, 33, 8}, torch::kDouble);
  for (bool causal : {false, true}) {
    EXPECT_TRUE(all_close(fa::softmax_attention(q.to(torch::kFloat), k.to(torch::kFloat),
                                                v.to(torch::kFloat), causal),
                          fa::softmax_attention(q, k, v, causal), 1e-4, 1e-5));
    EXPECT_TRUE(all_close(
        fa::linear_attention(q.to(torch::kFloat), k.to(torch::kFloat), v.to(torch::kFloat), causal),
        fa::linear_attention(q, k, v, causal), 1e-4, 1e-5));
  }
}

// ---- validation: every message names the argument and the bad shape or value ------------------

TEST_F(ExactAttention, Validation_NamesTheBadArgument) {
  const auto q = torch::randn({2, 3, 5, 4});
  const auto k = torch::randn({2, 3, 5, 4});
  const auto v = torch::randn({2, 3, 5, 6});
  for (auto fn : {&fa::softmax_attention, &fa::linear_attention}) {
    const double arg = fn == &fa::softmax_attention ? 0.0 : 1e-6;
    const std::string name =
        fn == &fa::softmax_attention ? "softmax_attention" : "linear_attention";
    expect_error([&] { fn(q[0], k, v, false, arg); },
                 {name, "q must have shape (B, H, L, D)", "[3, 5, 4]"});
    expect_error([&] { fn(q, k[0], v, false, arg); }, {name, "k must have shape", "[3, 5, 4]"});
    expect_error([&] { fn(q, k, v[0], false, arg); }, {name, "v must have shape", "[3, 5, 6]"});
    expect_error(
        [&] {
          fn(q, torch::randn({1, 3, 5, 4}), v, false, arg);
        },
        {name, "batch and heads", "[2, 3, 5, 4]", "[1, 3, 5, 4]"});
    expect_error(
        [&] {
          fn(q, torch::randn({2, 2, 5, 4}), v, false, arg);
        },
        {name, "batch and heads", "[2, 2, 5, 4]"});
    expect_error(
        [&] {
          fn(q, torch::randn({2, 3, 5, 7}), v, false, arg);
        },
        {name, "head dim D", "[2, 3, 5, 7]"});
    expect_error(
        [&] {
          fn(q, k, torch::randn({2, 3, 4, 6}), false, arg);
        },
        {name, "v must agree with k", "[2, 3, 4, 6]"});
    expect_error(
        [&] {
          fn(q, torch::randn({2, 3, 6, 4}), torch::randn({2, 3, 6, 6}), true, arg);
        },
        {name, "causal attention needs equal", "[2, 3, 6, 4]"});
    expect_error(
        [&] {
          fn(torch::ones({2, 3, 5, 4}, torch::kLong), k, v, false, arg);
        },
        {name, "floating-point", "Long"});
    expect_error([&] { fn(q, k.to(torch::kDouble), v, false, arg); },
                 {name, "k has dtype", "Double"});
    expect_error([&] { fn(q, k, v.to(torch::kDouble), false, arg); },
                 {name, "v has dtype", "Double"});
    expect_error(
        [&] {
          fn(torch::randn({2, 3, 0, 4}), k, v, false, arg);
        },
        {name, "q has empty length", "[2, 3, 0, 4]"});
    expect_error(
        [&] {
          fn(q, torch::randn({2, 3, 0, 4}), torch::randn({2, 3, 0, 6}), false, arg);
        },
        {name, "k has empty length"});
    expect_error([&] { fn(q, k.to(torch::kMeta), v, false, arg); }, {name, "k is on meta"});
  }
  expect_error([&] { fa::linear_attention(q, k, v, false, -1.0); }, {"eps must be positive", "-1"});
  expect_error([&] { fa::SoftmaxAttention(fa::SoftmaxAttentionOptions().scale(-2.0)); },
               {"scale", "-2"});
  expect_error([&] { fa::LinearAttention(fa::LinearAttentionOptions().eps(0.0)); }, {"eps", "0"});
  // The options convention (attention.h): eps positive and finite, heads and head_dim >= 0.
  expect_error([&] { fa::LinearAttention(fa::LinearAttentionOptions().eps(NAN)); },
               {"LinearAttention: eps must be positive and finite", "got nan"});
  expect_error([&] { fa::LinearAttention(fa::LinearAttentionOptions().eps(INFINITY)); },
               {"LinearAttention: eps must be positive and finite", "got inf"});
  expect_error([&] { fa::linear_attention(q, k, v, false, NAN); },
               {"linear_attention: eps must be positive and finite", "got nan"});
  expect_error([&] { fa::softmax_attention(q, k, v, false, -2.0); },
               {"softmax_attention: scale must be >= 0 and finite", "got -2"});
  expect_error([&] { fa::SoftmaxAttention(fa::SoftmaxAttentionOptions().heads(-2)); },
               {"SoftmaxAttention: heads must be >= 0", "got -2"});
  expect_error([&] { fa::LinearAttention(fa::LinearAttentionOptions().head_dim(-3)); },
               {"LinearAttention: head_dim must be >= 0", "got -3"});
  expect_error([&] { fa::LinearAttention(fa::LinearAttentionOptions().head_dim(8))(q, k, v); },
               {"LinearAttention", "head dim 4", "head_dim is 8"});
  expect_error(
      [&] { fa::SoftmaxAttention(fa::SoftmaxAttentionOptions().heads(2))->materialize(q, k); },
      {"SoftmaxAttention", "3 heads", "heads is 2"});
}

TEST_F(ExactAttention, Modules_ShapesNamesAndParameters) {
  fa::SoftmaxAttention softmax;
  fa::LinearAttention linear;
  const auto q = torch::randn({2, 3, 5, 4});
  const auto v = torch::randn({2, 3, 5, 6});
  EXPECT_EQ(softmax(q, q, v).sizes(), torch::IntArrayRef({2, 3, 5, 6}));
  EXPECT_EQ(linear(q, q, v).sizes(), torch::IntArrayRef({2, 3, 5, 6}));
  EXPECT_EQ(softmax->materialize(q, q).sizes(), torch::IntArrayRef({2, 3, 5, 5}));
  EXPECT_EQ(softmax->name(), "softmax");
  EXPECT_EQ(linear->name(), "linear");
  EXPECT_EQ(softmax->parameter_count(), 0);
  EXPECT_EQ(linear->parameter_count(), 0);
}
