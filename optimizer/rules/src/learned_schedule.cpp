#include "flt/optim/learned_schedule.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/serialize.h>

#include <algorithm>
#include <array>
#include <cfloat>
#include <cmath>
#include <limits>
#include <mutex>
#include <optional>
#include <vector>

#include "flt/kernels/schedule_step.h"
#include "learned_rule.h"
#include "learned_step_fused.h"
#include "pretrained_weights.h"
#include "step_memory.h"

namespace flt::optim {
namespace {

using Impl = LearnedScheduleImpl;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// History slots (learned_schedule.h, kHistory).
enum Slot : int64_t {
  kInitialMeanSquare = 0,
  kGradFast,  // running averages of the mean g^2 at 0.9, 0.99, 0.999
  kGradSlow,
  kGradSlower,
  kCosineFast,  // running averages of the cosine at 0.9, 0.99
  kCosineSlow,
  kSumGD,  // the last pass's sums and count (0: no pass yet)
  kSumG2,
  kSumD2,
  kSumP2,
  kCount,
  kLossFast,  // running averages of the loss at 0.9, 0.99 and its minimum (NaN: none yet)
  kLossSlow,
  kLossMin,
  kValidationMin,  // the validation metric's minimum, last value and last change (NaN: none)
  kValidationLast,
  kValidationChange,
  kLogGrowth,  // the hand rule's log growth G of the step (0 at the start)
};
static_assert(kLogGrowth + 1 == Impl::kHistory, "one slot per history entry");

constexpr double kTimeScales[] = {10.0, 100.0, 1000.0, 10000.0};
constexpr double kFeatureClip = 5.0;
// The parameter RMS the step is relative to is capped at 4x its initial value: a step that grows
// with the weights feeds back on itself (the first design's logistic regressions drove their
// weights outward this way).
constexpr double kMaxScaleGrowth = detail::kMaxScaleGrowth;
// The hand rule's rate kappa, clamped to these bounds whatever its learned value: at the upper one
// the step can grow 4x in about 5 steps of full agreement, at the lower one it barely moves.
constexpr double kMinGrowthRate = 1e-4, kMaxGrowthRate = 0.3;
// The decoupled decay of an untrained head: sigmoid(-11), AdamW's 0.01 x lr 1e-3.
const double kUntrainedShrink = 1.0 / (1.0 + std::exp(11.0));

double clip(double x) {
  return std::clamp(x, -kFeatureClip, kFeatureClip);
}
// How far x is from a reference, in units of the reference: asinh of the relative difference
// (log-like for large ratios, defined for losses of any sign).
double relative(double x, double reference) {
  return clip(std::asinh((x - reference) / (std::fabs(reference) + 1e-12)));
}
double log_ratio(double a, double b) {
  return clip(std::log((a + 1e-300) / (b + 1e-300)));
}
double average(double old, double value, double beta) {
  return std::isfinite(old) ? beta * old + (1.0 - beta) * value : value;
}
double cosine(const double* h) {
  const double denominator = std::sqrt(h[kSumG2] * h[kSumD2]);
  return denominator > 0.0 ? std::clamp(h[kSumGD] / denominator, -1.0, 1.0) : 0.0;
}
// The mean square the step is relative to: the last pass's (the start's before any pass), capped.
double scale_mean_square(const double* h) {
  const double now = h[kCount] > 0.0 ? h[kSumP2] / h[kCount] : h[kInitialMeanSquare];
  return std::min(now, h[kInitialMeanSquare] * kMaxScaleGrowth * kMaxScaleGrowth);
}

}  // namespace

LearnedScheduleImpl::LearnedScheduleImpl(LearnedScheduleOptions options_)
    : options(std::move(options_)) {
  reset();
}

void LearnedScheduleImpl::reset() {
  const auto positive = [](int64_t value, const char* name) {
    TORCH_CHECK(value > 0, "LearnedSchedule: ", name, " must be positive, got ", value);
  };
  positive(options.key_dim(), "key_dim");
  positive(options.value_dim(), "value_dim");
  positive(options.features(), "features");
  positive(options.rpe_features(), "rpe_features");
  positive(options.hidden(), "hidden");
  TORCH_CHECK(options.relative_step() > 0 && std::isfinite(options.relative_step()),
              "LearnedSchedule: relative_step must be positive and finite, got ",
              options.relative_step());
  TORCH_CHECK(options.scale_floor() > 0 && std::isfinite(options.scale_floor()),
              "LearnedSchedule: scale_floor must be positive and finite, got ",
              options.scale_floor());
  TORCH_CHECK(options.log_step_low() < 0 && options.log_step_high() > 0 &&
                  std::isfinite(options.log_step_low()) && std::isfinite(options.log_step_high()),
              "LearnedSchedule: need log_step_low < 0 < log_step_high (finite), got ",
              options.log_step_low(), ", ", options.log_step_high());
  TORCH_CHECK(options.max_shrink() > kUntrainedShrink && options.max_shrink() <= 1,
              "LearnedSchedule: max_shrink must be in (", kUntrainedShrink, ", 1], got ",
              options.max_shrink());
  TORCH_CHECK(options.growth_rate() >= kMinGrowthRate && options.growth_rate() <= kMaxGrowthRate,
              "LearnedSchedule: growth_rate must be in [", kMinGrowthRate, ", ", kMaxGrowthRate,
              "], got ", options.growth_rate());
  TORCH_CHECK(std::fabs(options.growth_threshold()) < 1,
              "LearnedSchedule: growth_threshold must be in (-1, 1) (a cosine), got ",
              options.growth_threshold());
  // Slow forgetting (gamma 0.999: a half-life of ~700 steps) so the memory can span the run; the
  // RPE and the learned discount decide what of it is read. The step index is a 1-D position; an
  // initial spectrum width 0.002 in frequency gives f a length scale of ~80 steps, and the
  // proposal covers 100 to 1000s of steps.
  detail::register_step_memory(*this, kFeatures,
                               {/*discount_logit=*/std::log(999.0), /*rpe_scale=*/0.002,
                                /*proposal_sigma=*/0.003});
  head_in = register_module(
      "head_in",
      torch::nn::Linear(kFeatures + detail::memory_read_size(options.memory(), options.key_dim(),
                                                             options.value_dim()),
                        options.hidden()));
  head_out = register_module("head_out", torch::nn::Linear(options.hidden(), 3));
  corrector_in = register_module("corrector_in", torch::nn::Linear(2, kCorrectorHidden));
  corrector_out = register_module("corrector_out", torch::nn::Linear(kCorrectorHidden, 1));
  step_log_relative =
      register_parameter("step_log_relative", torch::full({}, std::log(options.relative_step())));
  step_log_floor =
      register_parameter("step_log_floor", torch::full({}, std::log(options.scale_floor())));
  if (options.hand_rule()) {
    growth_log_rate =
        register_parameter("growth_log_rate", torch::full({}, std::log(options.growth_rate())));
    growth_threshold =
        register_parameter("growth_threshold", torch::full({}, options.growth_threshold()));
  }
  torch::NoGradGuard no_grad;
  head_out->weight.zero_();
  head_out->bias.zero_();
  corrector_out->weight.zero_();
  corrector_out->bias.zero_();
  decide_cache_ = std::make_shared<DecideCache>();  // a clone (which calls reset) has its own
}

void LearnedScheduleImpl::pretty_print(std::ostream& stream) const {
  stream << "flt::optim::LearnedSchedule(memory=" << memory_name(options.memory())
         << ", history=" << history_size() << " floats/tensor, hidden=" << options.hidden()
         << ", hand_rule=" << (options.hand_rule() ? "true" : "false")
         << ", anneal_decay=" << (options.anneal_decay() ? "true" : "false") << ")";
}

int64_t LearnedScheduleImpl::history_size() const {
  return kHistory + detail::memory_size(options.memory(), options.key_dim(), options.value_dim(),
                                        options.features());
}

torch::Tensor LearnedScheduleImpl::initial_history(const torch::Tensor& param) const {
  auto history = torch::zeros({history_size()}, torch::kDouble);
  auto* h = history.data_ptr<double>();
  h[kInitialMeanSquare] =
      param.numel() == 0 ? 0.0 : param.detach().to(at::kDouble).pow(2).mean().item<double>();
  for (int64_t s : {kGradFast, kGradSlow, kGradSlower, kCosineFast, kCosineSlow, kLossFast,
                    kLossSlow, kLossMin, kValidationMin, kValidationLast, kValidationChange})
    h[s] = kNaN;
  return history;
}

namespace {

bool finite(const std::optional<double>& x) {
  return x && std::isfinite(*x);
}

// One tensor's features at step t from its history h (kFeatures into f, zeroed by the caller);
// floor_square: its schedule's scale floor, squared.
void fill_features(const double* h, double floor_square, int64_t t, const ScheduleSignals& signals,
                   double* f) {
  for (int i = 0; i < 4; ++i) f[i] = std::tanh(static_cast<double>(t) / kTimeScales[i]);
  if (h[kCount] > 0.0) {
    const double mean_g2 = h[kSumG2] / h[kCount];
    f[4] = log_ratio(mean_g2, h[kGradFast]);
    f[5] = log_ratio(mean_g2, h[kGradSlow]);
    f[6] = log_ratio(mean_g2, h[kGradSlower]);
    f[7] = cosine(h);
    f[8] = h[kCosineFast];
    f[9] = h[kCosineSlow];
    f[10] = clip(0.5 * std::log((h[kSumP2] / h[kCount] + floor_square) /
                                (h[kInitialMeanSquare] + floor_square)));
  }
  if (finite(signals.loss)) {
    f[11] = 1.0;
    if (std::isfinite(h[kLossMin])) {
      f[12] = relative(*signals.loss, h[kLossFast]);
      f[13] = relative(*signals.loss, h[kLossSlow]);
      f[14] = relative(*signals.loss, h[kLossMin]);
    }
  }
  if (finite(signals.fraction)) {
    f[15] = 1.0;
    f[16] = std::clamp(*signals.fraction, 0.0, 2.0);
  }
  const double last = finite(signals.validation) ? *signals.validation : h[kValidationLast];
  if (std::isfinite(last)) {
    f[17] = 1.0;
    const double best = std::isfinite(h[kValidationMin]) ? std::min(h[kValidationMin], last) : last;
    f[18] = relative(last, best);
    f[19] = finite(signals.validation) && std::isfinite(h[kValidationLast])
                ? relative(last, h[kValidationLast])
                : (std::isfinite(h[kValidationChange]) ? h[kValidationChange] : 0.0);
  }
}

// The signals' running statistics in a tensor's history (identical for every tensor: the loss
// and the metric are the run's).
void record_signals(double* h, const ScheduleSignals& signals) {
  if (finite(signals.loss)) {
    const double loss = *signals.loss;
    h[kLossFast] = average(h[kLossFast], loss, 0.9);
    h[kLossSlow] = average(h[kLossSlow], loss, 0.99);
    h[kLossMin] = std::isfinite(h[kLossMin]) ? std::min(h[kLossMin], loss) : loss;
  }
  if (finite(signals.validation)) {
    const double metric = *signals.validation;
    h[kValidationChange] =
        std::isfinite(h[kValidationLast]) ? relative(metric, h[kValidationLast]) : 0.0;
    h[kValidationLast] = metric;
    h[kValidationMin] =
        std::isfinite(h[kValidationMin]) ? std::min(h[kValidationMin], metric) : metric;
  }
}

void check_histories(const torch::Tensor& histories, int64_t dims, int64_t width, int64_t t) {
  TORCH_CHECK(histories.dim() == dims && histories.size(-1) == width &&
                  histories.scalar_type() == at::kDouble && histories.device().is_cpu(),
              "LearnedSchedule: histories must be (", dims == 2 ? "S" : "C, S", ", ", width,
              ") float64 on the CPU, got ", histories.sizes(), " ", histories.scalar_type());
  TORCH_CHECK(t >= 1, "LearnedSchedule: the step index must be >= 1, got ", t);
}

}  // namespace

torch::Tensor LearnedScheduleImpl::features(const torch::Tensor& histories, int64_t t,
                                            const ScheduleSignals& signals) const {
  check_histories(histories, 2, history_size(), t);
  const auto h = histories.contiguous();
  auto out = torch::zeros({h.size(0), kFeatures}, torch::kDouble);
  const double floor_square = std::exp(2.0 * step_log_floor.item<double>());
  for (int64_t s = 0; s < h.size(0); ++s)
    fill_features(h.data_ptr<double>() + s * h.size(1), floor_square, t, signals,
                  out.data_ptr<double>() + s * kFeatures);
  return out;
}

// The stack decide made last, and what it read: each parameter's and buffer's storage and version
// counter then (an in-place edit, a load or an optimizer's step bumps the version; set_data
// changes the storage). The mutex serialises optimizers that share one schedule.
struct LearnedScheduleImpl::DecideCache {
  std::mutex mutex;
  std::vector<torch::Tensor> watched;
  std::vector<std::pair<const void*, uint32_t>> read;
  std::optional<ScheduleStack> stack;

