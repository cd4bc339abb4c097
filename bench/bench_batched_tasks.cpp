// Meta-training's inner steps per second: the per-instance loop (each task instance through
// flt::optim::ScheduleMnemosyne in a plain training loop, as episode ES ran them) against the
// batched engine (K instances as one computation, batched_run.h) on the same instances of each
// family, side by side in one run; then the same for an ES generation's episode, every candidate's
// schedule in one batched run.
//   build/bench/bench_batched_tasks [INSTANCES=64] [STEPS=100] [ALONE=4]
// ALONE: how many of the K instances the per-instance loop runs (its rate does not depend on K).
#include <ATen/ATen.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_util.h"
#include "flt/metatrain/batched_run.h"
#include "flt/metatrain/batched_tasks.h"

namespace fm = flt::metatrain;

using flt::bench::seconds_of;

int main(int argc, char** argv) {
  const auto info = flt::init(/*quiet=*/true);
  const int64_t instances = argc > 1 ? std::stoll(argv[1]) : 64;
  const int64_t steps = argc > 2 ? std::stoll(argv[2]) : 100;
  const int64_t alone = argc > 3 ? std::min<int64_t>(std::stoll(argv[3]), instances) : 4;
  std::printf("machine: %s\n", flt::bench::machine_line(info).c_str());
  std::printf("untrained schedule (the hand rule), %lld steps, rescaling on, K = %lld\n\n",
              static_cast<long long>(steps), static_cast<long long>(instances));
  std::printf(
      "| family (shape) | coordinates / instance | per-instance loop, steps/s | engine, "
      "steps/s | engine / loop |\n|---|---|---|---|---|\n");
  fm::EpisodeSpec spec;
  spec.steps = steps;
  spec.seed = 5;
  spec.known_length = true;
  const flt::optim::LearnedSchedule schedule;
  std::vector<uint64_t> seeds;
  for (int64_t k = 0; k < instances; ++k) seeds.push_back(1000 + static_cast<uint64_t>(k));
  for (auto family : fm::all_batched_families()) {
    for (uint64_t shape_seed : {1, 2}) {
      const auto task = fm::make_batched_task(family, shape_seed, seeds, /*rescale=*/true);
      std::vector<uint64_t> first(seeds.begin(), seeds.begin() + alone);
      const auto few = fm::make_batched_task(family, shape_seed, first, /*rescale=*/true);
      fm::batched_schedule_final_losses(*few, spec, schedule);  // warm-up: data, allocator
      const double loop =
          seconds_of([&] { fm::per_instance_schedule_final_losses(*few, spec, schedule); });
      const double engine =
          seconds_of([&] { fm::batched_schedule_final_losses(*task, spec, schedule); });
      const double loop_rate = static_cast<double>(alone * steps) / loop;
      const double engine_rate = static_cast<double>(instances * steps) / engine;
      std::printf("| %s | %lld | %.0f | %.0f | %.1fx |\n", task->name().c_str(),
                  static_cast<long long>(task->instance_dim()), loop_rate, engine_rate,
                  engine_rate / loop_rate);
      std::fflush(stdout);
    }
  }
  // An ES generation's episode as the campaign runs it: 34 candidates (the hand rule, theta and 16
  // antithetic pairs; here every candidate is the hand rule moved by noise of 0.05, so each reads
  // its memory and its corrector as a trained one does) on 4 instances, as one batched run in
  // which each candidate's block of instances takes its own schedule, against the per-instance
  // loop running those schedules one instance at a time (2 candidates x ALONE instances of it:
  // its rate does not depend on how many).
  constexpr int64_t kCandidates = 34, kInstances = 4;
  const flt::optim::LearnedSchedule shape(
      flt::optim::LearnedScheduleOptions().key_dim(2).value_dim(2).hidden(4));
  std::vector<flt::optim::LearnedSchedule> candidates;
  torch::manual_seed(0);
  for (int64_t c = 0; c < kCandidates; ++c) {
    auto copy = std::dynamic_pointer_cast<flt::optim::LearnedScheduleImpl>(shape->clone());
    torch::NoGradGuard no_grad;
    for (auto& p : copy->parameters()) p.add_(0.05 * torch::randn_like(p));
    candidates.emplace_back(copy);
  }
  std::printf(
      "\nAn ES generation's episode: %lld candidates x %lld instances, each candidate's schedule "
      "trained-like\n\n| family (shape) | per-instance loop, steps/s | engine, steps/s | engine / "
      "loop |\n|---|---|---|---|\n",
      static_cast<long long>(kCandidates), static_cast<long long>(kInstances));
  for (auto family : fm::all_batched_families()) {
    const std::vector<uint64_t> own(seeds.begin(), seeds.begin() + kInstances);
    std::vector<uint64_t> repeated;
    for (int64_t c = 0; c < kCandidates; ++c)
      repeated.insert(repeated.end(), own.begin(), own.end());
    const auto task = fm::make_batched_task(family, 1, repeated, /*rescale=*/true);
    const auto few = fm::make_batched_task(
        family, 1, std::vector<uint64_t>(own.begin(), own.begin() + std::min(alone, kInstances)),
        /*rescale=*/true);
    const double loop = seconds_of([&] {
      for (int c = 0; c < 2; ++c) fm::per_instance_schedule_final_losses(*few, spec, candidates[c]);
    });
    const double engine =
        seconds_of([&] { fm::batched_schedule_final_losses(*task, spec, candidates); });
    const double loop_rate = static_cast<double>(2 * few->instances() * steps) / loop;
    const double engine_rate = static_cast<double>(task->instances() * steps) / engine;
    std::printf("| %s | %.0f | %.0f | %.1fx |\n", task->name().c_str(), loop_rate, engine_rate,
                engine_rate / loop_rate);
    std::fflush(stdout);
  }
  return 0;
}
