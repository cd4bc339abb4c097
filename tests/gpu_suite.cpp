// GPU test suite: every attention variant, both fused kernels and Mnemosyne (both designs) on CUDA
// tensors against CPU double-precision references (forward and every gradient), with L > 1024 keys
// and non-contiguous inputs; float16 and bfloat16 where an operator claims them (the fused
// operators' composite fallback: kernels/include/flt/kernels/*.h); tensors on a second device.
//
// A plain program, not GoogleTest: the GPU machine (scripts/gpu-check) has no GoogleTest, and one
// small translation unit keeps the CPU build's cost low. Every check prints its worst error as a
// fraction of its tolerance, so a run also measures how much margin each tolerance has.
// Exit status: 0 all checks passed, 1 a check failed (or a CUDA device is visible to a build
// without its CUDA kernels), 77 skipped (no CUDA device): ctest reports 77 as skipped, so CI on a
// CPU machine stays green.

#include <torch/cuda.h>
#include <torch/types.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "flt/attention/attention.h"
#include "flt/attention/variants.h"
#include "flt/kernels/fourier_attention.h"
#include "flt/kernels/linear_attention.h"
#include "flt/optim/mnemosyne.h"
#include "flt/runtime.h"

namespace {

using flt::attention::AttentionOptions;
using flt::kernels::FourierPhi;
using Tensors = std::vector<torch::Tensor>;

constexpr int kSkipped = 77;  // ctest's SKIP_RETURN_CODE (tests/CMakeLists.txt)
#if defined(FLT_WITH_CUDA)
constexpr bool kBuiltWithCuda = true;
#else
constexpr bool kBuiltWithCuda = false;  // CUDA tensors reach the fused operators' error branch
#endif
constexpr uint64_t kSeed = 20241120;
// Keys per sequence: above 1024, where one thread block of keys no longer covers a row.
constexpr int64_t kLength = 1100;

/// Tolerance |got - ref| <= atol * max|ref| + rtol * |ref|; atol is relative to the largest
/// reference entry because gradients of different inputs differ in scale by orders of magnitude.
struct Tolerance {
  double rtol, atol;
};
// float32: sums of ~1e3 terms and D-fold products of factors, each rounded at 6e-8. The CPU dry
// run (--device cpu, float32 vs double) uses at most 0.25 of it.
constexpr Tolerance kFloat32{1e-3, 1e-4};
// float16 and bfloat16: the composite path rounds every intermediate (the Fourier one its
// log-domain weights too), so the error grows with the reduction over the keys as a sum rounded at
// every partial result does: about sqrt(n) u for n terms at unit roundoff u (Higham & Mary's
// probabilistic bound, lambda sqrt(n) u). On an H200 (n = kLength = 1100) the worst entry is
// 0.67 sqrt(n) u in float16 (u = 2^-11) and 0.77 sqrt(n) u in bfloat16 (u = 2^-8), one constant
// for both formats; lambda = 1.5 leaves twice that error. atol (relative to max|ref|) is half of
// rtol: entries near zero come from cancelling terms of the reference's scale.
Tolerance reduced_precision(int significand_bits, int64_t reduction_length) {
  const double unit_roundoff = std::ldexp(1.0, -significand_bits);
  const double rtol = 1.5 * std::sqrt(static_cast<double>(reduction_length)) * unit_roundoff;
  return {rtol, rtol / 2};
}
const Tolerance kFloat16 = reduced_precision(11, kLength);
const Tolerance kBFloat16 = reduced_precision(8, kLength);

Tolerance tolerance_of(torch::ScalarType dtype) {
  if (dtype == torch::kHalf) return kFloat16;
  if (dtype == torch::kBFloat16) return kBFloat16;
  return kFloat32;
}

struct Report {
  int passed = 0;
  std::vector<std::string> failures;
};
Report report;

void record(bool ok, const std::string& what, const std::string& detail) {
  std::printf("  %s %s%s%s\n", ok ? "ok  " : "FAIL", what.c_str(), detail.empty() ? "" : ": ",
              detail.c_str());
  if (ok) {
    ++report.passed;
  } else {
    report.failures.push_back(what + (detail.empty() ? "" : ": " + detail));
  }
}

/// Compares `got` (any device and dtype) with the CPU double reference `ref`.
void expect_close(const std::string& what, const torch::Tensor& got, const torch::Tensor& ref,
                  Tolerance tol) {
  if (!got.defined() || !ref.defined()) {
    record(false, what, got.defined() ? "no reference value" : "no value (undefined tensor)");
    return;
  }
  if (got.sizes() != ref.sizes()) {
    record(false, what,
           "shape " + c10::str(got.sizes()) + " vs reference " + c10::str(ref.sizes()));
    return;
  }
  const auto g = got.detach().to(torch::kCPU, torch::kDouble);
  const auto r = ref.detach().to(torch::kCPU, torch::kDouble);
  if (!g.isfinite().all().item<bool>()) {
    record(false, what, "non-finite values");
    return;
  }
  const double scale = r.numel() == 0 ? 0.0 : r.abs().max().item<double>();
  const auto ratio = (g - r).abs() / (tol.atol * scale + tol.rtol * r.abs() + 1e-300);
  const double worst = ratio.numel() == 0 ? 0.0 : ratio.max().item<double>();
  std::string detail = "worst error " + c10::str(worst) + " of tolerance";
  if (worst > 1.0) {
    const int64_t at = ratio.argmax().item<int64_t>();
    detail += " at flat index " + c10::str(at) + ": " + c10::str(g.flatten()[at].item<double>()) +
              " vs " + c10::str(r.flatten()[at].item<double>()) + " (rtol " + c10::str(tol.rtol) +
              ", atol " + c10::str(tol.atol) + " x max|ref| " + c10::str(scale) + ")";
  }
  record(worst <= 1.0, what, detail);
}

/// Runs `body`; an exception is a failed check that names the case and carries the message.
void run_case(const std::string& name, const std::function<void()>& body) {
  std::printf("%s\n", name.c_str());
  try {
    body();
  } catch (const c10::Error& e) {
    record(false, name, std::string("threw: ") + e.what_without_backtrace());
  } catch (const std::exception& e) {
    record(false, name, std::string("threw: ") + e.what());
  }
}

/// How a run places its inputs: device, dtype, and whether 4-D inputs are non-contiguous views
/// (the (B, L, H, D) -> (B, H, L, D) transpose a multi-head split produces).
struct Placement {
  torch::Device device;
  torch::ScalarType dtype;
  bool strided;
};
const Placement kReference{torch::kCPU, torch::kDouble, /*strided=*/false};

/// fn(inputs) with autograd: returns {output, d sum(output * weights) / d input for each input,
/// then for each of `params`}. Inputs are CPU double, copied to the placement as leaves.
Tensors forward_backward(const std::function<torch::Tensor(const Tensors&)>& fn,
                         const Tensors& inputs, const torch::Tensor& weights, Placement at,
                         const Tensors& params = {}) {
  const auto options = torch::TensorOptions().device(at.device).dtype(at.dtype);
  Tensors leaves, args;
  for (const auto& input : inputs) {
    // Detached: the leaf is this run's own, even when .to() has nothing to convert.
    const auto x = input.detach();
    const bool strided = at.strided && x.dim() == 4;
    auto leaf =
        (strided ? x.transpose(1, 2).contiguous() : x.clone()).to(options).requires_grad_(true);
    args.push_back(strided ? leaf.transpose(1, 2) : leaf);
    leaves.push_back(leaf);
  }
  for (const auto& p : params) p.mutable_grad() = torch::Tensor();
  const auto out = fn(args);
  (out * weights.to(options)).sum().backward();
  Tensors results{out.detach()};
  for (size_t i = 0; i < leaves.size(); ++i) {
    const auto grad = leaves[i].grad();
    const bool strided = at.strided && inputs[i].dim() == 4;
    results.push_back(grad.defined() && strided ? grad.transpose(1, 2) : grad);
  }
  for (const auto& p : params) results.push_back(p.grad());
  return results;
}

/// Compares forward_backward on `at` with the CPU double reference, entry by entry.
void expect_same_run(const std::string& what, const Tensors& got, const Tensors& ref,
                     const std::vector<std::string>& names, Tolerance tol) {
  for (size_t i = 0; i < ref.size(); ++i) {
    const auto name = i == 0 ? std::string("output") : "d" + names[i - 1];
    expect_close(what + " " + name, i < got.size() ? got[i] : torch::Tensor(), ref[i], tol);
  }
}

/// The values of `x` (CPU double) that `dtype` can hold: inputs given to both runs, so the
/// comparison measures the arithmetic of the run under test, not the rounding of its inputs.
Tensors representable(Tensors x, torch::ScalarType dtype) {
  for (auto& t : x) t = t.to(dtype).to(torch::kDouble);
  return x;
}

/// q, k: (B, H, L, D), v: (B, H, L, Dv), CPU double, seeded; k and v may be longer than q.
Tensors qkv(int64_t batch, int64_t heads, int64_t lq, int64_t lk, int64_t dim, int64_t dv,
            double scale) {
  return {scale * torch::randn({batch, heads, lq, dim}, torch::kDouble),
          scale * torch::randn({batch, heads, lk, dim}, torch::kDouble),
          torch::randn({batch, heads, lk, dv}, torch::kDouble)};
}

// ---- attention variants (modules built by make_attention, as MultiheadAttention builds them) --

struct VariantCase {
  const char* name;
  AttentionOptions options;
};

std::vector<VariantCase> variant_cases() {
  namespace a = flt::attention;
  return {{"softmax", a::SoftmaxAttentionOptions()},
          {"linear", a::LinearAttentionOptions()},
          {"performer", a::PerformerAttentionOptions().features(64).seed(3)},
          {"fourier", a::FourierAttentionOptions().r_shape(a::FourierRShape::kPerHeadDimension)},
          {"flt", a::FLTAttentionOptions().features(64).rpe_features(32).seed(5)},
          {"schoenbat", a::SchoenbAttentionOptions().features(64).seed(7)}};
}

void check_variants(torch::Device device) {
  constexpr int64_t kBatch = 2, kHeads = 2, kDim = 16;
  for (const auto& variant : variant_cases()) {
    for (const bool causal : {false, true}) {
      const std::string name = std::string(variant.name) + (causal ? " causal" : " non-causal") +
                               " L=" + std::to_string(kLength) + " float32 strided on " +
                               device.str();
      run_case(name, [&] {
        torch::manual_seed(kSeed);
        const auto handle = flt::attention::make_attention(variant.options, kHeads, kDim);
        // One module's parameters and random features, copied: double on the CPU, float on CUDA.
        const auto reference = handle.module->clone();
        reference->to(torch::kDouble);
        const auto on_device = handle.module->clone(device);
        auto* ref_attention = dynamic_cast<flt::attention::Attention*>(reference.get());
        auto* dev_attention = dynamic_cast<flt::attention::Attention*>(on_device.get());
        TORCH_CHECK(ref_attention && dev_attention, "clone() lost the Attention interface");
        // Non-causal: fewer queries than keys (Lq != Lk); causal needs Lq == Lk.
        const int64_t lq = causal ? kLength : 300;
        const auto inputs = representable(
            qkv(kBatch, kHeads, lq, kLength, kDim, kDim, /*scale=*/0.5), torch::kFloat);
        const auto weights = representable(
            {torch::randn({kBatch, kHeads, lq, kDim}, torch::kDouble)}, torch::kFloat)[0];
        const auto run = [&](flt::attention::Attention* attention) {
          return [attention, causal](const Tensors& x) {
            flt::attention::AttentionCall call;
            call.causal = causal;
            return attention->forward(x[0], x[1], x[2], call);
          };
        };
        const auto ref = forward_backward(run(ref_attention), inputs, weights, kReference,
                                          reference->parameters());
        const auto got =
            forward_backward(run(dev_attention), inputs, weights,
                             {device, torch::kFloat, /*strided=*/true}, on_device->parameters());
        std::vector<std::string> names{"q", "k", "v"};
        for (const auto& p : reference->named_parameters()) names.push_back(p.key());
        expect_same_run(name, got, ref, names, kFloat32);
      });
    }
  }
}

// ---- the fused kernels, called directly --------------------------------------------------------

void check_fourier(torch::Device device, torch::ScalarType dtype, int64_t dim, FourierPhi phi,
                   int64_t power, bool causal, int64_t lq) {
  const std::string name = std::string("fourier_attention_op phi=") +
                           flt::kernels::fourier_phi_name(phi) + " p=" + std::to_string(power) +
                           (causal ? " causal" : " non-causal") + " Lq=" + std::to_string(lq) +
                           " Lk=" + std::to_string(kLength) + " D=" + std::to_string(dim) + " " +
                           c10::toString(dtype) + " strided on " + device.str();
  run_case(name, [&] {
    torch::manual_seed(kSeed);
    constexpr int64_t kBatch = 1, kHeads = 2;
    auto inputs = qkv(kBatch, kHeads, lq, kLength, dim, dim, /*scale=*/0.5);
    // r = |R| per head and dimension, around the modules' default R = 2.
    inputs.push_back(2.0 + 0.5 * torch::rand({kHeads, dim}, torch::kDouble));
    inputs = representable(inputs, dtype);
    const auto weights =
        representable({torch::randn({kBatch, kHeads, lq, dim}, torch::kDouble)}, dtype)[0];
    const auto fn = [&](const Tensors& x) {
      return flt::kernels::fourier_attention_op(x[0], x[1], x[2], x[3], power, phi, causal);
    };
    const auto ref = forward_backward(fn, inputs, weights, kReference);
    const auto got = forward_backward(fn, inputs, weights, {device, dtype, /*strided=*/true});
    expect_same_run(name, got, ref, {"q", "k", "v", "r"}, tolerance_of(dtype));
  });
}

void check_causal_linear(torch::Device device, torch::ScalarType dtype, int64_t features,
                         int64_t values) {
  const std::string name = "linear_attention_numerator causal L=" + std::to_string(kLength) +
                           " M=" + std::to_string(features) + " Dv=" + std::to_string(values) +
                           " " + c10::toString(dtype) + " strided on " + device.str();
  run_case(name, [&] {
    torch::manual_seed(kSeed);
    constexpr int64_t kBatch = 2, kHeads = 2;
    // Positive features, as the feature maps give: exp of a small Gaussian, scaled by 1/M.
    const auto feature = [&](int64_t length) {
      return torch::exp(0.3 * torch::randn({kBatch, kHeads, length, features}, torch::kDouble)) /
             static_cast<double>(features);
    };
    const auto inputs =
        representable({feature(kLength), feature(kLength),
                       torch::randn({kBatch, kHeads, kLength, values}, torch::kDouble)},
                      dtype);
    const auto weights =
        representable({torch::randn({kBatch, kHeads, kLength, values}, torch::kDouble)}, dtype)[0];
    const auto fn = [](const Tensors& x) {
      return flt::kernels::linear_attention_numerator(x[0], x[1], x[2], /*causal=*/true);
    };
    const auto ref = forward_backward(fn, inputs, weights, kReference);
    const auto got = forward_backward(fn, inputs, weights, {device, dtype, /*strided=*/true});
    expect_same_run(name, got, ref, {"phi_q", "phi_k", "v"}, tolerance_of(dtype));
  });
}

void check_fused_kernels(torch::Device device) {
  // The benchmark's shape (D = 64) in every phi the kernel has, causal and not; the largest D.
  for (const bool causal : {false, true}) {
    const int64_t lq = causal ? kLength : 300;
    check_fourier(device, torch::kFloat, 64, FourierPhi::kPower, 4, causal, lq);
    check_fourier(device, torch::kFloat, 64, FourierPhi::kAbs, 2, causal, lq);
    check_fourier(device, torch::kFloat, 64, FourierPhi::kRelu, 1, causal, lq);
    check_fourier(device, torch::kFloat, 64, FourierPhi::kPower, 3, causal, lq);  // signed weights
  }
  check_fourier(device, torch::kFloat, 128, FourierPhi::kPower, 4, /*causal=*/false, 300);
  // float16 / bfloat16: the operators' documented composite fallback on CUDA (the CPU has no
  // float16 sin or matmul: a dry run checks bfloat16 only).
  const auto low_precision = device.is_cuda()
                                 ? std::vector<torch::ScalarType>{torch::kHalf, torch::kBFloat16}
                                 : std::vector<torch::ScalarType>{torch::kBFloat16};
  for (const auto dtype : low_precision) {
    check_fourier(device, dtype, 16, FourierPhi::kPower, 4, /*causal=*/true, kLength);
    check_causal_linear(device, dtype, 32, 33);
  }
  // The chunked causal path at the width normalised attention calls it with (M = 64, Dv + 1 = 65)
  // and a wide one (M = 512, Dv = 513).
  check_causal_linear(device, torch::kFloat, 64, 65);
  check_causal_linear(device, torch::kFloat, 512, 513);

  if (!device.is_cuda()) return;  // the CPU kernel takes any D
  run_case("fourier_attention_op D=160 on " + device.str() + " names the CUDA kernel's limit", [&] {
    const auto x = torch::randn({1, 1, 8, 160}, torch::TensorOptions().device(device));
    const auto r = torch::ones({1, 160}, x.options());
    try {
      flt::kernels::fourier_attention_op(x, x, x, r, 4, FourierPhi::kPower, false);
      record(false, "D=160", "no error");
    } catch (const c10::Error& e) {
      const std::string message = e.what_without_backtrace();
      record(message.find("must be <= 128") != std::string::npos, "D=160 error names the limit",
             message.substr(0, 200));
    }
  });
}

// ---- Mnemosyne ------------------------------------------------------------------------------

/// Parameters of a small model on `device`: a vector, a matrix, and a non-contiguous matrix (a
/// transposed view, as tied weights give).
Tensors mnemosyne_params(torch::Device device) {
  torch::manual_seed(kSeed);
  const auto vector = torch::randn({1000});
  const auto matrix = torch::randn({30, 40});
  const auto transposed = torch::randn({40, 30});
  return {vector.to(device).requires_grad_(true), matrix.to(device).requires_grad_(true),
          transposed.to(device).t().detach().requires_grad_(true)};
}

/// The gradient of a fixed smooth non-convex loss, computed where the parameter lives:
/// grad = (p - 1) + 0.5 sin(3 p).
torch::Tensor loss_gradient(const torch::Tensor& p) {
  const auto x = p.detach();
  return (x - 1.0) + 0.5 * torch::sin(3.0 * x);
}

void check_mnemosyne(torch::Device device) {
  constexpr int kSteps = 30;
  const std::string name = "CoordinateMnemosyne " + std::to_string(kSteps) +
                           " steps, CUDA parameters vs CPU (composite step) on " + device.str();
  run_case(name, [&] {
    // The CPU reference takes the composite step: the same arithmetic the CUDA parameters take
    // (the fused CPU step is a CPU-only vectorised copy of it, tested against it in CPU tests).
    const auto options = flt::optim::CoordinateMnemosyneOptions(1.0).total_steps(kSteps);
    auto cpu_params = mnemosyne_params(torch::kCPU);
    auto dev_params = mnemosyne_params(device);
    flt::optim::CoordinateMnemosyne cpu_opt(
        cpu_params, flt::optim::CoordinateMnemosyneOptions(options).fused(false));
    flt::optim::CoordinateMnemosyne dev_opt(dev_params, options);
    for (int step = 1; step <= kSteps; ++step) {
      for (auto* params : {&cpu_params, &dev_params}) {
        for (auto& p : *params) p.mutable_grad() = loss_gradient(p);
      }
      cpu_opt.step();
      dev_opt.step();
      if (step == 1 || step == kSteps) {
        for (size_t i = 0; i < cpu_params.size(); ++i) {
          TORCH_CHECK(dev_params[i].device() == device, "parameter ", i, " moved to ",
                      dev_params[i].device());
          expect_close(name + " step " + std::to_string(step) + " parameter " + std::to_string(i),
                       dev_params[i], cpu_params[i], kFloat32);
        }
      }
    }
    record(dev_opt.skipped() == cpu_opt.skipped(), name + " skipped coordinates",
           std::to_string(dev_opt.skipped()) + " vs " + std::to_string(cpu_opt.skipped()));
  });
}

/// ScheduleMnemosyne (learned_schedule.h) on `device`: its fused pass (the contiguous float32
/// tensors, all in one call) and its composite step (the transposed view) against the CPU
/// composite step, with a schedule whose head and corrector are not zero (an untrained one
/// multiplies the corrector by zero and leaves its FLT memory unstepped) and a NaN gradient in one
/// coordinate; and the device's run repeated, bitwise alike.
void check_schedule(torch::Device device) {
  constexpr int kSteps = 30;
  const std::string name = "Mnemosyne tensor-schedule " + std::to_string(kSteps) +
                           " steps, fused pass on " + device.str() + " vs CPU composite step";
  run_case(name, [&] {
    namespace fo = flt::optim;
    torch::manual_seed(kSeed);
    fo::LearnedSchedule rule;
    {
      torch::NoGradGuard no_grad;
      rule->head_out->weight.normal_(0.0, 0.1);
      rule->corrector_out->weight.normal_(0.0, 0.5);
    }
    const auto options = fo::ScheduleMnemosyneOptions(1.0).total_steps(kSteps);
    struct Run {
      Tensors params;
      int64_t skipped;
    };
    const auto run = [&](torch::Device where, bool fused) {
      auto params = mnemosyne_params(where);
      fo::ScheduleMnemosyne opt(
          params, fo::ScheduleMnemosyneOptions(options).fused(fused),
          fo::LearnedSchedule(std::dynamic_pointer_cast<fo::LearnedScheduleImpl>(rule->clone())));
      for (int step = 1; step <= kSteps; ++step) {
        for (auto& p : params) p.mutable_grad() = loss_gradient(p);
        if (step == 5) params[0].mutable_grad()[3] = std::nan("");
        opt.report_loss(0.5 * params[1].detach().pow(2).mean().item<double>());
        opt.step();
      }
      return Run{params, opt.skipped()};
    };
    const auto cpu = run(torch::kCPU, /*fused=*/false);
    const auto dev = run(device, /*fused=*/true);
    const auto again = run(device, /*fused=*/true);
    for (size_t i = 0; i < cpu.params.size(); ++i) {
      TORCH_CHECK(dev.params[i].device() == device, "parameter ", i, " moved to ",
                  dev.params[i].device());
      expect_close(name + " parameter " + std::to_string(i), dev.params[i], cpu.params[i],
                   kFloat32);
      record(torch::equal(dev.params[i], again.params[i]),
             name + " parameter " + std::to_string(i) + " bitwise repeatable", "");
    }
    record(dev.skipped == cpu.skipped && cpu.skipped == 1, name + " skipped coordinates",
           std::to_string(dev.skipped) + " vs " + std::to_string(cpu.skipped) + " (expected 1)");
  });
}

// ---- a second device ------------------------------------------------------------------------

/// Everything above on device 1 while device 0 is current: a kernel that assumed device 0 would
/// launch on the wrong GPU or read another device's memory.
void check_second_device() {
  if (torch::cuda::device_count() < 2) {
    std::printf("second device: only one CUDA device: skipped\n");
    return;
  }
  const torch::Device second(torch::kCUDA, 1);
  check_fourier(second, torch::kFloat, 64, FourierPhi::kPower, 4, /*causal=*/true, kLength);
  check_causal_linear(second, torch::kFloat, 64, 65);
  check_variants(second);
  check_mnemosyne(second);
  check_schedule(second);
}

}  // namespace

