// FLT attention: RPE features converge to the exact mask for every closed-form spectrum (slope of
// the max-norm error vs r), sign-aware features, exact RPE-masked softmax limit, gradients,
// causality, streaming, positions of any dimension, save/load, options and validation.
#include <torch/serialize.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "attention_module_util.h"
#include "flt/attention/flt.h"
#include "flt/attention/multihead.h"
#include "test_util.h"

namespace fa = flt::attention;
using namespace flt::testing;
using Family = fa::SpectrumFamily;
using Proposal = fa::ProposalKind;

namespace {

class FLT : public flt::testing::SeededTest {};

fa::FLTAttentionOptions base_options() {
  return fa::FLTAttentionOptions().heads(2).head_dim(4).features(16).rpe_features(8);
}

fa::FLTAttention make_flt(const fa::FLTAttentionOptions& options) {
  fa::FLTAttention flt(options);
  flt->to(torch::kDouble);
  return flt;
}

// Positions for a dimension: 16 token indices (1-D), a 4x4 patch grid (2-D), 12 random points
// (3-D).
torch::Tensor positions_of_dim(int64_t l) {
  if (l == 1) return torch::arange(16, torch::kDouble).view({16, 1});
  if (l == 2) {
    const auto grid =
        torch::meshgrid({torch::arange(4, torch::kDouble), torch::arange(4, torch::kDouble)}, "ij");
    return torch::stack(grid, -1).view({16, 2});
  }
  return torch::randn({12, 3}, torch::kDouble);
}

double slope_of(const std::vector<double>& x, const std::vector<double>& y) {
  const auto X = torch::log(torch::tensor(x, torch::kDouble)),
             Y = torch::log(torch::tensor(y, torch::kDouble));
  const auto xc = X - X.mean();
  return ((xc * (Y - Y.mean())).sum() / (xc * xc).sum()).item<double>();
}

struct FamilyCase {
  const char* label;
  Family family;
  int64_t position_dim;
  int64_t smoothness;
  double scale;
  Proposal proposal;
  double proposal_sigma;
};

/// Bernstein's bound on the largest error of an FLT module's RPE estimate over 1-D positions
/// (Thms 4.1, 4.2): N^(delta) = (1/r) sum_t a_t cos(2 pi xi_t delta) averages r independent terms,
/// each within c = sup |g| / p of 0 (so within 2c of its mean) and of variance at most
/// s2 = E[a_t^2] = int g^2 / p; so P(|N^ - N| >= eps) <= 2 exp(-r eps^2 / (2 s2 + 4 c eps / 3)) at
/// one (head, pair). Over `pairs` of them with a chance `miss` that a correct estimator exceeds it,
/// with l = ln(2 pairs / miss) / r: eps = (4 c l / 3 + sqrt((4 c l / 3)^2 + 8 s2 l)) / 2. c and s2
/// are taken on a grid 40 proposal widths wide, which must hold the largest ratio (one still
/// growing at the grid's edge is unbounded).
double rpe_bernstein_bound(const fa::FLTAttention& flt, double pairs, double miss) {
  torch::NoGradGuard no_grad;
  const double sigma = flt->log_proposal_sigma.exp().item<double>();
  const auto xi = torch::linspace(-20.0 * sigma, 20.0 * sigma, 40001, torch::kDouble).view({-1, 1});
  const auto g = flt->spectrum(xi).to(torch::kDouble);          // (H, N)
  const auto p = flt->proposal_density(xi).to(torch::kDouble);  // (N)
  const auto ratio = (g / p).abs();
  const double c = ratio.max().item<double>();
  const double edge = torch::maximum(ratio.select(1, 0), ratio.select(1, -1)).max().item<double>();
  EXPECT_LT(edge, c) << "sup |g| / p is not inside the grid (unbounded?)";
  const double step = 40.0 * sigma / 40000.0;
  const double s2 = ((g * g / p).sum(1) * step).max().item<double>();
  const double l = std::log(2.0 * pairs / miss) / static_cast<double>(flt->options.rpe_features());
  const double linear = 4.0 * c * l / 3.0;
  return (linear + std::sqrt(linear * linear + 8.0 * s2 * l)) / 2.0;
}

}  // namespace

