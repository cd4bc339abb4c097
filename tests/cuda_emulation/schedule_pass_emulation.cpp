// The learned schedule's fused CUDA pass (kernels/cuda/schedule_pass.h) run on the CPU: its launch
// plan and every thread of every block in turn, the block sums added as the kernels add them
// (threads, then blocks, in order), against the rule applied coordinate by coordinate in double
// sums. Catches plan mistakes (a tensor past a launch's 48, an empty tensor, a ragged last block, a
// sums row out of place) without a GPU or nvcc.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "schedule_pass.h"

namespace {

namespace pass = flt::kernels::cuda::schedule_pass;
namespace rule = flt::kernels::schedule;

struct HostTensor {
  std::vector<float> param, grad, m, v;
};

rule::RuleConstants constants() {
  rule::RuleConstants c{};
  for (int j = 0; j < rule::kCorrectorHidden; ++j) {
    c.in_a[j] = 0.3f * (j + 1);
    c.in_b[j] = -0.2f * j;
    c.bias[j] = 0.1f * (j - 2);
    c.out[j] = 0.05f * (1 - j);
  }
  c.out_bias = 0.01f;
  c.bc1 = 1.0f / (1.0f - 0.9f * 0.9f * 0.9f);
  c.bc2 = 1.0f / (1.0f - 0.999f * 0.999f * 0.999f);
  return c;
}

std::vector<HostTensor> make_tensors(const std::vector<int64_t>& sizes, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<HostTensor> tensors;
  for (const int64_t n : sizes) {
    HostTensor t;
    for (int64_t i = 0; i < n; ++i) {
      t.param.push_back(normal(gen));
      // A NaN gradient every 997 coordinates: left unchanged and counted.
      t.grad.push_back(i % 997 == 5 ? std::numeric_limits<float>::quiet_NaN() : normal(gen));
      t.m.push_back(0.1f * normal(gen));
      t.v.push_back(0.01f + 0.01f * std::fabs(normal(gen)));
    }
    tensors.push_back(std::move(t));
  }
  return tensors;
}

std::vector<pass::Tensor> descriptors(std::vector<HostTensor>& tensors) {
  std::vector<pass::Tensor> out;
  for (size_t s = 0; s < tensors.size(); ++s) {
    auto& t = tensors[s];
    const float eta = 1e-3f * static_cast<float>(s + 1);
    out.push_back({t.param.data(),
                   t.grad.data(),
                   t.m.data(),
                   t.v.data(),
                   static_cast<int64_t>(t.param.size()),
                   {eta, 1.0f - 1e-4f, 0.5f}});
  }
  return out;
}

// The two kernels of schedule_step.cu, one thread after another.
std::vector<double> emulate(const rule::RuleConstants& c,
                            const std::vector<pass::Tensor>& tensors) {
  const int count = static_cast<int>(tensors.size());
  std::vector<double> workspace(pass::workspace_slots(tensors.data(), count) * rule::kSums, NAN);
  std::vector<double> sums(count * rule::kSums, NAN);
  for (const auto& launch : pass::plan(c, tensors.data(), count)) {
    EXPECT_LE(launch.count, pass::kTensorsPerLaunch);
    for (int64_t block = 0; block < launch.first_block[launch.count]; ++block) {
      double block_sums[rule::kSums] = {0, 0, 0, 0, 0};
      for (int thread = 0; thread < pass::kThreads; ++thread) {
        double thread_sums[rule::kSums] = {0, 0, 0, 0, 0};
        pass::thread_pass(launch, block, thread, thread_sums);
        for (int j = 0; j < rule::kSums; ++j) block_sums[j] += thread_sums[j];
      }
      for (int j = 0; j < rule::kSums; ++j)
        workspace[(launch.workspace_slot + block) * rule::kSums + j] = block_sums[j];
    }
    for (int i = 0; i < launch.count; ++i) {
      for (int j = 0; j < rule::kSums; ++j) {
        double total = 0;
        for (int64_t b = launch.first_block[i]; b < launch.first_block[i + 1]; ++b)
          total += workspace[(launch.workspace_slot + b) * rule::kSums + j];
        sums[(launch.first_tensor + i) * rule::kSums + j] = total;
      }
    }
  }
  return sums;
}

void check_against_rule(const std::vector<int64_t>& sizes) {
  const auto c = constants();
  auto tensors = make_tensors(sizes, 7);
  auto expected = tensors;  // stepped coordinate by coordinate below
  auto device = descriptors(tensors);
  const auto reference = descriptors(expected);
  const auto sums = emulate(c, device);
  for (size_t s = 0; s < sizes.size(); ++s) {
    double want[rule::kSums] = {0, 0, 0, 0, 0};
    const auto& x = reference[s];
    for (int64_t i = 0; i < x.numel; ++i) {
      const auto y = rule::step_coordinate(c, x.decision, x.grad[i], x.param[i], x.m[i], x.v[i]);
      x.param[i] = y.param;
      x.m[i] = y.m;
      x.v[i] = y.v;
      want[0] += double(y.grad) * y.d_prev;
      want[1] += double(y.grad) * y.grad;
      want[2] += double(y.d_prev) * y.d_prev;
      want[3] += double(y.param) * y.param;
      want[4] += y.ok ? 0 : 1;
    }
    // Every coordinate stepped exactly once: the same floats as the one-by-one rule.
    EXPECT_EQ(tensors[s].param, expected[s].param) << "tensor " << s << " of size " << sizes[s];
    EXPECT_EQ(tensors[s].m, expected[s].m) << "tensor " << s;
    EXPECT_EQ(tensors[s].v, expected[s].v) << "tensor " << s;
    for (int j = 0; j < rule::kSums; ++j) {
      // Only the order of the double sums differs.
      EXPECT_NEAR(sums[s * rule::kSums + j], want[j], 1e-12 * (1 + std::fabs(want[j])))
          << "tensor " << s << " sum " << j;
    }
    EXPECT_EQ(sums[s * rule::kSums + 4], std::ceil((sizes[s] - 5) / 997.0))
        << "tensor " << s << ": one NaN gradient every 997 coordinates from 5";
  }
}

TEST(SchedulePassEmulation, RaggedBlocksAndEmptyTensors) {
  check_against_rule({0, 1, pass::kBlockCoordinates - 1, pass::kBlockCoordinates,
                      pass::kBlockCoordinates + 1, 3 * pass::kBlockCoordinates + 17, 0, 5});
}

TEST(SchedulePassEmulation, MoreTensorsThanOneLaunchTakes) {
  std::vector<int64_t> sizes;
  for (int s = 0; s < 2 * pass::kTensorsPerLaunch + 3; ++s) sizes.push_back((s * 1237) % 9000);
  const auto c = constants();
  auto tensors = make_tensors(sizes, 1);
  const auto d = descriptors(tensors);
  const auto launches = pass::plan(c, d.data(), static_cast<int>(d.size()));
  ASSERT_EQ(launches.size(), 3u);
  EXPECT_EQ(launches[2].first_tensor, 2 * pass::kTensorsPerLaunch);
  EXPECT_EQ(launches[2].count, 3);
  // The launches' workspace slots follow one another.
  int64_t slot = 0;
  for (const auto& l : launches) {
    EXPECT_EQ(l.workspace_slot, slot);
    slot += l.first_block[l.count];
  }
  EXPECT_EQ(slot, pass::workspace_slots(d.data(), static_cast<int>(d.size())));
  check_against_rule(sizes);
}

TEST(SchedulePassEmulation, LaunchDescriptorFitsTheKernelParameterSpace) {
  EXPECT_LE(sizeof(pass::Launch), 4096u);
}

}  // namespace