int main(int argc, char** argv) {
  // --device cpu: the same checks with float32 on the CPU instead of CUDA, a dry run of the suite
  // itself (its cases, references and tolerances) on a machine without a GPU.
  const bool dry_run =
      argc == 3 && std::string(argv[1]) == "--device" && std::string(argv[2]) == "cpu";
  if (argc > 1 && !dry_run) {
    std::fprintf(stderr, "usage: %s [--device cpu]\n", argv[0]);
    return 2;
  }
  flt::init(/*quiet=*/true);
  if (!dry_run && !torch::cuda::is_available()) {
    std::printf("flt_gpu_tests: no CUDA device: skipped\n");
    return kSkipped;
  }
  if (!dry_run && !kBuiltWithCuda) {
    // A failure, not a skip: on a GPU machine a build without the kernels is the mistake this
    // suite exists to catch (a skip would let it pass unnoticed).
    std::printf(
        "flt_gpu_tests: a CUDA device is visible but FLT was built without its CUDA kernels "
        "(configure with -DFLT_WITH_CUDA=ON): FAILED\n");
    return 1;
  }
  const torch::Device first = dry_run ? torch::Device(torch::kCPU) : torch::Device(torch::kCUDA, 0);
  std::printf("flt_gpu_tests: on %s (%lld CUDA device(s))\n", first.str().c_str(),
              static_cast<long long>(torch::cuda::device_count()));
  check_fused_kernels(first);
  check_variants(first);
  check_mnemosyne(first);
  check_schedule(first);
  if (!dry_run) check_second_device();
  std::printf("\nflt_gpu_tests: %d checks passed, %zu failed\n", report.passed,
              report.failures.size());
  for (const auto& failure : report.failures) std::printf("  FAIL %s\n", failure.c_str());
  return report.failures.empty() ? 0 : 1;
}
