// Meta-training's inner steps per second: the per-instance loop (each task instance through
// flt::optim::ScheduleMnemosyne in a plain training loop, as episode ES ran them) against the
// batched engine (K instances as one computation, batched_run.h) on the same instances of each
// family, side by side in one run. Also today's per-task loop on the families the episode-ES
// campaigns drew from (schedule_final_loss on tasks.h instances), for scale.
//   build/bench/bench_batched_tasks [INSTANCES=64] [STEPS=100] [ALONE=4]
// ALONE: how many of the K instances the per-instance loop runs (its rate does not depend on K).
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_util.h"
#include "flt/metatrain/batched_run.h"
#include "flt/metatrain/batched_tasks.h"
#include "flt/metatrain/episode_es.h"
#include "flt/metatrain/tasks.h"

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
  // The families the episode-ES campaigns trained on, run as they ran them (one instance at a
  // time, its own length): inner steps per second of that loop, for scale.
  std::printf("\n| before the engine: episode ES's loop on | steps/s |\n|---|---|\n");
  for (auto family : {fm::TaskFamily::kTabular, fm::TaskFamily::kMLPClassification,
                      fm::TaskFamily::kFashionMLP, fm::TaskFamily::kTextGRU}) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(7);
    int64_t done = 0;
    const double took = seconds_of([&] {
      for (int i = 0; i < 3; ++i) {
        const auto task = fm::sample_task(family, gen);
        fm::schedule_final_loss(*task, spec, schedule);
        done += spec.steps;
      }
    });
    std::printf("| %s | %.0f |\n", fm::task_family_name(family).c_str(),
                static_cast<double>(done) / took);
  }
  return 0;
}