// Thm 4.2: ||N^ - N||_max shrinks like r^{-1/2}. For each family with a closed-form f, the mean
// max-norm error over 20 redraws at r = 16 .. 4096, log-log slope in [-0.65, -0.35].
// Proposals: Gaussian p where g / p has finite variance (Gaussian spectra with s > sigma / sqrt 2);
// Cauchy p for the polynomially / exponentially decaying spectra (Laplace and Cauchy kernels,
// smooth local k = 2), whose variance under a Gaussian p is infinite. The box (k = 1) is not here:
// its g (sin / xi) is not absolutely integrable, so E|a_t| is infinite under ANY proposal and the
// Monte Carlo mean does not converge (measured slopes -0.14 Cauchy p, -0.18 Gaussian p; see
// Local_BoxDoesNotConverge).
TEST_F(FLT, MaskConvergesAtRateRMinusHalf) {
  const std::vector<FamilyCase> cases = {
      {"gaussian mixture 1-D", Family::kGaussianMixture, 1, 1, 0.1, Proposal::kGaussian, 0.3},
      {"gaussian mixture 2-D", Family::kGaussianMixture, 2, 1, 0.1, Proposal::kGaussian, 0.3},
      {"smooth local k=2 1-D", Family::kLocal, 1, 2, 1.5, Proposal::kCauchy, 0.5},
      {"smooth local k=2 2-D", Family::kLocal, 2, 2, 1.5, Proposal::kCauchy, 0.5},
      {"gaussian kernel", Family::kGaussianKernel, 1, 1, 2.0, Proposal::kGaussian, 0.3},
      {"laplace kernel", Family::kLaplaceKernel, 1, 1, 2.0, Proposal::kCauchy, 0.3},
      {"cauchy kernel", Family::kCauchyKernel, 1, 1, 2.0, Proposal::kCauchy, 0.3},
      {"gaussian basis 3-D", Family::kGaussianBasis, 3, 1, 0.5, Proposal::kGaussian, 0.5},
  };
  for (const auto& c : cases) {
    const auto positions = positions_of_dim(c.position_dim);
    std::vector<double> rs, errors;
    for (int64_t r : {16, 64, 256, 1024, 4096}) {
      auto flt = make_flt(fa::FLTAttentionOptions()
                              .heads(1)
                              .head_dim(4)
                              .features(4)
                              .rpe_features(r)
                              .position_dim(c.position_dim)
                              .family(c.family)
                              .smoothness(c.smoothness)
                              .rpe_scale(c.scale)
                              .proposal(c.proposal)
                              .proposal_sigma(c.proposal_sigma));
      const auto exact = flt->exact_mask(positions);
      double total = 0.0;
      const int draws = 20;
      for (int d = 0; d < draws; ++d) {
        flt->redraw(100 + d);
        total += (flt->approximate_mask(positions) - exact).abs().max().item<double>();
      }
      rs.push_back(static_cast<double>(r));
      errors.push_back(total / draws);
    }
    const double slope = slope_of(rs, errors);
    std::printf("FLT %-22s max-norm error r=16 %.4f r=4096 %.4f slope %.3f\n", c.label,
                errors.front(), errors.back(), slope);
    EXPECT_GE(slope, -0.65) << c.label;
    EXPECT_LE(slope, -0.35) << c.label;
  }
}

// The position features in float stay as accurate as float allows at long positions: the phase
// 2 pi xi t is formed in double turns less whole turns before it becomes float. (Formed in float,
// it was off by ~|2 pi xi t| * 6e-8: 0.02 rad at t = 5e4, an error of 2% of the features.)
TEST_F(FLT, PositionFeaturesInFloatStayAccurateAtLongPositions) {
  fa::FLTAttention single(base_options().rpe_features(32).proposal_sigma(1.0));
  auto twin = std::dynamic_pointer_cast<fa::FLTAttentionImpl>(single->clone());
  twin->to(torch::kDouble);
  const auto positions =
      torch::tensor({0.0, 1.0, 1000.0, 4097.0, 10001.0, 50003.0}).view({1, 6, 1});
  const auto [n1, n2] = single->rpe_features(positions);
  const auto [m1, m2] = twin->rpe_features(positions.to(torch::kDouble));
  const double scale = m2.abs().max().item<double>();
  const double worst = std::max((n1.to(torch::kDouble) - m1).abs().max().item<double>(),
                                (n2.to(torch::kDouble) - m2).abs().max().item<double>());
  std::printf("FLT float position features at t <= 50003: max error %.2e of scale %.2e\n", worst,
              scale);
  EXPECT_LT(worst, 1e-6 * scale);
}

