// The tiled CUDA forward and backward (kernels/cuda/fourier_tiled.h) run on the CPU: the same
// block code the kernels run, their threads emulated one after another between barriers, against
// the double reference the nvcc harness uses. Catches tiling mistakes (ragged tiles, causal masks,
// the online max shift, the per-thread register tiles) without a GPU or nvcc.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "fourier_reference.h"
#include "fourier_tiled.h"

namespace {

namespace tiled = flt::kernels::cuda::tiled;
namespace ref = flt::kernels::cuda::reference;
using flt::kernels::fourier::FactorMode;

// Runs a phase for every thread of the block in turn: a barrier between phases for free.
template <class Block>
struct HostExec {
  std::vector<typename Block::Regs> regs;
  explicit HostExec(int threads) : regs(threads) {}
  template <class F>
  void phase(F&& f) {
    for (int t = 0; t < static_cast<int>(regs.size()); ++t) f(t, regs[t]);
  }
};

// Block over a grid of `blocks` x `bh_count` blocks, one after another, as the launcher runs it.
// Shared memory as the device gets it: 16-byte aligned, filled with garbage (NaN) first.
template <class Block, class Args>
void emulate_grid(const Args& a, int threads, int64_t blocks, int64_t bh_count) {
  EXPECT_TRUE(Block::supports(a.dim, a.dv));
  std::vector<double> shared((Block::shared_bytes(a.dim, a.dv) + 7) / 8 + 2, std::nan(""));
  for (int64_t bh = 0; bh < bh_count; ++bh) {
    for (int64_t b = 0; b < blocks; ++b) {
      HostExec<Block> ex(threads);
      Block::run(ex, shared.data(), a, b, bh);
    }
  }
}

struct Outputs {
  std::vector<double> out, row_max, row_sum;
};

// The launcher's table kernel on the host: a = r x, sin a and cos a of the queries (three blocks
// of B*H*L*D), then of the keys.
template <typename T>
std::vector<T> host_tables(const ref::Problem& p, const std::vector<T>& q, const std::vector<T>& k,
                           const std::vector<T>& r) {
  const int64_t bh_count = p.B * p.H, lk = ref::keys_of(p);
  const int64_t nq = bh_count * p.L * p.D, nk = bh_count * lk * p.D;
  std::vector<T> tables(3 * (nq + nk));
  T* kbase = &tables[3 * nq];
  for (int64_t idx = 0; idx < nq; ++idx) {
    tiled::table_entry(idx, p.H, p.L, p.D, q.data(), r.data(), &tables[0], &tables[nq],
                       &tables[2 * nq]);
  }
  for (int64_t idx = 0; idx < nk; ++idx) {
    tiled::table_entry(idx, p.H, lk, p.D, k.data(), r.data(), kbase, kbase + nk, kbase + 2 * nk);
  }
  return tables;
}

// The tiled forward over every block of the grid (B*H, query tiles), as the launcher sets it up.
template <class Cfg, typename T, FactorMode kMode>
Outputs run_tiled(const ref::Problem& p, const std::vector<double>& q, const std::vector<double>& k,
                  const std::vector<double>& v, const std::vector<double>& r) {
  using Block = tiled::ForwardBlock<Cfg, T, kMode>;
  const int64_t bh_count = p.B * p.H, lk = ref::keys_of(p);
  const int64_t nq = bh_count * p.L * p.D, nk = bh_count * lk * p.D;
  const std::vector<T> qt(q.begin(), q.end()), kt(k.begin(), k.end()), vt(v.begin(), v.end()),
      rt(r.begin(), r.end());
  std::vector<T> tables = host_tables(p, qt, kt, rt);
  T* kbase = &tables[3 * nq];
  std::vector<T> out(bh_count * p.L * p.Dv, T(-7)), row_max(bh_count * p.L, T(-7)),
      row_sum(bh_count * p.L, T(-7));
  tiled::ForwardArgs<T> a;
  a.lq = p.L, a.lk = lk;
  a.dim = static_cast<int>(p.D), a.dv = static_cast<int>(p.Dv), a.power = p.power;
  a.causal = p.causal;
  a.qa = &tables[0], a.qs = &tables[nq], a.qc = &tables[2 * nq];
  a.ka = kbase, a.ks = kbase + nk, a.kc = kbase + 2 * nk;
  a.v = vt.data(), a.out = out.data(), a.row_max = row_max.data(), a.row_sum = row_sum.data();
  const int64_t qblocks = (p.L + Cfg::kBlockQueries - 1) / Cfg::kBlockQueries;
  emulate_grid<Block>(a, Cfg::kThreads, qblocks, bh_count);
  return {
      {out.begin(), out.end()}, {row_max.begin(), row_max.end()}, {row_sum.begin(), row_sum.end()}};
}

// The tiled backward over every block of both grids (dq and dR's partials: query blocks; dk and
// dv: key blocks), from the tiled forward's outputs, as the launcher sets it up.
struct Gradients {
  std::vector<double> dq, dk, dv, dr;
};

template <class CfgQ, class CfgK, class CfgF, typename T, FactorMode kMode>
Gradients run_tiled_backward(const ref::Problem& p, const std::vector<double>& q,
                             const std::vector<double>& k, const std::vector<double>& v,
                             const std::vector<double>& r, const std::vector<double>& w) {
  const Outputs fwd = run_tiled<CfgF, T, kMode>(p, q, k, v, r);
  const int64_t bh_count = p.B * p.H, lk = ref::keys_of(p), rows = bh_count * p.L;
  const int64_t nq = bh_count * p.L * p.D, nk = bh_count * lk * p.D;
  const std::vector<T> qt(q.begin(), q.end()), kt(k.begin(), k.end()), vt(v.begin(), v.end()),
      rt(r.begin(), r.end()), gt(w.begin(), w.end());
  const std::vector<T> out(fwd.out.begin(), fwd.out.end()),
      row_max(fwd.row_max.begin(), fwd.row_max.end()),
      row_sum(fwd.row_sum.begin(), fwd.row_sum.end());
  std::vector<T> tables = host_tables(p, qt, kt, rt), delta(rows);
  T* kbase = &tables[3 * nq];
  for (int64_t i = 0; i < rows; ++i) {  // row_dot_kernel
    T acc = 0;
    for (int64_t c = 0; c < p.Dv; ++c) acc += gt[i * p.Dv + c] * out[i * p.Dv + c];
    delta[i] = acc;
  }
  const int64_t qblocks = (p.L + CfgQ::kBlockOwned - 1) / CfgQ::kBlockOwned;
  const int64_t kblocks = (lk + CfgK::kBlockOwned - 1) / CfgK::kBlockOwned;
  std::vector<T> dq(nq, T(-7)), dk(nk, T(-7)), dv(bh_count * lk * p.Dv, T(-7)),
      partial(bh_count * qblocks * p.D, T(-7)), dr(p.H * p.D, T(-7));
  tiled::BackwardArgs<T> a;
  a.heads = p.H, a.lq = p.L, a.lk = lk;
  a.dim = static_cast<int>(p.D), a.dv = static_cast<int>(p.Dv), a.power = p.power;
  a.causal = p.causal;
  a.qa = &tables[0], a.qs = &tables[nq], a.qc = &tables[2 * nq];
  a.ka = kbase, a.ks = kbase + nk, a.kc = kbase + 2 * nk;
  a.v = vt.data(), a.g = gt.data(), a.row_max = row_max.data(), a.row_sum = row_sum.data();
  a.delta = delta.data(), a.r = rt.data();
  a.dv_out = dv.data(), a.dr_partial = partial.data();
  a.grad = dq.data();
  emulate_grid<tiled::BackwardBlock<CfgQ, T, kMode, /*kOwnKeys=*/false>>(a, CfgQ::kThreads, qblocks,
                                                                         bh_count);
  a.grad = dk.data();
  emulate_grid<tiled::BackwardBlock<CfgK, T, kMode, /*kOwnKeys=*/true>>(a, CfgK::kThreads, kblocks,
                                                                        bh_count);
  for (int64_t idx = 0; idx < p.H * p.D; ++idx) {
    tiled::dr_entry(idx, p.B, p.H, qblocks, a.dim, p.power, partial.data(), rt.data(), dr.data());
  }
  return {{dq.begin(), dq.end()},
          {dk.begin(), dk.end()},
          {dv.begin(), dv.end()},
          {dr.begin(), dr.end()}};
}

struct Inputs {
  std::vector<double> q, k, v, r, w;
};

template <typename T>
Inputs make_inputs(const ref::Problem& p, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> normal(0.0, 0.6);
  std::uniform_real_distribution<double> uniform(1.0, 2.5);
  auto fill = [&](size_t n, auto& dist) {
    std::vector<double> x(n);
    for (auto& e : x) e = T(dist(gen));  // round through T so both sides see the same inputs
    return x;
  };
  Inputs in;
  in.q = fill(p.B * p.H * p.L * p.D, normal);
  in.k = fill(p.B * p.H * ref::keys_of(p) * p.D, normal);
  in.v = fill(p.B * p.H * ref::keys_of(p) * p.Dv, normal);
  in.w = fill(p.B * p.H * p.L * p.Dv, normal);
  in.r.resize(p.H * p.D);
  const double scalar_r = T(uniform(gen));
  for (auto& e : in.r) e = p.per_dim_r ? T(uniform(gen)) : scalar_r;
  return in;
}

// Compares out with the reference (scaled error) and the row statistics: log2(row_sum) + row_max
// is log2 of the row's total weight.
template <class Cfg, typename T, FactorMode kMode>
void expect_matches(const ref::Problem& p, double tolerance, unsigned seed = 7) {
  const Inputs in = make_inputs<T>(p, seed);
  std::vector<double> out, dq, dk, dv, dr, log2_total;
  ref::fourier(p, in.q, in.k, in.v, in.r, in.w, out, dq, dk, dv, dr, &log2_total);
  const Outputs got = run_tiled<Cfg, T, kMode>(p, in.q, in.k, in.v, in.r);
  const double err = ref::scaled_error(got.out, out);
  double stat_err = 0;
  for (size_t i = 0; i < log2_total.size(); ++i) {
    if (std::isinf(log2_total[i])) {
      EXPECT_EQ(got.row_sum[i], 0.0) << "row " << i << " vanished in the reference";
      continue;
    }
    stat_err = std::max(
        stat_err, std::fabs(std::log2(std::fabs(got.row_sum[i])) + got.row_max[i] - log2_total[i]));
  }
  const std::string what = "L=" + std::to_string(p.L) + " Lk=" + std::to_string(ref::keys_of(p)) +
                           " D=" + std::to_string(p.D) + " Dv=" + std::to_string(p.Dv) +
                           " p=" + std::to_string(p.power) + " causal=" + std::to_string(p.causal) +
                           " mode=" + std::to_string(static_cast<int>(kMode)) +
                           " tile=" + std::to_string(Cfg::kBlockQueries) + "x" +
                           std::to_string(Cfg::kBlockKeys);
  EXPECT_LE(err, tolerance) << what;
  // log2 of a row total: float keeps ~2^-20 relative per weight; 1e-4 in log2 is 7e-5 relative.
  EXPECT_LE(stat_err, sizeof(T) == 4 ? 1e-4 : 1e-10) << what;
  std::printf("  %-78s out %.2e  log2 total %.2e\n", what.c_str(), err, stat_err);
}

// The variants the .cu file builds (threads x, threads y, rows, keys, value chunks, fast divide),
// a small one (many ragged tiles at small L), and two value chunks (Dv up to 128).
using Q32K64 = tiled::TileConfig<16, 16, 2, 4, 1, false>;
using Q64K64 = tiled::TileConfig<16, 16, 4, 4, 1, false>;
using Q64K32 = tiled::TileConfig<16, 16, 4, 2, 1, false>;
using Q32K64T128 = tiled::TileConfig<16, 8, 4, 4, 1, false>;
using Q32K64Chunks2 = tiled::TileConfig<16, 16, 2, 4, 2, false>;
using Small = tiled::TileConfig<4, 2, 2, 2, 2, false>;  // 4 x 8 tiles, Dv <= 32

constexpr double kFloatTol = 1e-4;  // the harness allows 1e-3 on the device
constexpr double kDoubleTol = 1e-9;

/// Every forward tile shape in float (Dv <= 32 for Small) and the default shape in double.
template <FactorMode kMode>
void expect_every_tile_shape(const ref::Problem& p) {
  expect_matches<Q32K64, float, kMode>(p, kFloatTol);
  expect_matches<Q64K64, float, kMode>(p, kFloatTol);
  expect_matches<Q64K32, float, kMode>(p, kFloatTol);
  expect_matches<Q32K64T128, float, kMode>(p, kFloatTol);
  expect_matches<Small, float, kMode>(p, kFloatTol);
  expect_matches<Q32K64, double, kMode>(p, kDoubleTol);
}

TEST(FourierTiledEmulation, EvenPowerEveryTileShape) {
  expect_every_tile_shape<FactorMode::kPowerEven>({1, 2, 150, 16, 8, 4, false, true});
}

TEST(FourierTiledEmulation, CausalScalarR) {
  expect_every_tile_shape<FactorMode::kPowerEven>({2, 1, 133, 16, 8, 4, true, false});
}

TEST(FourierTiledEmulation, OddPowerOddDimensionRagged) {
  expect_every_tile_shape<FactorMode::kPowerOdd>({2, 3, 77, 13, 7, 3, true, true});
  const ref::Problem one{1, 1, 45, 5, 3, 1, false, true};  // power 1: the sign alone
  expect_matches<Q32K64, float, FactorMode::kPowerOdd>(one, kFloatTol);
}

TEST(FourierTiledEmulation, ReluAndAbs) {
  ref::Problem relu{1, 2, 90, 16, 12, 4, false, true};
  relu.mode = static_cast<int>(FactorMode::kRelu);
  expect_matches<Q32K64, float, FactorMode::kRelu>(relu, kFloatTol);
  expect_matches<Small, float, FactorMode::kRelu>(relu, kFloatTol);
  expect_matches<Q32K64, double, FactorMode::kRelu>(relu, kDoubleTol);
  relu.causal = true;
  relu.power = 3;
  expect_matches<Q64K32, float, FactorMode::kRelu>(relu, kFloatTol);
  // kAbs runs the kPowerEven kernel (|s|^p), here with an odd power.
  ref::Problem abs{1, 2, 90, 16, 12, 3, true, true};
  abs.mode = static_cast<int>(FactorMode::kAbs);
  expect_matches<Q32K64, float, FactorMode::kPowerEven>(abs, kFloatTol);
}

TEST(FourierTiledEmulation, BenchmarkHeadSizeAndWideValues) {
  expect_matches<Q32K64, float, FactorMode::kPowerEven>({1, 1, 130, 64, 64, 4, false, true},
                                                        kFloatTol);
  expect_matches<Q64K64, float, FactorMode::kPowerEven>({1, 1, 130, 64, 64, 4, true, true},
                                                        kFloatTol);
  expect_matches<Q32K64Chunks2, float, FactorMode::kPowerEven>({1, 1, 70, 33, 100, 2, false, true},
                                                               kFloatTol);
  expect_matches<Q32K64Chunks2, double, FactorMode::kPowerEven>(
      {1, 1, 70, 128, 128, 6, false, true}, kDoubleTol);
}

TEST(FourierTiledEmulation, TinyLengths) {
  for (int64_t L : {1, 2, 5}) {
    expect_matches<Q32K64, float, FactorMode::kPowerEven>({1, 2, L, 3, 2, 4, false, true},
                                                          kFloatTol);
    expect_matches<Small, float, FactorMode::kPowerOdd>({1, 1, L, 3, 5, 3, true, true}, kFloatTol);
  }
}

// Equal query and key rows (x = 0 in every dimension) weigh exactly 1 per factor, not 0/0, and
// wide arguments (|x| up to ~50) keep the closed form.
TEST(FourierTiledEmulation, EqualTokensAndWideArguments) {
  const ref::Problem p{1, 1, 40, 8, 4, 4, false, true};
  Inputs in = make_inputs<float>(p, 3);
  in.k = in.q;  // self-attention with shared projections
  for (auto& e : in.r) e = 20.0f;
  std::vector<double> out, dq, dk, dv, dr;
  ref::fourier(p, in.q, in.k, in.v, in.r, in.w, out, dq, dk, dv, dr);
  const Outputs got = run_tiled<Q32K64, float, FactorMode::kPowerEven>(p, in.q, in.k, in.v, in.r);
  EXPECT_LE(ref::scaled_error(got.out, out), kFloatTol);
}

// A NaN or infinite q poisons its own row; a NaN k every row that sees it (as the CPU kernel).
TEST(FourierTiledEmulation, NonFiniteInputsGiveNaNRows) {
  const ref::Problem p{1, 1, 50, 8, 4, 4, true, true};
  Inputs in = make_inputs<float>(p, 5);
  in.q[10 * p.D + 3] = NAN;
  in.q[20 * p.D + 1] = INFINITY;
  in.k[30 * p.D + 2] = NAN;
  const Outputs got = run_tiled<Small, float, FactorMode::kPowerEven>(p, in.q, in.k, in.v, in.r);
  for (int64_t i = 0; i < p.L; ++i) {
    const bool poisoned = i == 10 || i == 20 || i >= 30;
    for (int64_t c = 0; c < p.Dv; ++c) {
      EXPECT_EQ(std::isnan(got.out[i * p.Dv + c]), poisoned) << "row " << i << " column " << c;
    }
  }
}

// A ReLU row whose every factor product has a negative factor outputs 0 with row_sum 0.
TEST(FourierTiledEmulation, VanishedReluRowOutputsZero) {
  ref::Problem p{1, 1, 6, 1, 3, 2, false, true};
  p.mode = static_cast<int>(FactorMode::kRelu);
  Inputs in = make_inputs<float>(p, 9);
  for (auto& e : in.k) e = 0;
  in.r[0] = 1;
  in.q[2] = 4;  // x = 4 for every key: sin 4 < 0, s < 0
  const Outputs got = run_tiled<Small, float, FactorMode::kRelu>(p, in.q, in.k, in.v, in.r);
  for (int64_t c = 0; c < p.Dv; ++c) EXPECT_EQ(got.out[2 * p.Dv + c], 0.0);
  EXPECT_EQ(got.row_sum[2], 0.0);
  expect_matches<Small, float, FactorMode::kRelu>(p, kFloatTol, 9);
}

// ---- the backward ----------------------------------------------------------------------------

template <class CfgQ, class CfgK, typename T, FactorMode kMode>
void expect_gradients(const ref::Problem& p, double tolerance, unsigned seed = 7) {
  const Inputs in = make_inputs<T>(p, seed);
  std::vector<double> out, dq, dk, dv, dr;
  ref::fourier(p, in.q, in.k, in.v, in.r, in.w, out, dq, dk, dv, dr);
  const Gradients got =
      run_tiled_backward<CfgQ, CfgK, Q32K64Chunks2, T, kMode>(p, in.q, in.k, in.v, in.r, in.w);
  const double errors[] = {ref::scaled_error(got.dq, dq), ref::scaled_error(got.dk, dk),
                           ref::scaled_error(got.dv, dv), ref::scaled_error(got.dr, dr)};
  const char* names[] = {"dq", "dk", "dv", "dR"};
  const std::string what =
      "L=" + std::to_string(p.L) + " Lk=" + std::to_string(ref::keys_of(p)) +
      " D=" + std::to_string(p.D) + " Dv=" + std::to_string(p.Dv) +
      " p=" + std::to_string(p.power) + " causal=" + std::to_string(p.causal) +
      " mode=" + std::to_string(static_cast<int>(kMode)) +
      " tiles=" + std::to_string(CfgQ::kBlockOwned) + "x" + std::to_string(CfgQ::kBlockStreamed) +
      "," + std::to_string(CfgK::kBlockOwned) + "x" + std::to_string(CfgK::kBlockStreamed);
  std::printf("  %-80s", what.c_str());
  for (int e = 0; e < 4; ++e) {
    std::printf(" %s %.2e", names[e], errors[e]);
    EXPECT_LE(errors[e], tolerance) << names[e] << " " << what;
  }
  std::printf("\n");
}

// The configurations fourier_attention.cu launches (dq: 32 queries x 64 keys; dk, dv: 32 keys x
// 32 queries; wide: D or Dv above 64) and a small one.
using BwdQ = tiled::BackwardConfig<16, 16, 2, 4, 4, 1, false>;
using BwdK = tiled::BackwardConfig<16, 16, 2, 2, 4, 1, false>;
using BwdQWide = tiled::BackwardConfig<16, 16, 2, 4, 8, 2, false>;
using BwdKWide = tiled::BackwardConfig<16, 16, 2, 2, 8, 2, false>;
using BwdQDouble = tiled::BackwardConfig<16, 16, 1, 4, 4, 1, false>;  // double: one row each
using BwdKDouble = tiled::BackwardConfig<16, 16, 1, 2, 4, 1, false>;
using BwdSmall = tiled::BackwardConfig<4, 2, 2, 2, 4, 2, false>;  // D <= 16, Dv <= 32

constexpr double kFloatGradTol = 2e-4;  // the harness allows 1e-3 on the device
constexpr double kDoubleGradTol = 1e-9;

/// Every backward tile pair (Dv <= 32 for BwdSmall) in float and double.
template <FactorMode kMode>
void expect_every_gradient_tile(const ref::Problem& p) {
  expect_gradients<BwdQ, BwdK, float, kMode>(p, kFloatGradTol);
  expect_gradients<BwdSmall, BwdSmall, float, kMode>(p, kFloatGradTol);
  expect_gradients<BwdQ, BwdK, double, kMode>(p, kDoubleGradTol);
  expect_gradients<BwdQDouble, BwdKDouble, double, kMode>(p, kDoubleGradTol);
}

TEST(FourierTiledEmulation, BackwardEvenPower) {
  expect_every_gradient_tile<FactorMode::kPowerEven>({1, 2, 150, 16, 8, 4, false, true});
}

TEST(FourierTiledEmulation, BackwardCausalOddRagged) {
  expect_every_gradient_tile<FactorMode::kPowerOdd>({2, 3, 77, 13, 7, 3, true, true});
  const ref::Problem scalar{1, 2, 133, 16, 8, 4, true, false};
  expect_gradients<BwdQ, BwdK, float, FactorMode::kPowerEven>(scalar, kFloatGradTol);
}

TEST(FourierTiledEmulation, BackwardReluAbsAndWide) {
  ref::Problem relu{1, 2, 90, 16, 12, 4, true, true};
  relu.mode = static_cast<int>(FactorMode::kRelu);
  expect_gradients<BwdQ, BwdK, float, FactorMode::kRelu>(relu, kFloatGradTol);
  expect_gradients<BwdQ, BwdK, double, FactorMode::kRelu>(relu, kDoubleGradTol);
  ref::Problem abs{1, 1, 70, 16, 12, 3, false, true};
  abs.mode = static_cast<int>(FactorMode::kAbs);
  expect_gradients<BwdQ, BwdK, float, FactorMode::kPowerEven>(abs, kFloatGradTol);
  expect_gradients<BwdQ, BwdK, float, FactorMode::kPowerEven>({1, 1, 100, 64, 64, 4, false, true},
                                                              kFloatGradTol);
  expect_gradients<BwdQWide, BwdKWide, float, FactorMode::kPowerEven>(
      {1, 1, 70, 100, 128, 6, true, true}, kFloatGradTol);
  expect_gradients<BwdQWide, BwdKWide, double, FactorMode::kPowerEven>(
      {1, 1, 40, 128, 100, 2, false, true}, kDoubleGradTol);
}

TEST(FourierTiledEmulation, BackwardTinyLengths) {
  for (int64_t L : {1, 2, 5}) {
    expect_gradients<BwdQ, BwdK, float, FactorMode::kPowerEven>({1, 2, L, 3, 2, 4, false, true},
                                                                kFloatGradTol);
    expect_gradients<BwdSmall, BwdSmall, double, FactorMode::kPowerOdd>(
        {1, 1, L, 3, 5, 3, true, true}, kDoubleGradTol);
  }
}

// Cross attention: fewer or more keys than queries (the regression estimate's shape), causal too.
TEST(FourierTiledEmulation, MoreOrFewerKeysThanQueries) {
  for (const int64_t lk : {37, 201}) {
    for (const bool causal : {false, true}) {
      ref::Problem p{1, 2, 90, 16, 8, 4, causal, true};
      p.Lk = lk;
      expect_matches<Q32K64, float, FactorMode::kPowerEven>(p, kFloatTol);
      expect_gradients<BwdQ, BwdK, float, FactorMode::kPowerEven>(p, kFloatGradTol);
      p.power = 3;  // odd: the signed kernels
      expect_matches<Small, double, FactorMode::kPowerOdd>(p, kDoubleTol);
      expect_gradients<BwdSmall, BwdSmall, double, FactorMode::kPowerOdd>(p, kDoubleGradTol);
    }
  }
}

}  // namespace
