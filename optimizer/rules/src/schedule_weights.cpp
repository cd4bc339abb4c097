// A learned schedule's weights files (save_schedule, load_schedule and their archive forms) and
// the memory's weights over step distance (memory_weights): learned_schedule.h.
#include <ATen/ATen.h>
#include <torch/serialize.h>

#include <string>

#include "flt/optim/learned_schedule.h"
#include "pretrained_weights.h"

namespace flt::optim {

namespace {
constexpr const char* kScheduleFormat = "flt-learned-schedule";
// Version 4 adds anneal_decay (older files load with it off). Version 3 adds the hand rule (its
// flag and options; its learned numbers are among the weights). Version 2 stores the bounds of the
// step multiplier and of the decay; version 1 (the stopped campaign's files) had them fixed at
// (-10, 2) and 1. Versions 1 and 2 load with the hand rule off.
constexpr int64_t kScheduleVersion = 4;
}  // namespace

void write_schedule(torch::serialize::OutputArchive& archive, const LearnedScheduleImpl& schedule) {
  const auto& o = schedule.options;
  archive.write("format", torch::IValue(std::string(kScheduleFormat)));
  archive.write("version", torch::IValue(kScheduleVersion));
  detail::write_shape_options(archive, o);
  archive.write("log_step_low", torch::IValue(o.log_step_low()));
  archive.write("log_step_high", torch::IValue(o.log_step_high()));
  archive.write("max_shrink", torch::IValue(o.max_shrink()));
  archive.write("hand_rule", torch::IValue(o.hand_rule()));
  archive.write("growth_rate", torch::IValue(o.growth_rate()));
  archive.write("growth_threshold", torch::IValue(o.growth_threshold()));
  archive.write("anneal_decay", torch::IValue(o.anneal_decay()));
  detail::write_module_weights(archive, schedule);
}

LearnedSchedule read_schedule(torch::serialize::InputArchive& archive, const std::string& source) {
  torch::IValue value;
  TORCH_CHECK(archive.try_read("format", value) && value.isString() &&
                  value.toStringRef() == kScheduleFormat,
              "learned schedule weights: ", source,
              " is not a schedule of the tensor-schedule design (ScheduleMnemosyne's weights, as "
              "save_schedule and flt-metatrain-es write them)");
  archive.read("version", value);
  const auto version = value.toInt();
  TORCH_CHECK(version >= 1 && version <= kScheduleVersion, "learned schedule weights: ", source,
              " has format version ", version, ", this build reads 1 to ", kScheduleVersion);
  LearnedScheduleOptions o;
  detail::read_shape_options(archive, o);
  const auto read_double = [&](const char* name) {
    archive.read(name, value);
    return value.toDouble();
  };
  if (version == 1) {
    o.log_step_low(-10.0).log_step_high(2.0).max_shrink(1.0);
  } else {
    o.log_step_low(read_double("log_step_low"))
        .log_step_high(read_double("log_step_high"))
        .max_shrink(read_double("max_shrink"));
  }
  o.hand_rule(false);
  if (version >= 3) {
    archive.read("hand_rule", value);
    o.hand_rule(value.toBool())
        .growth_rate(read_double("growth_rate"))
        .growth_threshold(read_double("growth_threshold"));
  }
  o.anneal_decay(version >= 4 && archive.try_read("anneal_decay", value) && value.toBool());
  LearnedSchedule schedule(o);
  detail::read_module_weights(archive, *schedule);
  return schedule;
}

torch::Tensor memory_weights(Memory memory, const torch::Tensor& discount_logit,
                             const attention::FLTAttention& flt, int64_t max_distance) {
  TORCH_CHECK(max_distance >= 0, "memory_weights: max_distance must be >= 0, got ", max_distance);
  if (memory != Memory::kFLT && memory != Memory::kPerformer) return {};
  torch::NoGradGuard no_grad;
  const auto delta = torch::arange(max_distance + 1, torch::kDouble);
  const auto rpe = memory == Memory::kFLT ? flt->rpe_function(delta.to(torch::kFloat).view({-1, 1}))
                                                .to(torch::kDouble)
                                                .reshape({-1})
                                          : torch::ones_like(delta);
  const double gamma = torch::sigmoid(discount_logit.to(torch::kDouble)).item<double>();
  return torch::stack({rpe, at::pow(gamma, delta) * rpe});
}

void save_schedule(const LearnedSchedule& schedule, const std::string& path) {
  detail::save_weights_file(path, [&](auto& archive) { write_schedule(archive, *schedule); });
}

LearnedSchedule load_schedule(const std::string& path) {
  return detail::load_weights_file(path, "learned schedule weights",
                                   [&](auto& archive) { return read_schedule(archive, path); });
}

}  // namespace flt::optim