// The box's g = sin(2 pi v xi) / (pi xi) has an infinite L1 norm, so the estimator's mean does not
// exist and the mask error stays O(1) as r grows. Kept as a documented limitation: if this starts
// converging, the estimator changed.
TEST_F(FLT, Local_BoxDoesNotConverge) {
  const auto positions = positions_of_dim(1);
  std::vector<double> errors;
  for (int64_t r : {256, 4096}) {
    auto flt = make_flt(fa::FLTAttentionOptions()
                            .heads(1)
                            .head_dim(4)
                            .features(4)
                            .rpe_features(r)
                            .family(Family::kLocal)
                            .rpe_scale(1.5)
                            .proposal(Proposal::kCauchy)
                            .proposal_sigma(0.5));
    double total = 0.0;
    for (int d = 0; d < 20; ++d) {
      flt->redraw(100 + d);
      total += (flt->approximate_mask(positions) - flt->exact_mask(positions))
                   .abs()
                   .max()
                   .item<double>();
    }
    errors.push_back(total / 20);
  }
  std::printf("FLT box mask error r=256 %.3f r=4096 %.3f (f(0) = 1)\n", errors[0], errors[1]);
  EXPECT_GT(errors[1], 0.25 * errors[0]);  // r^{-1/2} would give 0.25x
}

// proposal_density is the p of a_t = g(xi_t) / p(xi_t): a density (integrates to 1 in 1-D), and
// the features use it: N^ at offset 0 is the mean of g / p over the drawn frequencies.
TEST_F(FLT, ProposalDensityIsTheImportanceDenominator) {
  const auto grid = torch::arange(-400.0, 400.0 + 5e-3, 1e-2, torch::kDouble).view({-1, 1});
  for (auto proposal : {Proposal::kGaussian, Proposal::kCauchy}) {
    auto flt = make_flt(base_options().heads(1).proposal(proposal).proposal_sigma(0.7));
    const double mass = torch::trapezoid(flt->proposal_density(grid), 1e-2).item<double>();
    // Cauchy: the tails beyond |xi| = 400 hold 2 s / (400 pi) of the mass.
    EXPECT_NEAR(mass, proposal == Proposal::kGaussian ? 1.0 : 1.0 - 2 * 0.7 / (400 * M_PI), 1e-4);
    const auto xi = flt->frequencies()[0];  // (r, l)
    const double mean_a = (flt->spectrum(xi)[0] / flt->proposal_density(xi)).mean().item<double>();
    const auto mask = flt->approximate_mask(torch::zeros({1, 1}, torch::kDouble));
    EXPECT_NEAR(mask.item<double>(), mean_a, 1e-12);
  }
  expect_error(
      [&] {
        make_flt(base_options())->proposal_density(torch::zeros({3, 2}));
      },
      {"xi must have shape (..., 1)"});
}

