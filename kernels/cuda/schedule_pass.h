#pragma once
// The learned schedule's fused CUDA pass (schedule_step.cu): how a step's tensors are split into
// launches and blocks of coordinates, and what one thread of a block does. Written as
// __host__ __device__ code with no CUDA headers, so the host emulation (tests/cuda_emulation) runs
// the same indexing the kernels do.
//
// A launch takes up to kTensorsPerLaunch tensors, their descriptors passed by value as the kernel's
// parameter (no copy to the device, no synchronisation); its blocks cover each tensor's coordinates
// in runs of kBlockCoordinates, a tensor's blocks after the previous tensor's. Thread t of a block
// steps coordinates begin + t, begin + t + kThreads, ... (coalesced) and adds up their statistics
// in that order; the block's sums go to its own slot of a workspace, and a second kernel adds each
// tensor's slots in block order. Every sum therefore has one fixed order: the same bits run to run.

#include <cstdint>
#include <vector>

#include "flt/kernels/schedule_rule.h"

namespace flt::kernels::cuda::schedule_pass {

namespace rule = flt::kernels::schedule;

constexpr int kThreads = 256;
/// Coordinates per block: 16 per thread.
constexpr int64_t kBlockCoordinates = 16 * kThreads;
/// Tensors per launch: the launch's descriptor (about 3.2 KB) stays within the 4 KB of kernel
/// parameters every CUDA version accepts.
constexpr int kTensorsPerLaunch = 48;

/// One tensor of the pass: float32, contiguous, on the launching device.
struct Tensor {
  float* param;
  const float* grad;
  float* m;
  float* v;
  int64_t numel;
  rule::TensorDecision decision;
};

struct Launch {
  rule::RuleConstants constants;
  Tensor tensors[kTensorsPerLaunch];
  /// Tensor i owns blocks [first_block[i], first_block[i + 1]) of this launch (none when empty).
  int64_t first_block[kTensorsPerLaunch + 1];
  int count;
  int first_tensor;        ///< row of tensors[0] in the step's sums
  int64_t workspace_slot;  ///< slot of this launch's block 0 in the workspace
};

inline int64_t blocks_of(int64_t numel) {
  return (numel + kBlockCoordinates - 1) / kBlockCoordinates;
}

/// Workspace slots (kSums doubles each) a pass over these tensors needs: one per block.
inline int64_t workspace_slots(const Tensor* tensors, int count) {
  int64_t slots = 0;
  for (int i = 0; i < count; ++i) slots += blocks_of(tensors[i].numel);
  return slots;
}

/// The launches of a pass over `count` tensors, in order.
inline std::vector<Launch> plan(const rule::RuleConstants& constants, const Tensor* tensors,
                                int count) {
  std::vector<Launch> launches;
  int64_t slot = 0;
  for (int first = 0; first < count; first += kTensorsPerLaunch) {
    Launch l{};
    l.constants = constants;
    l.first_tensor = first;
    l.workspace_slot = slot;
    l.count = count - first < kTensorsPerLaunch ? count - first : kTensorsPerLaunch;
    l.first_block[0] = 0;
    for (int i = 0; i < l.count; ++i) {
      l.tensors[i] = tensors[first + i];
      l.first_block[i + 1] = l.first_block[i] + blocks_of(tensors[first + i].numel);
    }
    slot += l.first_block[l.count];
    launches.push_back(l);
  }
  return launches;
}

/// The tensor that owns `block` of a launch (block < first_block[count]).
FLT_RULE_INLINE int tensor_of_block(const Launch& l, int64_t block) {
  int i = 0;
  while (block >= l.first_block[i + 1]) ++i;
  return i;
}

/// Thread `thread` of `block`: steps its coordinates and adds their statistics to `sums` (in the
/// order of rule::kSums).
FLT_RULE_INLINE void thread_pass(const Launch& l, int64_t block, int thread,
                                 double (&sums)[rule::kSums]) {
  const int i = tensor_of_block(l, block);
  const Tensor& x = l.tensors[i];
  const int64_t begin = (block - l.first_block[i]) * kBlockCoordinates;
  const int64_t end = begin + kBlockCoordinates < x.numel ? begin + kBlockCoordinates : x.numel;
  for (int64_t c = begin + thread; c < end; c += kThreads) {
    const auto y =
        rule::step_coordinate(l.constants, x.decision, x.grad[c], x.param[c], x.m[c], x.v[c]);
    x.param[c] = y.param;
    x.m[c] = y.m;
    x.v[c] = y.v;
    const double g = y.grad, d = y.d_prev, p = y.param;
    sums[0] += g * d;
    sums[1] += g * g;
    sums[2] += d * d;
    sums[3] += p * p;
    sums[4] += y.ok ? 0.0 : 1.0;
  }
}

}  // namespace flt::kernels::cuda::schedule_pass
