#include "logic/swarm_race.h"

#include <torch/csrc/autograd/autograd.h>
#include <torch/types.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "flt/metatrain/landscapes.h"
#include "flt/optim/swarm.h"
#include "flt/optim/swarm_baselines.h"
#include "logic/step_clock.h"

namespace flt::viz {
namespace {

namespace fo = flt::optim;

namespace fm = flt::metatrain;
constexpr int64_t kParticles = 16;
constexpr int kGridSize = 160;
constexpr double kStepsPerSecond = 5.0;
constexpr int kMaxStepsPerAdvance = 16;
// Adam's lr on this level: the value tuned for the comparison (flt-swarm eval) in box widths.
constexpr double kAdamLr = 0.01;

std::vector<std::array<double, 2>> to_points(const torch::Tensor& x) {
  std::vector<std::array<double, 2>> points;
  const auto a = x.to(torch::kDouble).contiguous();
  for (int64_t i = 0; i < a.size(0); ++i)
    points.push_back({a[i][0].item<double>(), a[i][1].item<double>()});
  return points;
}

}  // namespace

struct SwarmRace::Impl {
  fo::SearchBox box = fo::SearchBox::cube(2, -5.12, 5.12);
  std::vector<std::unique_ptr<fo::PopulationSearch>> searchers;
  fo::Swarm* swarm = nullptr;
  std::vector<SwarmRacer> racers;
  std::vector<float> attention;
  LandscapeGrid grid;
  int64_t budget = 0;
  int steps = 0;
  StepClock clock{kStepsPerSecond, kMaxStepsPerAdvance};
  std::string note;

  void build_grid() {
    torch::NoGradGuard no_grad;
    const auto xs = torch::linspace(-5.12, 5.12, kGridSize, torch::kDouble);
    const auto ys = torch::linspace(5.12, -5.12, kGridSize, torch::kDouble);  // row 0 at the top
    const auto mesh = torch::meshgrid({ys, xs}, "ij");
    const auto values =
        fm::rastrigin(torch::stack({mesh[1], mesh[0]}, -1)).to(torch::kFloat).contiguous();
    grid.rows = grid.cols = kGridSize;
    grid.values.assign(values.data_ptr<float>(), values.data_ptr<float>() + values.numel());
    grid.hi = values.max().item<float>();
    grid.lo = std::max(values.masked_select(values > 0).min().item<float>(), grid.hi * 1e-4f);
    grid.version += 1;
  }

  // One ask/tell of racer i (Adam restarts gets autograd gradients).
  void ask_tell(size_t i) {
    auto& s = *searchers[i];
    torch::Tensor x = s.ask().detach(), values, gradients;
    if (s.needs_gradients()) {
      torch::AutoGradMode with_grad(true);
      auto leaf = x.clone().requires_grad_(true);
      const auto y = fm::rastrigin(leaf);
      gradients = torch::autograd::grad({y.sum()}, {leaf})[0];
      values = y.detach();
    } else {
      torch::NoGradGuard no_grad;
      values = fm::rastrigin(x);
    }
    s.tell(values, gradients);
    auto& r = racers[i];
    r.evaluations += x.size(0);
    r.points = to_points(x);
    const auto f = values.to(torch::kDouble).contiguous();
    r.values.assign(f.data_ptr<double>(), f.data_ptr<double>() + f.numel());
    r.best_value = s.best_value();
    r.best = to_points(s.best_x().unsqueeze(0))[0];
  }