// The closed-form f is the inverse Fourier transform of g: integral g(xi) cos(2 pi xi delta) dxi by
// the trapezoid rule on [-40, 40] with step 1e-3, for the 1-D families whose g is integrable.
TEST_F(FLT, ClosedFormsAreInverseTransforms) {
  const auto xi = torch::arange(-40.0, 40.0 + 5e-4, 1e-3, torch::kDouble).view({-1, 1});
  const auto delta = torch::tensor({0.0, 0.7, 1.3, 2.6, 4.1}, torch::kDouble).view({-1, 1});
  const std::vector<std::pair<Family, int64_t>> families = {
      {Family::kGaussianMixture, 1}, {Family::kLocal, 2},         {Family::kLocal, 3},
      {Family::kGaussianKernel, 1},  {Family::kLaplaceKernel, 1}, {Family::kCauchyKernel, 1},
      {Family::kGaussianBasis, 1}};
  for (const auto& [family, k] : families) {
    const double scale =
        family == Family::kGaussianMixture ? 0.3 : (family == Family::kLocal ? 0.8 : 1.0);
    auto flt = make_flt(base_options().family(family).smoothness(k).rpe_scale(scale));
    if (family == Family::kGaussianMixture) {
      torch::NoGradGuard no_grad;
      flt->rpe->means.fill_(0.2);  // exercise the cos(2 pi mu.x) factor
    }
    const auto g = flt->spectrum(xi);                                                      // (H, N)
    const auto weights = torch::cos(2.0 * M_PI * xi.view({1, -1}) * delta.view({-1, 1}));  // (5, N)
    auto integrand = g.unsqueeze(1) * weights.unsqueeze(0);  // (H, 5, N)
    const auto integral =
        (integrand.sum(-1) - 0.5 * (integrand.select(-1, 0) + integrand.select(-1, -1))) * 1e-3;
    // g ~ xi^{-2} (Laplace, local k = 2): the tail beyond |xi| = 40 is ~ 2 * 2 lambda / (4 pi^2
    // lambda^2 40) = 2.5e-3 (Laplace) and ~ 2 w / (pi^2 40) = 2.5e-3 (local); faster-decaying g are
    // exact to 2e-5.
    const bool slow_tail = family == Family::kLaplaceKernel || (family == Family::kLocal && k == 2);
    const double atol = slow_tail ? 5e-3 : 2e-5;
    EXPECT_TRUE(all_close(integral, flt->rpe_function(delta), 1e-4, atol))
        << fa::spectrum_family_name(family) << " k=" << k;
  }
  // k = 2 is the triangle (2v - |x|)_+ per component, k = 1 the box.
  auto tri =
      make_flt(base_options().family(Family::kLocal).smoothness(2).components(1).rpe_scale(1.5));
  const auto d = torch::tensor({0.0, 1.0, 2.9, 3.5}, torch::kDouble).view({-1, 1});
  EXPECT_TRUE(all_close(tri->rpe_function(d)[0],
                        torch::tensor({3.0, 2.0, 0.1, 0.0}, torch::kDouble), 1e-12, 1e-12));
  auto box =
      make_flt(base_options().family(Family::kLocal).smoothness(1).components(1).rpe_scale(1.5));
  EXPECT_TRUE(
      torch::equal(box->rpe_function(d)[0], torch::tensor({1.0, 1.0, 0.0, 0.0}, torch::kDouble)));
}

// A negative spectrum weight gives a negative mask (the public code squares g / p on both sides and
// can only produce N^ >= 0 on the diagonal).
TEST_F(FLT, NegativeSpectrumGivesNegativeMask) {
  auto flt = make_flt(base_options().rpe_features(4096).rpe_weight(-1.0).proposal_sigma(0.3));
  const auto positions = positions_of_dim(1);
  const auto exact = flt->exact_mask(positions);
  EXPECT_NEAR(exact[0][0][0][0].item<double>(), -1.0, 1e-6);  // weights are float parameters
  const auto approx = flt->approximate_mask(positions);
  const auto diagonal = torch::diagonal(approx, 0, -2, -1);
  EXPECT_LT(diagonal.max().item<double>(), 0.0);
  // Within Bernstein's bound over the 2 heads x 16^2 pairs at a 1e-6 chance of a false failure
  // (rpe_bernstein_bound), in place of an unsourced 0.15.
  const double pairs = 2.0 * 16.0 * 16.0;
  const double bound = rpe_bernstein_bound(flt, pairs, 1e-6);
  std::printf("  negative spectrum, r = 4096: max error %.4f, Bernstein bound %.4f\n",
              (approx - exact).abs().max().item<double>(), bound);
  EXPECT_LT((approx - exact).abs().max().item<double>(), bound);
  // Mixed signs: f = w1 G1 + w2 G2 with w2 < 0 gives a mask negative away from the diagonal.
  auto mixed = make_flt(base_options().rpe_features(4096).proposal_sigma(0.3));
  {
    torch::NoGradGuard no_grad;
    mixed->rpe->weights.select(1, 1).mul_(-1.5);
  }
  const auto exact_mixed = mixed->exact_mask(positions);
  EXPECT_LT(exact_mixed.min().item<double>(), -0.05);
  const double mixed_bound = rpe_bernstein_bound(mixed, pairs, 1e-6);
  const double mixed_error =
      (mixed->approximate_mask(positions) - exact_mixed).abs().max().item<double>();
  std::printf("  mixed signs, r = 4096: max error %.4f, Bernstein bound %.4f\n", mixed_error,
              mixed_bound);
  EXPECT_LT(mixed_error, mixed_bound);
}

