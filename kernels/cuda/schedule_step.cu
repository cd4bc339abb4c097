// The learned schedule's fused pass on CUDA (schedule_pass.h: the launches, the blocks, one
// thread's coordinates; flt/kernels/schedule_rule.h: the rule itself, shared with the CPU loop).
#include "flt_cuda_kernels.h"
#include "schedule_pass.h"

namespace flt::kernels::cuda {
namespace {

namespace pass = schedule_pass;
constexpr int kSums = schedule::kSums;
constexpr int kWarps = pass::kThreads / 32;

// The block's sums into thread 0, in a fixed order: a shuffle tree within each warp, then the warps
// in order.
__device__ void block_sum(double (&v)[kSums], double (&shared)[kWarps][kSums]) {
  for (int j = 0; j < kSums; ++j)
    for (int offset = 16; offset > 0; offset /= 2)
      v[j] += __shfl_down_sync(0xffffffffu, v[j], offset);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0)
    for (int j = 0; j < kSums; ++j) shared[warp][j] = v[j];
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int j = 0; j < kSums; ++j) {
      double total = 0;
      for (int w = 0; w < kWarps; ++w) total += shared[w][j];
      v[j] = total;
    }
  }
}

// One block of coordinates per CUDA block; its sums to workspace slot (launch's first + block).
__global__ void __launch_bounds__(pass::kThreads)
    schedule_pass_kernel(const pass::Launch launch, double* workspace) {
  __shared__ double shared[kWarps][kSums];
  double sums[kSums] = {0, 0, 0, 0, 0};
  pass::thread_pass(launch, blockIdx.x, threadIdx.x, sums);
  block_sum(sums, shared);
  if (threadIdx.x == 0) {
    double* slot = workspace + (launch.workspace_slot + blockIdx.x) * kSums;
    for (int j = 0; j < kSums; ++j) slot[j] = sums[j];
  }
}

// One CUDA block per tensor of the launch: its blocks' slots added in block order.
__global__ void __launch_bounds__(pass::kThreads)
    schedule_sums_kernel(const pass::Launch launch, const double* workspace, double* out) {
  __shared__ double shared[kWarps][kSums];
  const int i = blockIdx.x;
  const int64_t first = launch.workspace_slot + launch.first_block[i];
  const int64_t last = launch.workspace_slot + launch.first_block[i + 1];
  double sums[kSums] = {0, 0, 0, 0, 0};
  for (int64_t s = first + threadIdx.x; s < last; s += pass::kThreads)
    for (int j = 0; j < kSums; ++j) sums[j] += workspace[s * kSums + j];
  block_sum(sums, shared);
  if (threadIdx.x == 0)
    for (int j = 0; j < kSums; ++j) out[(launch.first_tensor + i) * kSums + j] = sums[j];
}

}  // namespace

size_t schedule_step_workspace(const ScheduleTensor* tensors, int count) {
  return static_cast<size_t>(pass::workspace_slots(tensors, count)) * kSums;
}

cudaError_t schedule_step(const schedule::RuleConstants& constants, const ScheduleTensor* tensors,
                          int count, double* sums, double* workspace, cudaStream_t stream) {
  for (const auto& launch : pass::plan(constants, tensors, count)) {
    const int64_t blocks = launch.first_block[launch.count];
    if (blocks > 0) {
      schedule_pass_kernel<<<static_cast<unsigned>(blocks), pass::kThreads, 0, stream>>>(launch,
                                                                                         workspace);
      if (const cudaError_t err = cudaGetLastError(); err != cudaSuccess) return err;
    }
    schedule_sums_kernel<<<launch.count, pass::kThreads, 0, stream>>>(launch, workspace, sums);
    if (const cudaError_t err = cudaGetLastError(); err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

}  // namespace flt::kernels::cuda