  void read_attention() {
    const auto a = swarm->attention_weights().mean(0).to(torch::kFloat).contiguous();
    attention.assign(a.data_ptr<float>(), a.data_ptr<float>() + a.numel());
  }
};

SwarmRace::SwarmRace() : impl_(std::make_unique<Impl>()) {}
SwarmRace::~SwarmRace() = default;

void SwarmRace::load(uint64_t seed, int64_t budget) {
  auto& s = *impl_;
  s.searchers.clear();
  s.racers.clear();
  s.budget = budget;
  s.steps = 0;
  s.clock.reset();
  auto swarm = std::make_unique<fo::Swarm>(fo::SwarmOptions().particles(kParticles).seed(seed));
  s.note = fo::has_pretrained_swarm(fo::SwarmVariant::kFLT) ? "shipped meta-weights"
                                                            : "untrained (no weights shipped)";
  s.swarm = swarm.get();
  s.searchers.push_back(std::move(swarm));
  s.searchers.push_back(std::make_unique<fo::ParticleSwarm>(kParticles, seed));
  s.searchers.push_back(std::make_unique<fo::CmaEs>(0, seed));
  s.searchers.push_back(std::make_unique<fo::AdamRestarts>(kParticles, kAdamLr, 50, seed));
  const std::vector<std::pair<std::string, std::array<uint8_t, 3>>> looks = {
      {"FLT swarm", {255, 120, 60}},
      {"PSO", {90, 200, 255}},
      {"CMA-ES", {250, 220, 80}},
      {"Adam restarts", {230, 90, 230}}};
  for (size_t i = 0; i < s.searchers.size(); ++i) {
    s.searchers[i]->set_budget(budget);
    s.searchers[i]->reset(s.box);
    SwarmRacer r;
    r.name = looks[i].first;
    r.color = looks[i].second;
    r.points = to_points(s.searchers[i]->ask());
    r.best_value = INFINITY;
    s.racers.push_back(r);
  }
  s.attention.assign(static_cast<size_t>(kParticles * kParticles), 1.0f / kParticles);
  if (s.grid.rows == 0) s.build_grid();
}

void SwarmRace::step() {
  auto& s = *impl_;
  if (finished()) return;
  const int64_t target = std::min(s.budget, static_cast<int64_t>(s.steps + 1) * kParticles);
  for (size_t i = 0; i < s.searchers.size(); ++i) {
    while (s.racers[i].evaluations < target) s.ask_tell(i);
  }
  s.read_attention();
  s.steps += 1;
  for (auto& r : s.racers) r.history.push_back({s.steps, r.evaluations, r.best, r.best_value});
}

int SwarmRace::advance(double seconds, float speed) {
  return impl_->clock.advance(
      seconds, speed, [this] { step(); }, [this] { return finished(); });
}

bool SwarmRace::finished() const {
  const auto& s = *impl_;
  if (s.racers.empty()) return true;
  return std::all_of(s.racers.begin(), s.racers.end(),
                     [&](const SwarmRacer& r) { return r.evaluations >= s.budget; });
}

int SwarmRace::step_count() const {
  return impl_->steps;
}
const std::vector<SwarmRacer>& SwarmRace::racers() const {
  return impl_->racers;
}
const std::vector<float>& SwarmRace::attention() const {
  return impl_->attention;
}
int SwarmRace::particles() const {
  return static_cast<int>(kParticles);
}
const LandscapeGrid& SwarmRace::grid() const {
  return impl_->grid;
}
const std::string& SwarmRace::weights_note() const {
  return impl_->note;
}

std::string SwarmRace::race_csv() const {
  std::ostringstream out;
  out.precision(10);
  out << "racer,kind,step,evaluations,member,x,y,f\n";
  for (const auto& r : impl_->racers) {
    for (const auto& h : r.history) {
      out << '"' << r.name << "\",best," << h.step << ',' << h.evaluations << ",," << h.best[0]
          << ',' << h.best[1] << ',' << h.best_value << '\n';
    }
  }
  for (const auto& r : impl_->racers) {
    if (r.values.size() != r.points.size()) continue;  // not evaluated yet
    for (size_t i = 0; i < r.points.size(); ++i) {
      out << '"' << r.name << "\",particle," << impl_->steps << ',' << r.evaluations << ',' << i
          << ',' << r.points[i][0] << ',' << r.points[i][1] << ',' << r.values[i] << '\n';
    }
  }
  return out.str();
}

const SwarmRpeCurve& swarm_rpe_curve() {
  static const SwarmRpeCurve curve = [] {
    SwarmRpeCurve c;
    torch::NoGradGuard no_grad;
    const bool shipped = fo::has_pretrained_swarm(fo::SwarmVariant::kFLT);
    const auto model = shipped ? fo::load_pretrained_swarm(fo::SwarmVariant::kFLT)
                               : fo::SwarmModel(fo::SwarmModelOptions());
    c.note = shipped ? "shipped meta-weights" : "untrained (no weights shipped)";
    const auto d = torch::linspace(0.0, 3.0, 121, torch::kDouble);
    const auto f = model->rpe_profile(d).to(torch::kFloat).contiguous();
    c.distance.assign(121, 0.0f);
    for (int i = 0; i < 121; ++i) c.distance[i] = static_cast<float>(d[i].item<double>());
    for (int64_t h = 0; h < f.size(0); ++h) {
      const auto row = f[h].contiguous();
      c.f.emplace_back(row.data_ptr<float>(), row.data_ptr<float>() + row.numel());
    }
    return c;
  }();
  return curve;
}

}  // namespace flt::viz