// With large m and r, FLT attention approaches exact RPE-masked softmax attention, and the error
// falls from (m, r) = (16, 8) to (4096, 256); compared with softmax without the mask. Hyperbolic
// FAVOR+ and |q|^2 / sqrt(D) ~ 0.25: the FAVOR+ error falls slowly for larger inputs (measured with
// q ~ 0.5 N(0,1): 0.15 at m = 4096), the variance regime of PEERS.md.
TEST_F(FLT, ApproachesExactRpeMaskedSoftmax) {
  const auto q = torch::randn({1, 2, 24, 8}, torch::kDouble) * 0.3;
  const auto k = torch::randn({1, 2, 24, 8}, torch::kDouble) * 0.3;
  const auto v = torch::randn({1, 2, 24, 3}, torch::kDouble);
  for (bool causal : {false, true}) {
    fa::AttentionCall call;
    call.causal = causal;
    std::vector<double> errors;
    double unmasked = 0.0;
    for (auto [m, r] : std::vector<std::pair<int64_t, int64_t>>{{16, 8}, {4096, 256}}) {
      double total = 0.0;
      for (int s = 0; s < 2; ++s) {
        auto flt = make_flt(fa::FLTAttentionOptions()
                                .heads(2)
                                .head_dim(8)
                                .features(m)
                                .rpe_features(r)
                                .family(Family::kGaussianKernel)
                                .rpe_scale(2.0)
                                .proposal_sigma(0.3)
                                .kind(fa::FeatureKind::kHyperbolic)
                                .seed(30 + s));
        const auto exact = torch::matmul(flt->exact_attention(q, k, call), v);
        total += ((flt(q, k, v, call) - exact).norm() / exact.norm()).item<double>();
        if (s == 0) {
          unmasked = ((torch::matmul(
                           torch::softmax(
                               torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(8.0) +
                                   (causal ? torch::full({24, 24}, -1e300, torch::kDouble).triu(1)
                                           : torch::zeros({24, 24}, torch::kDouble)),
                               -1),
                           v) -
                       exact)
                          .norm() /
                      exact.norm())
                         .item<double>();
        }
      }
      errors.push_back(total / 2);
    }
    std::printf(
        "FLT vs exact RPE-masked softmax (causal=%d): m,r=16,8 %.4f  m,r=4096,256 %.4f  "
        "(softmax without the mask %.4f)\n",
        causal, errors[0], errors[1], unmasked);
    EXPECT_LT(errors[1], errors[0] / 3.0);
    EXPECT_LT(errors[1], 0.1);
    EXPECT_LT(errors[1], unmasked / 3.0);
  }
}

// Gradients w.r.t. every spectrum parameter are non-zero at initialisation and match finite
// differences.
TEST_F(FLT, SpectrumGradientsNonZeroAtInitAndMatchFiniteDifferences) {
  for (auto family : {Family::kGaussianMixture, Family::kLocal, Family::kGaussianKernel,
                      Family::kLaplaceKernel, Family::kCauchyKernel, Family::kGaussianBasis}) {
    auto flt = make_flt(fa::FLTAttentionOptions()
                            .heads(2)
                            .head_dim(2)
                            .features(6)
                            .rpe_features(3)
                            .family(family)
                            .rpe_scale(family == Family::kGaussianMixture ? 0.2 : 1.0)
                            .proposal_sigma(0.5)
                            .learn_proposal(true));
    const auto q = torch::randn({1, 2, 5, 2}, torch::kDouble);
    const auto k = torch::randn({1, 2, 5, 2}, torch::kDouble);
    const auto v = torch::randn({1, 2, 5, 2}, torch::kDouble);
    std::vector<torch::Tensor> params;
    for (auto& p : flt->rpe->parameters()) params.push_back(p);
    params.push_back(flt->log_proposal_sigma);
    flt(q, k, v).pow(2).sum().backward();
    for (size_t i = 0; i < params.size(); ++i) {
      ASSERT_TRUE(params[i].grad().defined()) << fa::spectrum_family_name(family) << " param " << i;
      EXPECT_GT(params[i].grad().abs().min().item<double>(), 0.0)
          << fa::spectrum_family_name(family) << " param " << i
          << " has a zero gradient entry at init";
      params[i].mutable_grad() = torch::Tensor();
    }
    expect_gradients_match([&](const std::vector<torch::Tensor>&) { return flt(q, k, v); }, params,
                           1e-6, 1e-5, 1e-8);
  }
}