  bool current() const {
    for (size_t i = 0; i < watched.size(); ++i)
      if (watched[i].data_ptr() != read[i].first || watched[i]._version() != read[i].second)
        return false;
    return stack.has_value();
  }
};

std::pair<ScheduleDecision, torch::Tensor> LearnedScheduleImpl::decide(
    const torch::Tensor& histories, int64_t t, const ScheduleSignals& signals) {
  check_histories(histories, 2, history_size(), t);
  auto& cache = *decide_cache_;
  std::lock_guard<std::mutex> lock(cache.mutex);
  if (!cache.current()) {
    cache.watched = parameters();
    for (const auto& buffer : buffers()) cache.watched.push_back(buffer);
    cache.read.clear();
    for (const auto& tensor : cache.watched)
      cache.read.emplace_back(tensor.data_ptr(), tensor._version());
    // A run asks for steps 1, 2, ... in order: the FLT memory's RPE features 64 steps at a time.
    cache.stack.emplace(std::vector<const LearnedScheduleImpl*>{this}, /*rpe_block=*/64);
  }
  auto [decision, next] = cache.stack->decide(histories.unsqueeze(0), t, signals);
  return {{decision.step_size.squeeze(0), decision.shrink.squeeze(0), decision.gain.squeeze(0)},
          next.squeeze(0)};
}

// ---- several schedules deciding at once ---------------------------------------------------------

struct ScheduleStack::Stacked {
  LearnedScheduleOptions options;  ///< schedule 0's (the shape every schedule shares)
  /// The memories and heads (not stacked for a lone zero head: a zero head decides alike whatever
  /// the memory reads, see decide, and the untrained rule is the library's default).
  detail::StepMemory memory;
  detail::RpeRows rpe;
  detail::StackedLinear head_in, head_out;
  std::vector<bool> head_zero;  ///< schedule c's head's last layer is zero
  bool all_heads_zero = true;
  // Per schedule, read once: the head's last bias (a zero head's whole output), log rho, log
  // floor, the floor squared, and the hand rule's clamped rate and threshold.
  std::vector<std::array<double, 3>> head_bias;
  std::vector<double> log_relative, log_floor, floor_squares, growth_rates, growth_thresholds;
  /// The memories and heads laid out for the fused kernel, one plan per schedule
  /// (learned_step_fused.h); empty where the composite runs (see the constructor).
  std::vector<detail::FusedMemoryPlan> fused;

