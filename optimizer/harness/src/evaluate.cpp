#include "flt/harness/evaluate.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "flt/detail/statistics.h"

namespace flt::harness {

using namespace flt::metatrain;
namespace {

constexpr uint64_t kTuningSeedBase = 10000;
constexpr uint64_t kEvalSeedBase = 0;
// Meta-training draws its tasks from seeds mixed with (restart, worker); evaluation instances use
// their own stream, offset so that no evaluation instance coincides with a meta-training one.
constexpr uint64_t kEvalStream = 0xE7A1ULL << 32;
// Schedule::kWarmup's length, as a fraction of the run.
constexpr double kWarmupFraction = 0.05;

using flt::detail::median;

struct Instance {
  std::unique_ptr<Task> task;
  torch::Tensor start;
  uint64_t noise_seed = 0;
};

Instance instance(const EvalTask& spec, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(kEvalStream + seed);
  Instance out;
  out.task = spec.make(gen);
  out.start = out.task->initial(gen);
  out.noise_seed = kEvalStream + 7919 * seed + 1;
  return out;
}

double final_score(const RunCurve& curve) {
  return curve.diverged ? INFINITY : curve.losses.back();
}

}  // namespace

double schedule_factor(Schedule schedule, int64_t t, int64_t steps) {
  switch (schedule) {
    case Schedule::kConstant: return 1.0;
    case Schedule::kCosine:
      return 0.5 * (1.0 + std::cos(M_PI * static_cast<double>(t) / static_cast<double>(steps)));
    case Schedule::kWarmup: {
      const double warmup = std::max(1.0, std::round(kWarmupFraction * static_cast<double>(steps)));
      return std::min(1.0, static_cast<double>(t + 1) / warmup);
    }
  }
  TORCH_CHECK(false, "schedule_factor: unknown schedule ", static_cast<int>(schedule));
}

RunCurve run_optimizer(const Task& task, const torch::Tensor& start, int64_t steps,
                       uint64_t noise_seed, const OptimizerFactory& factory, Schedule schedule,
                       const EvaluationHook& evaluation) {
  auto params = start.clone().requires_grad_(true);
  auto optimizer = factory({params});
  std::vector<double> base_lr;
  for (auto& group : optimizer->param_groups()) base_lr.push_back(group.options().get_lr());
  auto noise = at::make_generator<at::CPUGeneratorImpl>(noise_seed);
  RunCurve curve;
  const auto eval = [&] {
    torch::NoGradGuard no_grad;
    if (evaluation.before) evaluation.before(*optimizer);
    const double loss = task.eval_loss(params).item<double>();
    if (evaluation.after) evaluation.after(*optimizer);
    return loss;
  };
  const double initial = eval();
  curve.losses.push_back(initial);
  const double limit = 1e6 * std::max(std::abs(initial), 1e-12);
  for (int64_t s = 0; s < steps; ++s) {
    if (schedule != Schedule::kConstant) {
      const double factor = schedule_factor(schedule, s, steps);
      auto& groups = optimizer->param_groups();
      for (size_t g = 0; g < groups.size(); ++g) groups[g].options().set_lr(base_lr[g] * factor);
    }
    optimizer->zero_grad();
    task.loss(params, noise).backward();
    optimizer->step();
    const double loss = eval();
    if (!std::isfinite(loss) || std::abs(loss) > limit) {
      curve.diverged = true;
      curve.losses.resize(steps + 1, INFINITY);
      break;
    }
    curve.losses.push_back(loss);
  }
  return curve;
}

std::vector<double> multiplier_grid() {
  std::vector<double> grid;
  for (int k = 0; k <= 6; ++k) grid.push_back(std::pow(10.0, -1.0 + k / 3.0));
  return grid;
}

std::vector<double> learning_rate_grid() {
  std::vector<double> grid;
  for (int i = 0; i < 7; ++i) grid.push_back(std::pow(10.0, -4.0 + 0.5 * i));
  return grid;
}

std::vector<EvalTask> held_out_tasks() {
  TaskSampling wide;
  wide.hidden = 32;
  auto landscape = [](TaskFamily family, int64_t dims, int64_t steps) {
    EvalTask t;
    t.name = task_family_name(family) + "-" + std::to_string(dims) + "d";
    t.make = [family, dims](at::Generator gen) { return sample_task_with_dim(family, dims, gen); };
    t.steps = steps;
    return t;
  };
  auto network = [wide](TaskFamily family, int64_t steps) {
    EvalTask t;
    t.name = task_family_name(family);
    t.make = [family, wide](at::Generator gen) { return sample_task(family, gen, wide); };
    t.steps = steps;
    return t;
  };
  return {landscape(TaskFamily::kRastrigin, 2, 200),  landscape(TaskFamily::kRastrigin, 10, 200),
          landscape(TaskFamily::kRastrigin, 30, 200), landscape(TaskFamily::kAckley, 5, 200),
          landscape(TaskFamily::kRosenbrock, 4, 300), network(TaskFamily::kMLPClassification, 300),
          network(TaskFamily::kMLPRegression, 300),   network(TaskFamily::kTransformerLM, 300)};
}

std::vector<EvalRow> evaluate(const std::vector<EvalTask>& tasks,
                              const std::vector<Contender>& contenders,
                              const EvalOptions& options) {
  TORCH_CHECK(!contenders.empty(), "evaluate: no optimizers given");
  TORCH_CHECK(options.eval_seeds > 0 && options.tuning_seeds > 0,
              "evaluate: eval_seeds and tuning_seeds must be positive, got ", options.eval_seeds,
              " and ", options.tuning_seeds);
  std::vector<EvalRow> rows;
  for (const auto& spec : tasks) {
    std::vector<std::vector<RunCurve>> curves(contenders.size());
    std::vector<double> chosen(contenders.size());
    for (size_t c = 0; c < contenders.size(); ++c) {
      const auto& contender = contenders[c];
      double lr = contender.fixed_lr;
      if (contender.tune) {
        // Median over tuning seeds of log final loss (diverged = +inf); the best grid point wins.
        double best = INFINITY;
        for (double candidate : contender.grid.empty() ? learning_rate_grid() : contender.grid) {
          std::vector<double> scores;
          for (int64_t s = 0; s < options.tuning_seeds; ++s) {
            auto inst = instance(spec, kTuningSeedBase + s);
            const auto curve =
                run_optimizer(*inst.task, inst.start, spec.steps, inst.noise_seed,
                              contender.make(candidate), contender.schedule, contender.evaluation);
            scores.push_back(std::log(std::max(final_score(curve), 1e-300)));
          }
          const double score = median(scores);
          if (score < best) {
            best = score;
            lr = candidate;
          }
        }
      }
      chosen[c] = lr;
      for (int64_t s = 0; s < options.eval_seeds; ++s) {
        auto inst = instance(spec, kEvalSeedBase + s);
        curves[c].push_back(run_optimizer(*inst.task, inst.start, spec.steps, inst.noise_seed,
                                          contender.make(lr), contender.schedule,
                                          contender.evaluation));
      }
      if (options.progress) {
        std::fprintf(stderr, "  %-22s %-22s lr %-8.2g done\n", spec.name.c_str(),
                     contender.name.c_str(), lr);
      }
    }
    // Target: the reference's median loss at half the budget.
    std::vector<double> half;
    for (const auto& curve : curves[0]) half.push_back(curve.losses[spec.steps / 2]);
    const double target = median(half);
    for (size_t c = 0; c < contenders.size(); ++c) {
      EvalRow row;
      row.task = spec.name;
      row.contender = contenders[c].name;
      row.lr = chosen[c];
      std::vector<double> finals, reach;
      int64_t wins = 0, ties = 0;
      for (size_t s = 0; s < curves[c].size(); ++s) {
        const auto& curve = curves[c][s];
        finals.push_back(final_score(curve));
        row.diverged += curve.diverged ? 1 : 0;
        int64_t step = spec.steps + 1;
        for (int64_t i = 0; i <= spec.steps; ++i) {
          if (curve.losses[i] <= target) {
            step = i;
            break;
          }
        }
        reach.push_back(static_cast<double>(step));
        double log_ratio = 0.0;
        const double start = std::max(curve.losses[0], 1e-30);
        for (int64_t i = 1; i <= spec.steps; ++i) {
          log_ratio += std::log(std::clamp(curve.losses[i], 1e-30, 1e30) / start);
        }
        row.meta_objective += log_ratio / spec.steps / static_cast<double>(curves[c].size());
        const double mine = final_score(curve), reference = final_score(curves[0][s]);
        // (mine == reference also covers two diverged runs: inf - inf is NaN.)
        if (mine == reference ||
            std::abs(mine - reference) <=
                kTieTolerance * std::max(std::abs(mine), std::abs(reference))) {
          ++ties;
        } else if (mine < reference) {
          ++wins;
        }
      }
      row.median_final = median(finals);
      row.median_steps_to_target = median(reach);
      row.win_rate = static_cast<double>(wins) / static_cast<double>(curves[c].size());
      row.tie_rate = static_cast<double>(ties) / static_cast<double>(curves[c].size());
      for (int64_t i = 0; i <= spec.steps; ++i) {
        std::vector<double> at_step;
        for (const auto& curve : curves[c]) at_step.push_back(curve.losses[i]);
        row.median_curve.push_back(median(at_step));
      }
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

}  // namespace flt::harness
