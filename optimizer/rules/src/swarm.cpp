#include "flt/optim/swarm.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/util/Exception.h>
#include <torch/serialize.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "pretrained_weights.h"

namespace flt::optim {
namespace {

constexpr double kPi = 3.14159265358979323846;
// Log step size in unit coordinates stays in [kLogSigmaMin, 0] (a step never exceeds the box).
// Log step scale relative to the swarm's spread stays in [-kLogScaleLimit, kLogScaleLimit].
constexpr double kLogScaleLimit = 10.0;
// RPE widths s (spectral std of each head's Gaussian bump), kept in a range where (2 pi s^2)^{n/2}
// stays representable in double for n up to a few hundred.
constexpr double kLogWidthMin = -4.0, kLogWidthMax = 1.0;
// Most a learned head can change a log step size per step.
constexpr double kSigmaChange = 0.2;
// Entries of the step's hand-set base (`prior`), all learned: see step().
enum Prior {
  kToBest,
  kToCentroid,
  kToBestCentroid,
  kMomentum,
  kLogNoise,
  kSuccessGain,
  kSuccessTarget,
  kLogScaleStart,
  kLogScaleEnd,
  kLogSchedulePower,
  kPriorCount
};

// The swarm's RMS deviation per coordinate, (B, P, n) -> (B, 1); floored so a collapsed swarm
// still has a unit.
torch::Tensor swarm_spread(const torch::Tensor& u) {
  return (u - u.mean(1, true)).pow(2).mean({1, 2}).sqrt().clamp_min(1e-12).unsqueeze(1);
}

// The step-size schedule in unit-box coordinates: log sigma goes from `start` to `end` along
// progress^power, so the swarm anneals over the budget it was given (a large step first sees the
// smoothed landscape's global shape, a small one at the end resolves the basin it settled in).
torch::Tensor scheduled_log_scale(const torch::Tensor& prior, double progress) {
  const auto power = prior[kLogSchedulePower].clamp(-3.0, 3.0).exp();
  return prior[kLogScaleStart] +
         (prior[kLogScaleEnd] - prior[kLogScaleStart]) * at::pow(std::max(progress, 1e-12), power);
}

// Bounded features: about x for |x| << 5, saturating at +-5 (steps can be many sigma long).
torch::Tensor soft_clip(const torch::Tensor& x) {
  return 5.0 * torch::tanh(x / 5.0);
}

// Ranks scaled to [-1/2, 1/2] along the last dimension (P). x: (B, P) -> (B, P)
torch::Tensor centered_ranks(const torch::Tensor& x) {
  const double p = static_cast<double>(x.size(-1));
  const auto ranks = x.argsort(/*dim=*/-1, /*descending=*/false)
                         .argsort(/*dim=*/-1, /*descending=*/false)
                         .to(torch::kDouble);
  return p > 1 ? ranks / (p - 1.0) - 0.5 : torch::zeros_like(ranks);
}

}  // namespace

std::string swarm_variant_name(SwarmVariant variant) {
  switch (variant) {
    case SwarmVariant::kFLT: return "flt";
    case SwarmVariant::kPerformer: return "performer";
    case SwarmVariant::kIndependent: return "independent";
    case SwarmVariant::kLSTM: return "lstm";
  }
  return "?";
}

std::vector<SwarmVariant> all_swarm_variants() {
  return {SwarmVariant::kFLT, SwarmVariant::kPerformer, SwarmVariant::kIndependent,
          SwarmVariant::kLSTM};
}

SwarmVariant swarm_variant_from_name(const std::string& name) {
  for (auto v : all_swarm_variants()) {
    if (swarm_variant_name(v) == name) return v;
  }
  TORCH_CHECK(false, "Swarm: unknown variant \"", name,
              "\" (expected flt, performer, independent or lstm)");
}

// ---- model --------------------------------------------------------------------------------------

SwarmModelImpl::SwarmModelImpl(SwarmModelOptions options_) : options(std::move(options_)) {
  reset();
}

void SwarmModelImpl::reset() {
  const int64_t h = options.heads(), d = options.head_dim(), hidden = options.hidden();
  TORCH_CHECK(
      h >= 1 && d >= 1 && hidden >= 1 && options.features() >= 1 && options.rpe_features() >= 1,
      "SwarmModel: heads, head_dim, hidden, features and rpe_features must be >= 1, got ", h, ", ",
      d, ", ", hidden, ", ", options.features(), ", ", options.rpe_features());
  // The initial meta-weights follow options.seed; the caller's global generator is left as it was.
  auto global = at::detail::getDefaultCPUGenerator();
  const auto saved_state = global.get_state();
  torch::manual_seed(options.seed());
  query = register_module("query", torch::nn::Linear(kSwarmScalarFeatures, h * d));
  key = register_module("key", torch::nn::Linear(kSwarmScalarFeatures, h * d));
  // Head h's RPE bump: spatial std 1 / (2 pi s_h) of 0.5 RMS radii, then 3 times
  // narrower per head; height 0: the untrained FLT swarm is the Performer one, and meta-training
  // learns whether near particles should weigh more (a local recombination) or less.
  rpe_heights = register_parameter("rpe_heights", torch::zeros({h}, torch::kDouble));
  rpe_log_widths = register_parameter(
      "rpe_log_widths",
      (std::log(1.0 / (2.0 * kPi * 0.5)) + std::log(3.0) * torch::arange(h, torch::kDouble)));
  const int64_t head_in = kSwarmCoordinateFeatures + 2 * h + kSwarmScalarFeatures + hidden;
  hidden_layer = register_module("hidden_layer", torch::nn::Linear(head_in, hidden));
  output_layer = register_module("output_layer", torch::nn::Linear(hidden, 2));
  sigma_layer = register_module("sigma_layer", torch::nn::Linear(hidden + kSwarmScalarFeatures, 1));
  {
    // Attention starts by favouring particles whose value ranks high: q = 1, k = -a rank(value)
    // (rank -1/2 is the best), so q.k / sqrt(D) spans 4 from the best particle to the worst (e^4
    // in weight): the recombination weights of an evolution strategy.
    torch::NoGradGuard no_grad;
    query->weight.zero_();
    query->bias.fill_(1.0);
    key->weight.zero_();
    key->weight.select(1, /*rank of value=*/0).fill_(-4.0 / std::sqrt(static_cast<double>(d)));
    key->bias.zero_();
  }
  {
    // The learned residuals start at zero: the untrained swarm is the base rule below (evolution
    // strategies still move the zero layers, unlike back-propagation through a zero product).
    torch::NoGradGuard no_grad;
    output_layer->weight.zero_();
    output_layer->bias.zero_();
    sigma_layer->weight.zero_();
    sigma_layer->bias.zero_();
  }
  // The step's base starts as an evolution strategy with a step-size schedule: every particle
  // moves to its attention centroid of the swarm's positions (a recombination weighted by value
  // rank, and by distance through the RPE) plus Gaussian noise of the scheduled size, from 0.2 box
  // widths at the start to 1e-5 at the end along progress^1.5. PSO's terms (attraction to the own
  // best and to the centroid of bests, momentum; Clerc-Kennedy's chi c = 1.4962, chi = 0.7298)
  // start at zero, the 1/5-success rule at gain 0; meta-training moves them all.
  std::vector<double> base(kPriorCount);
  base[kToBest] = 0.0;
  base[kToCentroid] = 1.0;
  base[kToBestCentroid] = 0.0;
  base[kMomentum] = 0.0;
  base[kLogNoise] = 0.0;
  base[kSuccessGain] = 0.0;
  base[kSuccessTarget] = std::log(0.2 / 0.8);
  base[kLogScaleStart] = std::log(0.2);
  base[kLogScaleEnd] = std::log(1e-5);
  base[kLogSchedulePower] = std::log(1.5);
  prior = register_parameter("prior", torch::tensor(base, torch::kDouble));
  if (options.variant() == SwarmVariant::kLSTM) {
    lstm = register_module("lstm", torch::nn::LSTMCell(kSwarmScalarFeatures, hidden));
  } else {
    lstm = nullptr;
  }
  global.set_state(saved_state);
  to(torch::kDouble);
  flt_by_dim_.clear();
  performer_ = nullptr;
}

void SwarmModelImpl::pretty_print(std::ostream& stream) const {
  stream << "flt::optim::SwarmModel(variant=" << swarm_variant_name(options.variant())
         << ", heads=" << options.heads() << ", head_dim=" << options.head_dim()
         << ", hidden=" << options.hidden() << ")";
}

torch::Tensor SwarmModelImpl::scalar_features(const SwarmState& state) const {
  const auto& v = state.values;
  const auto best = PopulationSearch::finite_or_worst(state.best_values.flatten()).view_as(v);
  const auto mean = v.mean(-1, true), spread = v.std(-1, true, true) + 1e-12;
  const auto rel_sigma = state.log_sigma - state.log_sigma.mean(-1, true);
  return torch::stack({centered_ranks(v), centered_ranks(best), state.improved - 0.5,
                       torch::tanh((v - mean) / spread / 2.0), soft_clip(rel_sigma),
                       state.log_sigma / 5.0, torch::full_like(v, state.progress)},
                      -1);
}

torch::Tensor SwarmModelImpl::step_unit(const SwarmState& state) const {
  return (scheduled_log_scale(prior, state.progress) + state.log_sigma).exp();
}

torch::Tensor SwarmModelImpl::rpe_positions(const SwarmState& state) const {
  // Distances in units of the swarm's RMS radius (the particles' RMS distance from its centre,
  // sqrt(n) times the RMS spread per coordinate), so one f fits every box, dimension and stage of
  // convergence: in 30-D two particles are about 8 per-coordinate spreads apart, and an f sized in
  // those units would see every other particle as far away.
  const double n = static_cast<double>(state.u.size(-1));
  return state.u / (swarm_spread(state.u) * std::sqrt(n)).unsqueeze(-1);
}

attention::Attention& SwarmModelImpl::attention_for(int64_t n) {
  const int64_t h = options.heads(), d = options.head_dim();
  if (options.variant() == SwarmVariant::kPerformer) {
    if (!performer_) {
      performer_ = attention::PerformerAttention(attention::PerformerAttentionOptions()
                                                     .features(options.features())
                                                     .heads(h)
                                                     .head_dim(d)
                                                     .seed(options.seed()));
      performer_->to(torch::kDouble);
    }
    return *performer_;
  }
  TORCH_INTERNAL_ASSERT(options.variant() == SwarmVariant::kFLT);
  auto found = flt_by_dim_.find(n);
  if (found == flt_by_dim_.end()) {
    // One single-head, single-component module: its proposal can then match its spectrum exactly
    // (a_t = g / p constant). One proposal shared by bumps of width ratio rho gives a_t a variance
    // growing like (rho^4 / (2 rho^2 - 1))^{n/2}: useless in 30-D.
    auto module = attention::FLTAttention(attention::FLTAttentionOptions()
                                              .features(options.features())
                                              .rpe_features(options.rpe_features())
                                              .position_dim(n)
                                              .components(1)
                                              .heads(h)
                                              .head_dim(d)
                                              .seed(options.seed()));
    module->to(torch::kDouble);
    found = flt_by_dim_.emplace(n, module).first;
  }
  auto& module = *found->second;
  // Write the dimension-free (h, s) into the library's spectrum for this n:
  // g(xi) = c exp(-|xi|^2 / (2 s^2)) with c = h (2 pi s^2)^{-n/2} has f(d) = h exp(-2 pi^2 s^2
  // |d|^2).
  const auto log_s = rpe_log_widths.clamp(kLogWidthMin, kLogWidthMax);
  const auto c =
      rpe_heights * at::exp(-0.5 * static_cast<double>(n) * (std::log(2.0 * kPi) + 2.0 * log_s));
  module.rpe->weights = c.view({h, 1});
  module.rpe->log_scale = log_s.view({h, 1});
  module.rpe->means = torch::zeros({h, 1, n}, torch::kDouble);
  return module;
}

torch::Tensor SwarmModelImpl::attention_centroids(const SwarmState& state,
                                                  const torch::Tensor& scalars) {
  const int64_t b = state.u.size(0), p = state.u.size(1), n = state.u.size(2);
  const int64_t h = options.heads(), d = options.head_dim();
  const auto v = torch::cat({state.u, state.best_u}, -1).unsqueeze(1).expand({b, h, p, 2 * n});
  if (options.variant() == SwarmVariant::kIndependent || options.variant() == SwarmVariant::kLSTM) {
    // Each particle attends to itself only, and recombines its own best: a (1+1) strategy.
    return torch::cat({state.best_u, state.best_u}, -1).unsqueeze(1).expand({b, h, p, 2 * n});
  }
  const auto q = query(scalars).view({b, p, h, d}).permute({0, 2, 1, 3});  // (B, H, P, D)
  const auto k = key(scalars).view({b, p, h, d}).permute({0, 2, 1, 3});
  if (options.variant() == SwarmVariant::kPerformer) return attention_for(n).forward(q, k, v);
  auto& module = static_cast<attention::FLTAttentionImpl&>(attention_for(n));
  // Each head's frequencies come from its own spectrum width: run the heads one at a time with the
  // proposal set to that width.
  std::vector<torch::Tensor> heads;
  const auto log_s = rpe_log_widths.clamp(kLogWidthMin, kLogWidthMax);
  const auto positions = rpe_positions(state);
  for (int64_t i = 0; i < h; ++i) {
    module.log_proposal_sigma = log_s[i];
    heads.push_back(module.forward(q, k, v, {false, positions}).select(1, i));
  }
  return torch::stack(heads, 1);
}

torch::Tensor SwarmModelImpl::attention_readout(const SwarmState& state,
                                                const torch::Tensor& scalars) {
  const int64_t b = state.u.size(0), p = state.u.size(1), n = state.u.size(2);
  const int64_t h = options.heads();
  const auto offsets = attention_centroids(state, scalars) - state.u.repeat({1, 1, 2}).unsqueeze(1);
  const auto sigma = step_unit(state).view({b, 1, p, 1});
  // (B, H, P, 2, n) -> (B, P, n, 2, H) -> (B, P, n, 2H): [to centroid per head, to best per head]
  return soft_clip(
      (offsets / sigma).view({b, h, p, 2, n}).permute({0, 2, 4, 3, 1}).reshape({b, p, n, 2 * h}));
}

torch::Tensor SwarmModelImpl::attention_weights(const SwarmState& state) {
  const int64_t b = state.u.size(0), p = state.u.size(1), n = state.u.size(2);
  const int64_t h = options.heads(), d = options.head_dim();
  if (options.variant() == SwarmVariant::kIndependent || options.variant() == SwarmVariant::kLSTM) {
    return torch::eye(p, torch::kDouble).expand({b, h, p, p}).clone();
  }
  const auto scalars = scalar_features(state);
  const auto q = query(scalars).view({b, p, h, d}).permute({0, 2, 1, 3});
  const auto k = key(scalars).view({b, p, h, d}).permute({0, 2, 1, 3});
  if (options.variant() == SwarmVariant::kPerformer) return attention_for(n).materialize(q, k);
  auto& module = static_cast<attention::FLTAttentionImpl&>(attention_for(n));
  const auto log_s = rpe_log_widths.clamp(kLogWidthMin, kLogWidthMax);
  std::vector<torch::Tensor> heads;
  for (int64_t i = 0; i < h; ++i) {
    module.log_proposal_sigma = log_s[i];
    heads.push_back(module.materialize(q, k, {false, rpe_positions(state)}).select(1, i));
  }
  return torch::stack(heads, 1);
}

torch::Tensor SwarmModelImpl::rpe_profile(const torch::Tensor& distance) const {
  TORCH_CHECK(options.variant() == SwarmVariant::kFLT,
              "SwarmModel::rpe_profile: only the flt variant has an RPE, this one is ",
              swarm_variant_name(options.variant()));
  // f is isotropic and written for any n: evaluate the library's closed form along one axis of a
  // 1-d spectrum built from the same (h, s).
  const int64_t h = options.heads();
  auto spectrum = attention::RpeSpectrum(attention::RpeSpectrumOptions(h, 1).components(1));
  spectrum->to(torch::kDouble);
  const auto log_s = rpe_log_widths.clamp(kLogWidthMin, kLogWidthMax).detach();
  spectrum->weights =
      (rpe_heights.detach() * at::exp(-0.5 * (std::log(2.0 * kPi) + 2.0 * log_s))).view({h, 1});
  spectrum->log_scale = log_s.view({h, 1});
  spectrum->means = torch::zeros({h, 1, 1}, torch::kDouble);
  return spectrum->f(distance.to(torch::kDouble).view({1, -1, 1}));
}

void SwarmModelImpl::step(SwarmState& state, const torch::Tensor& noise) {
  const int64_t b = state.u.size(0), p = state.u.size(1), n = state.u.size(2);
  const int64_t h = options.heads(), hidden = options.hidden();
  TORCH_CHECK(noise.dim() == 4 && noise.size(0) == b && noise.size(1) == p && noise.size(2) == n &&
                  noise.size(3) == kSwarmNoiseChannels,
              "SwarmModel::step: noise must have shape (", b, ", ", p, ", ", n, ", ",
              kSwarmNoiseChannels, "), got ", noise.sizes());
  const auto scalars = scalar_features(state);        // (B, P, S)
  const auto sigma = step_unit(state).unsqueeze(-1);  // (B, P, 1)
  const auto to_best = state.best_u - state.u;
  torch::Tensor gradient = torch::zeros_like(state.u), has_gradient = torch::zeros_like(state.u);
  if (state.gradients.defined()) {
    const auto rms = state.gradients.pow(2).mean(-1, true).sqrt() + 1e-30;
    gradient = soft_clip(state.gradients / rms);
    has_gradient = torch::ones_like(state.u);
  }
  const auto centroids = attention_centroids(state, scalars);  // (B, H, P, 2n)
  const auto offsets = centroids - state.u.repeat({1, 1, 2}).unsqueeze(1);
  const auto readout = soft_clip((offsets / sigma.unsqueeze(1))
                                     .view({b, h, p, 2, n})
                                     .permute({0, 2, 4, 3, 1})
                                     .reshape({b, p, n, 2 * h}));  // (B, P, n, 2H)
  torch::Tensor memory = torch::zeros({b, p, n, hidden}, torch::kDouble);
  if (options.variant() == SwarmVariant::kLSTM) {
    auto hc = lstm(scalars.reshape({b * p, kSwarmScalarFeatures}),
                   std::make_tuple(state.lstm_h, state.lstm_c));
    state.lstm_h = std::get<0>(hc);
    state.lstm_c = std::get<1>(hc);
    memory = state.lstm_h.view({b, p, 1, hidden}).expand({b, p, n, hidden});
  }
  const auto head_in = torch::cat(
      {torch::stack(
           {soft_clip(to_best / sigma), soft_clip(state.last_step / sigma), gradient, has_gradient},
           -1),
       readout, scalars.unsqueeze(2).expand({b, p, n, kSwarmScalarFeatures}), memory},
      -1);
  const auto activations = torch::tanh(hidden_layer(head_in));  // (B, P, n, hidden)
  const auto out = output_layer(activations);                   // (B, P, n, 2)
  // The base: momentum, the way to the attention centroid of positions (the recombination of an
  // evolution strategy), and PSO's attractions to the own best and to the centroid of bests, each
  // scaled by a uniform draw per coordinate; then the head's drift and Gaussian noise in sigma
  // units. Steps are at most one box width.
  const auto mean_offsets = offsets.mean(1);  // (B, P, 2n)
  // (Channel 1's draw went to the centroid of positions, which is now deterministic; it stays drawn
  // so that the noise layout and the other channels do not move.)
  const auto uniform = 0.5 * (1.0 + torch::erf(noise.narrow(-1, 1, 3) / std::sqrt(2.0)));
  const auto base = prior[kMomentum] * state.last_step +
                    prior[kToBest] * uniform.select(-1, 0) * to_best +
                    prior[kToCentroid] * mean_offsets.narrow(-1, 0, n) +
                    prior[kToBestCentroid] * uniform.select(-1, 2) * mean_offsets.narrow(-1, n, n);
  const auto noise_scale = torch::exp((prior[kLogNoise] + out.select(-1, 1)).clamp(-10.0, 3.0));
  const auto step =
      (base + sigma * (out.select(-1, 0) + noise_scale * noise.select(-1, 0))).clamp(-1.0, 1.0);
  const auto moved = (state.u + step).clamp(-0.5, 0.5);
  state.last_step = moved - state.u;
  state.u = moved;
  // Step scale (relative to the spread): a learned success rule (gain 0 at the start) plus a
  // learned correction from the head's activations.
  const auto pooled = torch::cat({activations.mean(2), scalars}, -1);
  const auto change =
      prior[kSuccessGain] * (state.improved - torch::sigmoid(prior[kSuccessTarget])) +
      kSigmaChange * torch::tanh(sigma_layer(pooled).squeeze(-1));
  state.log_sigma = (state.log_sigma + change).clamp(-kLogScaleLimit, kLogScaleLimit);
}

std::string SwarmModelImpl::describe() const {
  const auto v = [&](Prior i) { return prior[i].item<double>(); };
  std::ostringstream out;
  out.precision(3);
  out << "swarm-" << swarm_variant_name(options.variant()) << "\n"
      << "  step base: momentum " << v(kMomentum) << ", to own best " << v(kToBest)
      << " x U(0,1), to centroid of positions " << v(kToCentroid) << ", to centroid of bests "
      << v(kToBestCentroid) << " x U(0,1), noise x" << std::exp(v(kLogNoise)) << "\n"
      << "  step size: " << std::exp(v(kLogScaleStart)) << " -> " << std::exp(v(kLogScaleEnd))
      << " box widths along progress^" << std::exp(std::clamp(v(kLogSchedulePower), -3.0, 3.0))
      << "; success rule gain " << v(kSuccessGain) << " at rate "
      << 1.0 / (1.0 + std::exp(-v(kSuccessTarget))) << "\n";
  if (options.variant() == SwarmVariant::kFLT) {
    const auto log_s = rpe_log_widths.clamp(kLogWidthMin, kLogWidthMax);
    for (int64_t h = 0; h < options.heads(); ++h) {
      // f_h(d) = c exp(-2 pi^2 s^2 d^2): spatial std 1 / (2 pi s) RMS radii.
      out << "  RPE head " << h << ": f(0) = " << rpe_heights[h].item<double>() << ", width (std) "
          << 1.0 / (2.0 * kPi * std::exp(log_s[h].item<double>())) << " RMS radii\n";
    }
  }
  return out.str();
}

torch::Tensor SwarmModelImpl::flat_parameters() const {
  std::vector<torch::Tensor> flat;
  for (const auto& p : parameters()) flat.push_back(p.detach().flatten());
  return torch::cat(flat);
}

void SwarmModelImpl::set_flat_parameters(const torch::Tensor& flat) {
  torch::NoGradGuard no_grad;
  int64_t offset = 0;
  for (auto& p : parameters()) {
    const int64_t count = p.numel();
    TORCH_CHECK(offset + count <= flat.numel(), "SwarmModel::set_flat_parameters: expected ",
                flat_parameters().numel(), " values, got ", flat.numel());
    p.copy_(flat.narrow(0, offset, count).view_as(p));
    offset += count;
  }
  TORCH_CHECK(offset == flat.numel(), "SwarmModel::set_flat_parameters: expected ", offset,
              " values, got ", flat.numel());
}

namespace {
torch::Tensor sizes_of(const SwarmModelOptions& o) {
  return torch::tensor({static_cast<int64_t>(o.variant()), o.heads(), o.head_dim(), o.features(),
                        o.rpe_features(), o.hidden(), static_cast<int64_t>(o.seed())});
}

std::shared_ptr<SwarmModelImpl> model_from_archive(torch::serialize::InputArchive& archive,
                                                   const std::string& origin) {
  torch::Tensor sizes, flat;
  TORCH_CHECK(archive.try_read("swarm_sizes", sizes) && archive.try_read("swarm_weights", flat),
              "swarm weights: ", origin, " is not a swarm weights file");
  const auto s = sizes.to(torch::kLong);
  TORCH_CHECK(s.numel() == 7, "swarm weights: ", origin, " has a bad size record");
  auto model =
      std::make_shared<SwarmModelImpl>(SwarmModelOptions()
                                           .variant(static_cast<SwarmVariant>(s[0].item<int64_t>()))
                                           .heads(s[1].item<int64_t>())
                                           .head_dim(s[2].item<int64_t>())
                                           .features(s[3].item<int64_t>())
                                           .rpe_features(s[4].item<int64_t>())
                                           .hidden(s[5].item<int64_t>())
                                           .seed(static_cast<uint64_t>(s[6].item<int64_t>())));
  model->set_flat_parameters(flat.to(torch::kDouble));
  return model;
}
}  // namespace

void SwarmModelImpl::save(const std::string& path) const {
  detail::save_weights_file(path, [&](auto& archive) {
    archive.write("swarm_sizes", sizes_of(options));
    archive.write("swarm_weights", flat_parameters());
  });
}

std::shared_ptr<SwarmModelImpl> SwarmModelImpl::load_file(const std::string& path) {
  return detail::load_weights_file(
      path, "swarm weights", [&](auto& archive) { return model_from_archive(archive, path); });
}

bool has_pretrained_swarm(SwarmVariant variant) {
  return detail::pretrained_blob("swarm_" + swarm_variant_name(variant)).data != nullptr;
}

SwarmModel load_pretrained_swarm(SwarmVariant variant) {
  const auto name = "swarm_" + swarm_variant_name(variant);
  const auto blob = detail::pretrained_blob(name);
  TORCH_CHECK(blob.data != nullptr, "no pretrained swarm weights for variant \"",
              swarm_variant_name(variant), "\" ship with this build (optimizer/pretrained/", name,
              ".pt); train them with flt-swarm train or pass SwarmOptions().weights(path)");
  torch::serialize::InputArchive archive;
  archive.load_from(reinterpret_cast<const char*>(blob.data), blob.size);
  return SwarmModel(model_from_archive(archive, "the pretrained weights " + name));
}

SwarmState initial_swarm_state(int64_t batch, int64_t particles, int64_t dims, double initial_sigma,
                               int64_t lstm_hidden, at::Generator& generator) {
  SwarmState state;
  state.u = at::rand({batch, particles, dims}, generator, torch::kDouble) - 0.5;
  state.best_u = state.u.clone();
  state.best_values = torch::full({batch, particles}, INFINITY, torch::kDouble);
  // First "last step": half the way to another uniform point, as PSO's initial velocity (SPSO
  // 2011).
  state.last_step =
      0.5 * (at::rand({batch, particles, dims}, generator, torch::kDouble) - 0.5 - state.u);
  state.log_sigma = torch::full({batch, particles}, std::log(initial_sigma), torch::kDouble);
  if (lstm_hidden > 0) {
    state.lstm_h = torch::zeros({batch * particles, lstm_hidden}, torch::kDouble);
    state.lstm_c = torch::zeros({batch * particles, lstm_hidden}, torch::kDouble);
  }
  return state;
}

void observe_values(SwarmState& state, const torch::Tensor& values, double progress) {
  const auto improved = values.isfinite() & (values < state.best_values);
  state.best_values = torch::where(improved, values, state.best_values);
  state.best_u = torch::where(improved.unsqueeze(-1), state.u, state.best_u);
  state.improved = improved.to(torch::kDouble);
  state.values = PopulationSearch::finite_or_worst(values);
  state.progress = progress;
}

// ---- Swarm --------------------------------------------------------------------------------------

namespace {
SwarmModel model_for(const SwarmOptions& options) {
  if (!options.weights().empty()) {
    auto model = SwarmModel(SwarmModelImpl::load_file(options.weights()));
    TORCH_CHECK(model->options.variant() == options.variant(), "Swarm: the weights file ",
                options.weights(), " holds a ", swarm_variant_name(model->options.variant()),
                " swarm, but the options ask for ", swarm_variant_name(options.variant()));
    return model;
  }
  if (has_pretrained_swarm(options.variant())) return load_pretrained_swarm(options.variant());
  return SwarmModel(SwarmModelOptions().variant(options.variant()));
}

void check_options(const SwarmOptions& o) {
  TORCH_CHECK(o.particles() >= 2, "Swarm: particles must be >= 2, got ", o.particles());
  TORCH_CHECK(std::isfinite(o.initial_sigma()) && o.initial_sigma() > 0,
              "Swarm: initial_sigma must be positive and finite, got ", o.initial_sigma());
  TORCH_CHECK(o.budget() >= 0, "Swarm: budget must be >= 0, got ", o.budget());
}
}  // namespace

Swarm::Swarm(SwarmOptions options) : options_(std::move(options)) {
  check_options(options_);
  model_ = model_for(options_);
}

Swarm::Swarm(SwarmOptions options, SwarmModel model)
    : options_(std::move(options)), model_(std::move(model)) {
  check_options(options_);
  TORCH_CHECK(model_->options.variant() == options_.variant(), "Swarm: the model is a ",
              swarm_variant_name(model_->options.variant()), " swarm, but the options ask for ",
              swarm_variant_name(options_.variant()));
}

SearchResult Swarm::minimize(const BatchObjective& f, const SearchBox& box, int64_t budget) {
  return run_search(*this, f, box, budget);
}

SearchResult Swarm::minimize(const BatchObjective& f, const torch::Tensor& x0, int64_t budget) {
  return minimize(f, SearchBox::around(x0, 5.0), budget);
}

void Swarm::reset(const SearchBox& box) {
  box.check("Swarm::reset");
  box_ = box;
  generator_ = at::make_generator<at::CPUGeneratorImpl>(options_.seed());
  const int64_t p = options_.particles(), n = box.dims();
  // The step-size schedule runs over the budget: set_budget's, else the options', else the
  // comparison's 200 n evaluations.
  planned_budget_ = budget_ > 0             ? budget_
                    : options_.budget() > 0 ? options_.budget()
                                            : kSwarmDefaultBudgetPerDim * n;
  state_ = initial_swarm_state(
      1, p, n, options_.initial_sigma(),
      options_.variant() == SwarmVariant::kLSTM ? model_->options.hidden() : 0, generator_);
  evaluations_ = 0;
  best_x_ = torch::Tensor();
  best_value_ = INFINITY;
  started_ = true;
}

torch::Tensor Swarm::ask() {
  TORCH_CHECK(started_, "Swarm::ask: call reset(box) (or minimize) first");
  return box_.lower + (state_.u[0] + 0.5) * (box_.upper - box_.lower);
}

void Swarm::tell(const torch::Tensor& values, const torch::Tensor& gradients) {
  TORCH_CHECK(started_, "Swarm::tell: call reset(box) (or minimize) first");
  const int64_t p = options_.particles(), n = box_.dims();
  check_tell(values, gradients, p, n);
  const auto raw = values.to(torch::kDouble).view({1, p});
  record(ask(), raw[0]);
  state_.gradients = torch::Tensor();
  if (options_.use_gradients() && gradients.defined()) {
    // d f / d u = d f / d x * width; non-finite entries (a NaN particle) become 0.
    const auto g = gradients.to(torch::kDouble) * (box_.upper - box_.lower);
    state_.gradients = torch::where(g.isfinite(), g, torch::zeros_like(g)).view({1, p, n});
  }
  evaluations_ += p;
  observe_values(
      state_, raw,
      std::min(1.0, static_cast<double>(evaluations_) / static_cast<double>(planned_budget_)));
  torch::NoGradGuard no_grad;
  model_->step(state_, at::randn({1, p, n, kSwarmNoiseChannels}, generator_, torch::kDouble));
}

torch::Tensor Swarm::attention_weights() {
  TORCH_CHECK(started_ && state_.values.defined(),
              "Swarm::attention_weights: needs a state with told values");
  torch::NoGradGuard no_grad;
  return model_->attention_weights(state_)[0];
}

}  // namespace flt::optim