TEST_F(FLT, GradientsForInputsMatchFiniteDifferences) {
  for (bool causal : {false, true}) {
    auto flt = make_flt(base_options().head_dim(3).features(8).rpe_features(4));
    expect_attention_gradients(flt, {1, 2, 6, 3}, 2, causal);
  }
}

TEST_F(FLT, CausalIgnoresFutureAndStreamingEqualsBatch) {
  auto flt = make_flt(base_options().features(32).rpe_features(16).proposal_sigma(0.3));
  const auto q = torch::randn({2, 2, 90, 4}, torch::kDouble);
  const auto k = torch::randn({2, 2, 90, 4}, torch::kDouble);
  const auto v = torch::randn({2, 2, 90, 3}, torch::kDouble);
  fa::AttentionCall call;
  call.causal = true;
  const auto batch = flt(q, k, v, call);
  auto k2 = k.clone(), v2 = v.clone();
  k2.narrow(2, 50, 40).mul_(4.0);
  v2.narrow(2, 50, 40).normal_();
  EXPECT_TRUE(torch::equal(batch.narrow(2, 0, 50), flt(q, k2, v2, call).narrow(2, 0, 50)));
  EXPECT_TRUE(all_close(batch, torch::matmul(flt->materialize(q, k, call), v), 1e-10, 1e-12));
  expect_streaming_equals_causal_batch(flt, q, k, v, "1-D positions");
  // Explicit 2-D positions, streamed in chunks of one token.
  auto flt2 = make_flt(base_options().position_dim(2));
  const auto pos = torch::randn({90, 2}, torch::kDouble) * 3.0;
  call.positions = pos;
  const auto batch2 = flt2(q, k, v, call);
  fa::LinearAttentionState state2;
  std::vector<torch::Tensor> outs;
  for (int64_t t = 0; t < 90; ++t) {
    flt2->append(state2, k.narrow(2, t, 1), v.narrow(2, t, 1), pos.narrow(0, t, 1));
    outs.push_back(flt2->read(state2, q.narrow(2, t, 1), pos.narrow(0, t, 1)));
  }
  EXPECT_TRUE(all_close(torch::cat(outs, 2), batch2, 1e-10, 1e-10));
}

// Streaming inputs that do not fit the state, or positions that do not fit the module, are rejected
// with a message naming the shapes (batch 3 after batch 2 failed inside a broadcast).
// Causal FLT at |q|, |k| of 1e2 and 1e4 in float: the forward was finite, but the gradients of q
// and of the spectrum were inf and NaN (the keys' features reach e^70 above the first key's shift,
// and the old absolute normaliser floor made d out / d phi_q ~ e^70 / 1e-30 overflow; favor_floor
// in feature_map.h). Forward and every gradient stay finite, causal or not, and the materialised
// matrix and streaming use the same floor as the forward.
TEST_F(FLT, LargeInputs_FiniteGradients) {
  fa::FLTAttention flt(base_options());
  // The feature map's input columns before q, k are the position features N = trig sqrt(|a_t| / r)
  // (a_t = g(xi_t) / p(xi_t), Thm 4.1; |trig| <= 1): their largest magnitude enters the rounding
  // bound of the logits (attention_module_util.h).
  double position_bound = 0.0;
  {
    torch::NoGradGuard no_grad;
    const auto xi = flt->frequencies();  // (H, r, l)
    const double r = static_cast<double>(base_options().rpe_features());
    for (int64_t h = 0; h < xi.size(0); ++h) {
      const auto a = flt->spectrum(xi[h])[h] / flt->proposal_density(xi[h]);  // (r)
      position_bound = std::max(position_bound, std::sqrt(a.abs().max().item<double>() / r));
    }
  }
  for (double scale : {1e2, 1e4}) {
    for (bool causal : {false, true}) {
      expect_finite_and_consistent_at_scale(
          flt, 4, scale, causal, "scale " + std::to_string(scale) + (causal ? " causal" : ""),
          position_bound);
    }
  }
}