  /// decide's memory step and head for C schedules' S rows of features x (C, S, F) float64: the
  /// head's outputs (C, S, 3) float64, the stepped memories written into `next`. A zero head's
  /// output is its bias and its memory keeps its state.
  torch::Tensor fused_memory_and_head(const torch::Tensor& x, torch::Tensor& next, int64_t t);
  /// The same as tensor operations (attend_step and the stacked head): the fused path's reference,
  /// and the path of configurations the kernel does not cover.
  torch::Tensor composite_memory_and_head(const torch::Tensor& x, const torch::Tensor& histories,
                                          torch::Tensor& next, int64_t t);
};

torch::Tensor ScheduleStack::Stacked::fused_memory_and_head(const torch::Tensor& x,
                                                            torch::Tensor& next, int64_t t) {
  const int64_t models = x.size(0), rows = x.size(1), inputs = Impl::kFeatures;
  const int64_t width = next.size(2), memory_width = memory.size();
  torch::Tensor n1, n2;  // the FLT memory's position rows at t: (C, 2r)
  if (options.memory() == Memory::kFLT) std::tie(n1, n2) = rpe.at(memory, t);
  const auto row_of = [](const torch::Tensor& rows_at_t, int64_t c) {
    return rows_at_t.defined() ? rows_at_t.data_ptr<float>() + c * rows_at_t.stride(0) : nullptr;
  };
  auto out = torch::empty({models, rows, 3}, torch::kDouble);
  std::vector<float> x_rows(rows * inputs), memory_rows(rows * memory_width), head(rows * 3);
  const double* x_all = x.data_ptr<double>();
  double* h_all = next.data_ptr<double>();
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  for (int64_t c = 0; c < models; ++c) {
    double* o = out.data_ptr<double>() + c * rows * 3;
    const auto k = static_cast<size_t>(c);
    if (head_zero[k]) {
      for (int64_t s = 0; s < rows; ++s) std::copy_n(head_bias[k].data(), 3, o + 3 * s);
      continue;
    }
    detail::set_step_terms(fused[k], t, row_of(n1, c), row_of(n2, c));
    double* h = h_all + c * rows * width;
    for (int64_t s = 0; s < rows; ++s) {
      for (int64_t i = 0; i < inputs; ++i)
        x_rows[s * inputs + i] = static_cast<float>(x_all[(c * rows + s) * inputs + i]);
      for (int64_t j = 0; j < memory_width; ++j)
        memory_rows[s * memory_width + j] = static_cast<float>(h[s * width + Impl::kHistory + j]);
    }
    kernels::coordinate::memory_head_rows(fused[k].weights, inputs, 3, rows, x_rows.data(),
                                          memory_rows.data(), memory_width, head.data());
    for (int64_t s = 0; s < rows; ++s) {
      // A NaN feature (the only non-finite value features take: they are clipped) makes the row's
      // memory and decisions NaN, as tensor operations would; the kernel's branch-free exp and
      // max need not carry it.
      const float* xs = x_rows.data() + s * inputs;
      const bool finite = std::all_of(xs, xs + inputs, [](float v) { return std::isfinite(v); });
      for (int64_t j = 0; j < memory_width; ++j)
        h[s * width + Impl::kHistory + j] = finite ? memory_rows[s * memory_width + j] : kNaN;
      for (int64_t j = 0; j < 3; ++j) o[3 * s + j] = finite ? head[3 * s + j] : kNaN;
    }
  }
  return out;
}

torch::Tensor ScheduleStack::Stacked::composite_memory_and_head(const torch::Tensor& x_double,
                                                                const torch::Tensor& histories,
                                                                torch::Tensor& next, int64_t t) {
  const int64_t models = x_double.size(0), memory_size = memory.size();
  const auto x = x_double.to(at::kFloat);  // (C, S, F)
  // The head reads x and the memory's read, if there is a memory. Each operation skipped here
  // is ~1 us of a step that is Adam's 0.02 ms on a small model.
  auto input = x;
  if (memory_size > 0) {
    const auto state = histories.narrow(2, Impl::kHistory, memory_size).to(at::kFloat);
    auto [read, stepped] =
        detail::attend_step(memory, x, state, t, detail::kReadFloor, rpe.at(memory, t));
    if (std::find(head_zero.begin(), head_zero.end(), true) != head_zero.end()) {
      // A zero head's memory keeps its state, and its read (unused, but NaN x 0 is NaN) is 0.
      const auto zero = torch::tensor(std::vector<uint8_t>(head_zero.begin(), head_zero.end()))
                            .to(at::kBool)
                            .view({models, 1, 1});
      read = at::where(zero, at::zeros_like(read), read);
      stepped = at::where(zero, state, stepped);
    }
    next.narrow(2, Impl::kHistory, memory_size).copy_(stepped);
    input = at::cat({x, read}, 2);
  }
  return head_out(at::tanh(head_in(input))).to(at::kDouble).contiguous();
}

ScheduleStack::ScheduleStack(const std::vector<LearnedSchedule>& schedules, int64_t rpe_block,
                             bool composite)
    : ScheduleStack(
          [&] {
            std::vector<const LearnedScheduleImpl*> modules;
            for (const auto& s : schedules) modules.push_back(s.get());
            return modules;
          }(),
          rpe_block, composite) {}

ScheduleStack::ScheduleStack(const std::vector<const LearnedScheduleImpl*>& schedules,
                             int64_t rpe_block, bool composite)
    : stacked_(std::make_shared<Stacked>()) {
  TORCH_CHECK(!schedules.empty(), "ScheduleStack: no schedules");
  torch::NoGradGuard no_grad;
  auto& z = *stacked_;
  z.rpe = detail::RpeRows(rpe_block);
  z.options = schedules[0]->options;
  const auto& o = z.options;
  const auto value = [](const torch::Tensor& scalar) { return scalar.item<double>(); };
  for (size_t c = 0; c < schedules.size(); ++c) {
    const auto& s = *schedules[c];
    const auto& mine = s.options;
    TORCH_CHECK(mine.hidden() == o.hidden() && mine.hand_rule() == o.hand_rule() &&
                    mine.log_step_low() == o.log_step_low() &&
                    mine.log_step_high() == o.log_step_high() &&
                    mine.max_shrink() == o.max_shrink(),
                "ScheduleStack: schedule ", c,
                " differs from schedule 0 in its head's width, its hand rule or its bounds");
    const bool zero = s.head_out->weight.count_nonzero().item<int64_t>() == 0;
    z.head_zero.push_back(zero);
    z.all_heads_zero = z.all_heads_zero && zero;
    const auto bias = s.head_out->bias.to(at::kDouble).contiguous();
    z.head_bias.push_back(
        {bias.data_ptr<double>()[0], bias.data_ptr<double>()[1], bias.data_ptr<double>()[2]});
    z.log_relative.push_back(value(s.step_log_relative));
    z.log_floor.push_back(value(s.step_log_floor));
    z.floor_squares.push_back(std::exp(2.0 * z.log_floor.back()));
    if (o.hand_rule()) {
      // The hand rule's rate and threshold, clamped whatever their learned values.
      z.growth_rates.push_back(
          std::clamp(std::exp(value(s.growth_log_rate)), kMinGrowthRate, kMaxGrowthRate));
      z.growth_thresholds.push_back(std::clamp(value(s.growth_threshold), -1.0, 1.0));
    }
  }
  // A stack of one zero head (the untrained rule, as LearnedScheduleImpl::decide stacks it) uses
  // none of the memory or the head. Larger stacks are stacked even so, which checks
  // that they share their memory's shape and random features.
  if (z.all_heads_zero && schedules.size() == 1) return;
  std::vector<torch::nn::Linear> head_in, head_out;
  for (const auto* s : schedules) {
    head_in.push_back(s->head_in);
    head_out.push_back(s->head_out);
  }
  z.memory = detail::step_memory_of(schedules);
  z.head_in = detail::stack_models(head_in);
  z.head_out = detail::stack_models(head_out);
  if (!composite && detail::fused_memory_supported(*schedules[0]))
    for (const auto* s : schedules) z.fused.push_back(detail::fused_memory_plan(*s));
}

int64_t ScheduleStack::size() const {
  return static_cast<int64_t>(stacked_->head_zero.size());
}

bool ScheduleStack::fused() const {
  return !stacked_->fused.empty();
}

std::pair<ScheduleDecision, torch::Tensor> ScheduleStack::decide(const torch::Tensor& histories,
                                                                 int64_t t,
                                                                 const ScheduleSignals& signals) {
  auto& z = *stacked_;
  const int64_t models = size();
  const int64_t memory_size = detail::memory_size(z.options.memory(), z.options.key_dim(),
                                                  z.options.value_dim(), z.options.features());
  check_histories(histories, 3, Impl::kHistory + memory_size, t);
  TORCH_CHECK(histories.size(0) == models, "ScheduleStack::decide: histories hold ",
              histories.size(0), " schedules' rows, the stack has ", models);
  auto next = histories.contiguous().clone();  // (C, S, H); its rows are read and written below
  const int64_t rows = next.size(1), width = next.size(2);
  // Each row's signals: the run's, with its own loss where the rows come from runs of their own.
  torch::Tensor row_losses;
  if (signals.row_losses.defined()) {
    TORCH_CHECK(signals.row_losses.numel() == models * rows,
                "ScheduleStack::decide: row_losses holds ", signals.row_losses.numel(),
                " losses, the histories ", models * rows, " rows");
    row_losses = signals.row_losses.to(at::kDouble).contiguous();
  }
  const auto row_signals = [&](int64_t r) {
    ScheduleSignals mine = signals;
    if (row_losses.defined()) mine.loss = row_losses.data_ptr<double>()[r];
    return mine;
  };
  double* h_all = next.data_ptr<double>();
  // The head's output (C, S, 3) in float64. A head whose last layer is zero outputs its bias
  // whatever it reads (the untrained schedule, the design's default), so its memory is not
  // stepped and keeps its state, and neither its features nor its head are computed when every
  // head is zero: with the FLT memory that is 0.1-0.2 ms a step of small tensor operations,
  // several times Adam's whole step on a small model.
  torch::Tensor out;
  if (!z.all_heads_zero) {
    auto x_double = torch::zeros({models, rows, Impl::kFeatures}, torch::kDouble);
    for (int64_t c = 0; c < models; ++c)
      for (int64_t s = 0; s < rows; ++s)
        fill_features(h_all + (c * rows + s) * width, z.floor_squares[static_cast<size_t>(c)], t,
                      row_signals(c * rows + s),
                      x_double.data_ptr<double>() + (c * rows + s) * Impl::kFeatures);
    if (!z.fused.empty()) {
      out = z.fused_memory_and_head(x_double, next, t);
    } else {
      out = z.composite_memory_and_head(x_double, histories, next, t);
    }
  }
  // The rest is a handful of numbers a row, computed as scalars.
  const double low = z.options.log_step_low(), high = z.options.log_step_high(),
               max_shrink = z.options.max_shrink();
  // Log step multiplier in (low, high), 0 for an untrained head: low + (high - low) sigmoid(o + c)
  // with sigmoid(c) = -low / (high - low).
  const double step_offset = std::log(-low / high);
  // Decoupled weight decay per step in (0, max_shrink), kUntrainedShrink for an untrained head
  // (AdamW's 0.01 x lr 1e-3).
  const double shrink_offset = std::log(kUntrainedShrink / (max_shrink - kUntrainedShrink));
  const auto sigmoid = [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
  auto step_size = torch::empty({models, rows}, torch::kDouble),
       shrink = torch::empty({models, rows}, torch::kDouble),
       gain = torch::empty({models, rows}, torch::kDouble);
  for (int64_t c = 0; c < models; ++c) {
    const auto k = static_cast<size_t>(c);
    for (int64_t s = 0; s < rows; ++s) {
      const int64_t r = c * rows + s;
      double* h = h_all + r * width;
      const double* o = out.defined() ? out.data_ptr<double>() + 3 * r : z.head_bias[k].data();
      // The hand rule's growth, stepped on the cosine the last pass recorded (none before a
      // pass); a non-finite cosine (a pass whose sums overflowed) leaves G as it was.
      if (z.options.hand_rule() && h[kCount] > 0.0 && std::isfinite(h[kCosineFast]))
        h[kLogGrowth] = std::clamp(
            h[kLogGrowth] + z.growth_rates[k] * (h[kCosineFast] - z.growth_thresholds[k]), low,
            high);
      const double log_growth = z.options.hand_rule() ? h[kLogGrowth] : 0.0;
      const double head_log_multiplier = low + (high - low) * sigmoid(o[0] + step_offset);
      const double log_multiplier = std::clamp(log_growth + head_log_multiplier, low, high);
      step_size.data_ptr<double>()[r] =
          std::exp(z.log_relative[k] + log_multiplier) *
          std::sqrt(scale_mean_square(h) + std::exp(z.log_floor[k] * 2.0));
      shrink.data_ptr<double>()[r] = max_shrink * sigmoid(o[1] + shrink_offset);
      gain.data_ptr<double>()[r] = std::tanh(o[2]);
      record_signals(h, row_signals(r));
    }
  }
  return {{step_size, shrink, gain}, next};
}

torch::Tensor LearnedScheduleImpl::record(const torch::Tensor& histories, const torch::Tensor& sums,
                                          const torch::Tensor& numels) {
  TORCH_CHECK(histories.dim() == 2 && histories.size(1) >= kHistory &&
                  histories.scalar_type() == at::kDouble && sums.dim() == 2 &&
                  sums.size(0) == histories.size(0) && sums.size(1) == kStatistics &&
                  numels.numel() == histories.size(0),
              "LearnedSchedule::record: expected histories (S, >= ", kHistory,
              ") float64, sums (S, ", kStatistics, ") and numels (S), got ", histories.sizes(),
              ", ", sums.sizes(), " and ", numels.sizes());
  auto next = histories.to(at::kCPU).contiguous().clone();
  const auto sum = sums.to(at::kCPU, at::kDouble).contiguous();
  const auto n = numels.to(at::kCPU, at::kDouble).contiguous();
  for (int64_t s = 0; s < next.size(0); ++s) {
    double* h = next.data_ptr<double>() + s * next.size(1);
    const double* g = sum.data_ptr<double>() + s * kStatistics;
    h[kSumGD] = g[0];
    h[kSumG2] = g[1];
    h[kSumD2] = g[2];
    h[kSumP2] = g[3];
    h[kCount] = std::max(1.0, n.data_ptr<double>()[s]);
    const double mean_g2 = h[kSumG2] / h[kCount], c = cosine(h);
    h[kGradFast] = average(h[kGradFast], mean_g2, 0.9);
    h[kGradSlow] = average(h[kGradSlow], mean_g2, 0.99);
    h[kGradSlower] = average(h[kGradSlower], mean_g2, 0.999);
    h[kCosineFast] = average(h[kCosineFast], c, 0.9);
    h[kCosineSlow] = average(h[kCosineSlow], c, 0.99);
  }
  return next;
}

// ---- the per-coordinate rule ------------------------------------------------------------------

Impl::CoordinateStep LearnedScheduleImpl::coordinate_step(const torch::Tensor& param,
                                                          const torch::Tensor& grad,
                                                          const torch::Tensor& moments, int64_t t,
                                                          double step_size, double shrink,
                                                          double gain) const {
  TORCH_CHECK(param.dim() == 1 && grad.sizes() == param.sizes() && moments.dim() == 2 &&
                  moments.size(0) == param.size(0) && moments.size(1) == kMoments,
              "LearnedSchedule::coordinate_step: expected param (N), grad (N), moments (N, ",
              kMoments, "), got ", param.sizes(), ", ", grad.sizes(), ", ", moments.sizes());
  const double td = static_cast<double>(t);
  const auto m_old = moments.select(1, 0), v_old = moments.select(1, 1);
  const auto d_prev = m_old / (at::sqrt(v_old) + kEpsilon);
  const auto m = kBeta1 * m_old + (1 - kBeta1) * grad;
  const auto v = kBeta2 * v_old + (1 - kBeta2) * grad * grad;
  const auto denominator = at::sqrt(v / (1 - std::pow(kBeta2, td))) + kEpsilon;
  const auto a = (m / (1 - std::pow(kBeta1, td)) / denominator).clamp(-kRatioClip, kRatioClip);
  const auto b = (grad / denominator).clamp(-kRatioClip, kRatioClip);
  // The corrector's weights follow the coordinates to their device and dtype.
  const auto to_param = [&](const torch::Tensor& w) { return w.to(param.options()); };
  const auto hidden = at::linear(at::stack({a, b}, 1), to_param(corrector_in->weight),
                                 to_param(corrector_in->bias));
  const auto correction = at::linear(hidden / (1 + hidden.abs()), to_param(corrector_out->weight),
                                     to_param(corrector_out->bias))
                              .squeeze(1);
  const auto direction = a + gain * correction;
  const auto next = (1 - shrink) * param - step_size * direction;
  const auto p = next.to(at::kDouble), g = grad.to(at::kDouble), d = d_prev.to(at::kDouble);
  return {next, at::stack({m, v}, 1), at::stack({g * d, g * g, d * d, p * p}, 1)};
}

kernels::schedule::RuleConstants LearnedScheduleImpl::rule_constants(int64_t t) const {
  kernels::schedule::RuleConstants c{};
  // The corrector's 17 weights, read once per step.
  const auto w1 = corrector_in->weight.detach().to(at::kFloat).cpu().contiguous();  // (4, 2)
  const auto b1 = corrector_in->bias.detach().to(at::kFloat).cpu().contiguous();
  const auto w2 = corrector_out->weight.detach().to(at::kFloat).cpu().contiguous();  // (1, 4)
  for (int64_t j = 0; j < kCorrectorHidden; ++j) {
    c.in_a[j] = w1.data_ptr<float>()[2 * j];
    c.in_b[j] = w1.data_ptr<float>()[2 * j + 1];
    c.bias[j] = b1.data_ptr<float>()[j];
    c.out[j] = w2.data_ptr<float>()[j];
  }
  c.out_bias = corrector_out->bias.detach().to(at::kFloat).cpu().item<float>();
  set_bias_corrections(c, t);
  return c;
}

void LearnedScheduleImpl::set_bias_corrections(kernels::schedule::RuleConstants& constants,
                                               int64_t t) {
  const double td = static_cast<double>(t);
  constants.bc1 = static_cast<float>(1.0 / (1.0 - std::pow(kBeta1, td)));
  constants.bc2 = static_cast<float>(1.0 / (1.0 - std::pow(kBeta2, td)));
}

kernels::schedule::TensorDecision LearnedScheduleImpl::tensor_decision(double step_size,
                                                                       double shrink, double gain) {
  return {static_cast<float>(step_size), static_cast<float>(1.0 - shrink),
          static_cast<float>(gain)};
}

}  // namespace flt::optim