TEST_F(FLT, Streaming_MismatchNamesTheShapes) {
  auto flt = make_flt(base_options());
  fa::LinearAttentionState state;
  const auto opts = torch::TensorOptions().dtype(torch::kDouble);
  flt->append(state, torch::randn({2, 2, 3, 4}, opts), torch::randn({2, 2, 3, 5}, opts));
  expect_streaming_mismatches_named(flt, state, "FLTAttention", 2, 2, 4, 5);
  expect_error(
      [&] {
        flt->read(state, torch::randn({2, 2, 4, 4}, opts));
      },
      {"FLTAttention::read", "4 queries", "3 tokens"});
  EXPECT_EQ(state.steps, 3);
  EXPECT_EQ(flt->read(state, torch::randn({2, 2, 1, 4}, opts)).sizes(),
            torch::IntArrayRef({2, 2, 1, 5}));
}

// Per-head spectra: changing head 1's parameters changes head 1's output only; positions of
// dimension 1, 2 and 3, per batch or shared.
TEST_F(FLT, PerHeadSpectraAndPositionsOfAnyDimension) {
  auto flt = make_flt(base_options());
  const auto q = torch::randn({2, 2, 10, 4}, torch::kDouble);
  const auto v = torch::randn({2, 2, 10, 3}, torch::kDouble);
  const auto before = flt(q, q, v);
  {
    torch::NoGradGuard no_grad;
    flt->rpe->weights[1].mul_(3.0);
  }
  const auto after = flt(q, q, v);
  EXPECT_TRUE(torch::equal(before.select(1, 0), after.select(1, 0)));
  EXPECT_FALSE(torch::equal(before.select(1, 1), after.select(1, 1)));
  for (int64_t l : {1, 2, 3}) {
    auto f = make_flt(base_options().position_dim(l).family(Family::kGaussianBasis).rpe_scale(0.5));
    fa::AttentionCall call;
    call.positions = torch::randn({2, 10, l}, torch::kDouble);  // per batch element
    EXPECT_EQ(f(q, q, v, call).sizes(), torch::IntArrayRef({2, 2, 10, 3}));
    EXPECT_EQ(f->exact_mask(call.positions).sizes(), torch::IntArrayRef({2, 2, 10, 10}));
    EXPECT_EQ(f->approximate_mask(call.positions).sizes(), torch::IntArrayRef({2, 2, 10, 10}));
    EXPECT_EQ(f->spectrum(torch::randn({7, l}, torch::kDouble)).sizes(),
              torch::IntArrayRef({2, 7}));
    EXPECT_EQ(f->rpe_function(torch::randn({7, l}, torch::kDouble)).sizes(),
              torch::IntArrayRef({2, 7}));
    // The 1-D default (token indices) equals explicit indices.
    if (l == 1) {
      fa::AttentionCall indices;
      indices.positions = torch::arange(10, torch::kDouble).view({10, 1});
      EXPECT_TRUE(torch::equal(f(q, q, v), f(q, q, v, indices)));
    }
  }
}

TEST_F(FLT, SaveLoadRedrawAndParameterCount) {
  auto flt = make_flt(base_options());
  const auto q = torch::randn({1, 2, 10, 4}, torch::kDouble);
  const auto v = torch::randn({1, 2, 10, 3}, torch::kDouble);
  expect_redraw_only_on_request(flt, make_flt(base_options().seed(9)), q, v, "flt_module.pt");
  // RPE parameters: (2 + l) T per head for the mixture; under 0.03M in a paper-sized configuration
  // (12 heads, T = 16 components, 3-D positions: 12 * 16 * 5 = 960).
  EXPECT_EQ(flt->rpe_parameter_count(), 2 * (2 + 1) * 2);
  auto big = fa::FLTAttention(
      fa::FLTAttentionOptions().heads(12).head_dim(64).components(16).position_dim(3));
  EXPECT_EQ(big->rpe_parameter_count(), 960);
  EXPECT_LT(big->rpe_parameter_count(), 30000);
  EXPECT_EQ(big->parameter_count(), big->rpe_parameter_count());
}

TEST_F(FLT, OptionsAndContainers) {
  const auto options = fa::FLTAttentionOptions()
                           .features(24)
                           .rpe_features(12)
                           .family(Family::kLocal)
                           .smoothness(2)
                           .components(3)
                           .position_dim(2)
                           .proposal(Proposal::kCauchy)
                           .seed(8);
  fa::MultiheadAttention mha(fa::MultiheadAttentionOptions(32, 4).attention(options));
  auto* flt = dynamic_cast<fa::FLTAttentionImpl*>(&mha->attention());
  ASSERT_NE(flt, nullptr);
  EXPECT_EQ(flt->name(), "flt");
  EXPECT_EQ(flt->options.features(), 24);
  EXPECT_EQ(flt->options.rpe_features(), 12);
  EXPECT_EQ(flt->options.family(), Family::kLocal);
  EXPECT_EQ(flt->options.smoothness(), 2);
  EXPECT_EQ(flt->options.components(), 3);
  EXPECT_EQ(flt->options.position_dim(), 2);
  EXPECT_EQ(flt->options.proposal(), Proposal::kCauchy);
  EXPECT_EQ(flt->options.heads(), 4);
  EXPECT_EQ(flt->options.head_dim(), 8);
  EXPECT_EQ(flt->feature_map->options.input_dim(), 2 * 12 + 8);
  for (auto f : {Family::kGaussianMixture, Family::kLocal, Family::kGaussianKernel,
                 Family::kLaplaceKernel, Family::kCauchyKernel, Family::kGaussianBasis}) {
    EXPECT_EQ(fa::spectrum_family_from_name(fa::spectrum_family_name(f)), f);
  }
  fa::AttentionCall call;
  call.positions = torch::randn({7, 2});
  const auto x = torch::randn({2, 7, 32});
  EXPECT_EQ(mha(x, call).sizes(), torch::IntArrayRef({2, 7, 32}));
  EXPECT_EQ(mha->attention_weights(x, call).sizes(), torch::IntArrayRef({2, 4, 7, 7}));
}

TEST_F(FLT, Validation_NamesTheBadValue) {
  expect_error([] { fa::FLTAttention(base_options().features(0)); },
               {"features (m) must be positive", "0"});
  expect_error([] { fa::FLTAttention(base_options().rpe_features(-2)); },
               {"rpe_features (r) must be positive", "-2"});
  expect_error([] { fa::FLTAttention(base_options().components(0)); },
               {"components (T) must be positive", "0"});
  expect_error([] { fa::FLTAttention(base_options().proposal_sigma(-0.5)); },
               {"proposal_sigma must be positive", "-0.5"});
  expect_error([] { fa::FLTAttention(base_options().rpe_scale(-1.5)); }, {"rpe_scale", "-1.5"});
  expect_error([] { fa::FLTAttention(base_options().eps(NAN)); },
               {"FLTAttention: eps must be positive and finite", "got nan"});
  expect_error([] { fa::FLTAttention(base_options().eps(INFINITY)); },
               {"FLTAttention: eps must be positive and finite", "got inf"});
  expect_error([] { fa::FLTAttention(base_options().rpe_weight(NAN)); },
               {"FLTAttention: rpe_weight must be finite", "got nan"});
  expect_error([] { fa::FLTAttention(base_options().heads(0)); },
               {"FLTAttention: heads must be positive", "got 0"});
  expect_error([] { fa::spectrum_family_from_name("sinc"); }, {"unknown family", "sinc"});
  auto flt = make_flt(base_options().position_dim(2));
  const auto q = torch::randn({1, 2, 5, 4}, torch::kDouble);
  fa::AttentionCall call;
  call.positions = torch::randn({5, 3}, torch::kDouble);
  expect_error([&] { flt(q, q, q, call); }, {"positions have dimension 3", "position_dim is 2"});
  call.positions = torch::randn({6, 2}, torch::kDouble);
  expect_error([&] { flt(q, q, q, call); }, {"positions have length 6"});
  expect_error(
      [&] {
        flt(torch::randn({1, 3, 5, 4}, torch::kDouble), torch::randn({1, 3, 5, 4}, torch::kDouble),
            torch::randn({1, 3, 5, 4}, torch::kDouble));
      },
      {"3 heads but heads is 2"});
}
