// flt-metatrain-es: meta-trains ScheduleMnemosyne's schedule by evolution strategies over whole
// episodes against tuned references on held-out loss (flt/metatrain/episode_es.h), every
// candidate's runs batched on the task engine, as a campaign that checkpoints every generation and
// continues where it stopped.
//
//   flt-metatrain-es --dir bench/campaigns/es-schedule --hours 2     (continues if DIR has a state)
//   flt-metatrain-es --help                                          (every flag with its default)
//   flt-metatrain-es --dir DIR ... --diagnose    (where the campaign's theta loses on validation,
//                                                 and what its memory weighs)
//   flt-metatrain-es --dir DIR ... --export-theta FILE   (theta as it stands, a weights file)
//   flt-metatrain-es --dir DIR ... --export-best-parts PREFIX   (the hand rule moved by best.pt's
//                                                 change in one part only: two weights files)
//   flt-metatrain-es --dir DIR ... --fresh-validation N [--fresh-from K]  (best.pt's lead on N
//                                                 fresh held-out sets, draws K.., default 1..)
//   flt-metatrain-es --dir FOLDER --plot-ablation PNG    (the memory ablation's figure)
//
// DIR holds config.txt (the campaign's settings; a resumed campaign must match them), state.pt
// (theta, Adam's moments, the best theta by validation), log.tsv (one line a generation),
// references.tsv (the tuned AdamW-cosine references, reused) and best.pt (the best schedule, a
// weights file for ScheduleMnemosyneOptions::weights). The stop rule is set before the campaign:
// from generation --stop-check on, if the best validation score has not beaten the hand rule's by
// --stop-margin, the campaign writes DIR/STOPPED with the reason and ends. To stop an invocation
// without losing work, create DIR/STOP (or --stop-file): it ends after the generation in progress.
//
// Several ranks split each generation (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT as torchrun sets
// them, or --rendezvous file://PATH): scripts/launch-ranks 2 build/tools/flt-metatrain-es --dir DIR
// ...; every rank reads DIR, rank 0 alone writes it, and every rank takes the same steps.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "ablation_plot.h"
#include "flt/detail/cli_checks.h"
#include "flt/detail/progress.h"
#include "flt/detail/statistics.h"
#include "flt/metatrain/distributed.h"
#include "flt/metatrain/episode_es.h"
#include "flt/optim/schedule_mnemosyne.h"
#include "flt/runtime.h"

namespace fo = flt::optim;

namespace fm = flt::metatrain;
using flt::detail::integer_at_least;

namespace {

struct EsArgs {
  std::string dir;
  double hours = 1.0;
  int64_t generations = 400;
  fm::EpisodeESOptions es;
  std::string train = "tabular,image_mlp,autoencoder,factorization";
  std::string validation = "image_conv,char_gru";
  fo::LearnedScheduleOptions shape =
      fo::LearnedScheduleOptions().hidden(8).key_dim(4).value_dim(4).features(16).rpe_features(16);
  std::string memory = "flt";
  int64_t stop_check = 100;
  double stop_margin = 0.02;
  bool diagnose = false;
  int64_t step_sweep = 0;  // score the hand rule's step moved up and down, on this many generations
  std::string export_theta;      // write the campaign's current theta as a weights file and exit
  std::string export_parts;      // write best.pt's change split in two as weights files, exit
  std::string plot_ablation;     // draw the campaigns under --dir to this PNG and exit
  int64_t fresh_validation = 0;  // score best.pt and the hand rule on this many fresh sets, exit
  int64_t fresh_from = 1;        // the first of them (draws 1.. unless earlier ones chose a design)
  std::string rendezvous;        // where the ranks meet (file://PATH, or MASTER_ADDR:MASTER_PORT)
  std::string stop_file;         // while it exists, no generation starts (default DIR/STOP)
  int timeout_seconds = static_cast<int>(
      std::chrono::duration_cast<std::chrono::seconds>(fm::Rendezvous{}.timeout).count());
};

std::vector<fm::BatchedFamily> families(const std::string& list) {
  std::vector<fm::BatchedFamily> out;
  std::stringstream s(list);
  for (std::string name; std::getline(s, name, ',');)
    if (!name.empty()) out.push_back(fm::batched_family_from_name(name));
  return out;
}

// Every setting that changes what the campaign computes, one per line: a resumed campaign must
// have been started with the same.
std::string config_text(const EsArgs& a) {
  std::ostringstream s;
  const auto& o = a.es;
  s << "pairs " << o.pairs() << "\nsigma " << o.sigma() << "\nlearning_rate " << o.learning_rate()
    << "\nepisodes " << o.episodes() << "\ninstances " << o.instances() << "\nsteps "
    << o.min_steps() << ".." << o.max_steps() << "\nrescale " << o.rescale() << "\ntrain "
    << a.train << "\nvalidation " << a.validation << "\nvalidation_every " << o.validation_every()
    << "\nvalidation_episodes " << o.validation_episodes() << "\nseed " << o.seed() << "\nmemory "
    << a.memory << "\nhidden " << a.shape.hidden() << "\nkey_dim " << a.shape.key_dim()
    << "\nvalue_dim " << a.shape.value_dim() << "\nfeatures " << a.shape.features()
    << "\nrpe_features " << a.shape.rpe_features() << "\nstop_check " << a.stop_check
    << "\nstop_margin " << a.stop_margin << "\n";
  // Only when set: campaigns begun before the option continue with their config.txt.
  if (o.fixed_step_numbers()) s << "fixed_step_numbers 1\n";
  return s.str();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// theta_0 (the hand rule) moved by only one part of theta's change: the schedule's own step
// numbers (relative step, floor, growth rate and threshold), and the rest (head, corrector,
// memory).
struct ChangeParts {
  torch::Tensor step_numbers, rest;
};
ChangeParts change_parts(const torch::Tensor& theta0, const torch::Tensor& theta,
                         const fo::LearnedSchedule& schedule) {
  const auto change = theta - theta0;
  const auto step_part = fm::step_numbers_mask(schedule);
  return {theta0 + change * step_part, theta0 + change * (1 - step_part)};
}

// The validation scores of theta_0, the campaign's theta, theta_0 moved by one part of theta's
// change (change_parts), and theta with its memory's read cut off. Which part of what the
// training families taught costs the held-out families.
void diagnose(fm::EpisodeES& es, const fo::LearnedSchedule& schedule,
              const fm::EpisodeESState& state) {
  const auto theta0 = es.initial_state().theta;
  const auto parts = change_parts(theta0, state.theta, schedule);
  const auto validation = es.validation_set();
  std::vector<std::pair<const char*, torch::Tensor>> points = {
      {"hand rule (theta_0)", theta0},
      {"theta", state.theta},
      {"theta_0 + theta's change in the step numbers only", parts.step_numbers},
      {"theta_0 + theta's change in the rest only", parts.rest}};
  const auto read_part = fm::memory_read_mask(schedule);
  if (read_part.sum().item<double>() > 0)
    points.emplace_back("theta without its memory's read", state.theta * (1 - read_part));
  std::printf("validation scores at generation %lld (mean log ratio to tuned AdamW-cosine):\n",
              static_cast<long long>(state.generation));
  for (const auto& [label, theta] : points) {
    std::printf("  %-52s %.4f\n", label, es.mean_scores({theta}, validation)[0]);
    std::fflush(stdout);
  }
  // What the memory reads: how it weighs an entry delta steps old (the FLT memory's learned RPE
  // f(delta) with its discount, gamma^delta f(delta)), or the averages' time scales.
  const std::vector<int64_t> distances = {0, 1, 3, 10, 30, 100, 300, 1000, 3000};
  std::printf("what the memory weighs an entry delta steps old, theta_0 and theta:\n  %-24s",
              "delta");
  for (int64_t d : distances) std::printf(" %8lld", static_cast<long long>(d));
  std::printf("\n");
  for (const auto& [label, theta] : {points[0], points[1]}) {
    const auto at = es.schedule_at(theta);
    const auto weights =
        fo::memory_weights(at->options.memory(), at->discount_logit, at->flt, distances.back());
    if (weights.defined()) {
      for (int64_t row = 0; row < 2; ++row) {
        std::printf("  %-24s", (std::string(row == 0 ? "f, " : "gamma^d f, ") +
                                (theta.equal(points[0].second) ? "theta_0" : "theta"))
                                   .c_str());
        for (int64_t d : distances) std::printf(" %8.3g", weights[row][d].item<double>());
        std::printf("\n");
      }
    } else if (at->options.memory() == fo::Memory::kEMA) {
      // Channel c weighs an entry gamma_c^delta: its time scale 1 / (1 - gamma_c).
      const auto gamma = torch::sigmoid(at->discount_logit.detach().to(torch::kDouble));
      std::printf("  time scales 1 / (1 - gamma_c), %s:", label);
      for (int64_t c = 0; c < gamma.numel(); ++c)
        std::printf(" %.3g", 1.0 / (1.0 - gamma[c].item<double>()));
      std::printf("\n");
    }
  }
}

// The best theta's lead over the hand rule on the campaign's validation set, which chose it among
// every validation's theta, and on `sets` fresh draws of the same held-out families that no
// campaign scores: how much of the lead is the choice fitting those 8 episodes. Beside it, the
// leads of the hand rule moved by one part of best.pt's change (as --diagnose splits it): whether
// the lead comes from re-tuning the schedule's step numbers or from the learned head, corrector
// and memory; and best.pt with its memory's read cut off (memory_read_mask): what the memory adds.
void fresh_validation(fm::EpisodeES& es, const fo::LearnedSchedule& schedule,
                      const fm::EpisodeESState& state, int64_t sets, int64_t first) {
  if (state.best_generation == 0) {
    std::printf(
        "best.pt is the hand rule (no theta has beaten it on validation): no lead to check\n");
    return;
  }
  const auto theta0 = es.initial_state().theta;
  const auto parts = change_parts(theta0, state.best_theta, schedule);
  std::vector<torch::Tensor> thetas = {theta0, state.best_theta, parts.step_numbers, parts.rest};
  // With a memory, best.pt with its read cut off as well: what the memory adds to it.
  const auto read_part = fm::memory_read_mask(schedule);
  const bool has_memory = read_part.sum().item<double>() > 0;
  if (has_memory) thetas.push_back(state.best_theta * (1 - read_part));
  std::printf(
      "the hand rule and best.pt (generation %lld's theta) on validation sets: mean log ratio to "
      "tuned AdamW-cosine; lead = hand rule - theta, above 0 theta is ahead; then the leads of the "
      "hand rule moved by best.pt's change in its step numbers only, and in the rest only%s\n"
      "  %-32s %9s %9s %9s %12s %9s%s\n",
      static_cast<long long>(state.best_generation),
      has_memory ? "; and what the memory adds (best.pt without its memory's read - best.pt, "
                   "above 0 the memory helps)"
                 : "",
      "set", "hand rule", "theta", "lead", "step numbers", "the rest",
      has_memory ? "    memory" : "");
  const auto per_set = static_cast<double>(es.validation_set(0).size());
  flt::detail::ProgressBar bar("fresh validation");
  std::vector<double> fresh, fresh_steps, fresh_rest, fresh_memory;
  for (int64_t i = 0; i <= sets; ++i) {
    const int64_t draw = i == 0 ? 0 : first + i - 1;
    double done = 0;
    const auto scores = es.mean_scores(thetas, es.validation_set(draw), [&] {
      bar.update((i + ++done / per_set) / (sets + 1), "set " + std::to_string(draw));
    });
    const double lead = scores[0] - scores[1];
    const double memory = has_memory ? scores[4] - scores[1] : 0.0;
    const std::string label =
        draw == 0 ? "the campaign's (it chose theta)" : "fresh draw " + std::to_string(draw);
    // The scores as log.tsv and STOPPED write them (6 digits), so the campaign's row reads
    // against them.
    std::printf("  %-32s %9.6g %9.6g %+9.4f %+12.4f %+9.4f", label.c_str(), scores[0], scores[1],
                lead, scores[0] - scores[2], scores[0] - scores[3]);
    if (has_memory) std::printf(" %+9.4f", memory);
    std::printf("\n");
    std::fflush(stdout);
    if (draw == 0) continue;
    fresh.push_back(lead);
    fresh_steps.push_back(scores[0] - scores[2]);
    fresh_rest.push_back(scores[0] - scores[3]);
    fresh_memory.push_back(memory);
  }
  if (fresh.size() < 2) return;
  const auto standard_error = [](const std::vector<double>& x) {
    return flt::detail::sample_std(x) / std::sqrt(static_cast<double>(x.size()));
  };
  std::printf("  fresh draws: mean lead %+.4f, standard error %.4f over %zu sets\n",
              flt::detail::mean(fresh), standard_error(fresh), fresh.size());
  std::printf(
      "  the same for the step numbers' change only: %+.4f, %.4f; for the rest's only: %+.4f, "
      "%.4f\n",
      flt::detail::mean(fresh_steps), standard_error(fresh_steps), flt::detail::mean(fresh_rest),
      standard_error(fresh_rest));
  if (has_memory)
    std::printf("  what the memory adds to best.pt: %+.4f, %.4f\n", flt::detail::mean(fresh_memory),
                standard_error(fresh_memory));
}

// Where each training and validation family wants the step: theta_0 with its relative step moved
// by log -0.6 .. 1.2, every point scored in one batched run per episode, on the first `generations`
// generations' training episodes and on the validation set, family by family. A campaign can move
// the shared step only toward where the training families want it; where the validation families
// want another step, it cannot win there (the earlier campaigns' failure,
// docs/learned-optimizer.md).
void step_sweep(fm::EpisodeES& es, const fo::LearnedSchedule& schedule, int64_t generations) {
  const auto theta0 = es.initial_state().theta;
  int64_t offset = 0, index = -1;
  for (const auto& p : schedule->named_parameters()) {
    if (p.key() == "step_log_relative") index = offset;
    offset += p.value().numel();
  }
  TORCH_CHECK(index >= 0, "the schedule has no step_log_relative");
  const std::vector<double> shifts = {-0.6, -0.3, 0.0, 0.3, 0.6, 0.9, 1.2};
  std::vector<torch::Tensor> thetas;
  for (double shift : shifts) {
    auto theta = theta0.clone();
    theta[index] += shift;
    thetas.push_back(theta);
  }
  std::vector<fm::Episode> training;
  for (int64_t g = 0; g < generations; ++g)
    for (auto& episode : es.batch(g)) training.push_back(std::move(episode));
  std::printf(
      "the hand rule's relative step moved by log d: mean score over the family's "
      "instances (log ratio to tuned AdamW-cosine; lower is better)\n%-26s",
      "family (episodes)");
  for (double shift : shifts) std::printf(" %7.1f", shift);
  std::printf("\n");
  auto validation = es.validation_set();
  for (bool train : {true, false}) {
    auto& episodes = train ? training : validation;
    for (auto family : fm::all_batched_families()) {
      std::vector<fm::Episode> mine;  // the family's episodes, moved out of the set
      for (auto& episode : episodes)
        if (episode.task && episode.task->family() == family) mine.push_back(std::move(episode));
      if (mine.empty()) continue;
      const auto scores = es.mean_scores(thetas, mine);
      const auto label = std::string(train ? "train " : "valid ") +
                         fm::batched_family_name(family) + " (" + std::to_string(mine.size()) + ")";
      std::printf("%-26s", label.c_str());
      for (double score : scores) std::printf(" %7.4f", score);
      std::printf("\n");
      std::fflush(stdout);
    }
  }
}

// Why the stop rule ends the campaign after `record` (empty: it goes on).
std::string stops(const EsArgs& a, const fm::EpisodeESState& state,
                  const fm::GenerationRecord& record) {
  if (state.generation < a.stop_check || !std::isfinite(record.validation_hand_rule) ||
      state.best_validation < record.validation_hand_rule - a.stop_margin)
    return "";
  std::ostringstream why;
  why << "stopped at generation " << state.generation << " by the stop rule: the best "
      << "validation score " << state.best_validation << " (generation " << state.best_generation
      << ") has not beaten the hand rule's " << record.validation_hand_rule << " by "
      << a.stop_margin << "\n";
  return why.str();
}

// Every rank's settings, compared: ranks started with other flags would split different work.
void check_same_config(fm::Communicator& communicator, const std::string& config) {
  const auto mine =
      torch::tensor({static_cast<int64_t>(std::hash<std::string>{}(config))}, torch::kInt64);
  const auto all = communicator.allgather(mine);
  for (size_t r = 0; r < all.size(); ++r)
    TORCH_CHECK(torch::equal(all[r], all[0]), "rank ", r,
                " was started with other settings than rank 0; every rank needs the same flags");
}

// Runs generations until the campaign's end, this invocation's hours or its stop rule, each a
// checkpoint (state.pt, best.pt, a line of log.tsv) that rank 0 writes.
void run_generations(const EsArgs& a, fm::EpisodeES& es, fm::EpisodeESState& state,
                     size_t cached_references) {
  namespace fs = std::filesystem;
  auto* communicator = a.es.communicator().get();
  const bool writes = communicator == nullptr || communicator->rank() == 0;
  const std::string state_path = a.dir + "/state.pt";
  if (writes) {
    std::printf("flt-metatrain-es: %lld numbers, generation %lld of %lld, %zu references cached",
                static_cast<long long>(es.size()), static_cast<long long>(state.generation),
                static_cast<long long>(a.generations), cached_references);
    if (communicator) std::printf(", %d ranks", communicator->world_size());
    std::printf("\n");
    std::fflush(stdout);
  }
  std::ofstream log;
  if (writes) {
    const bool fresh_log = !fs::exists(a.dir + "/log.tsv");
    log.open(a.dir + "/log.tsv", std::ios::app);
    if (fresh_log)
      log << "generation\ttheta\thand_rule\tperturbed\tvalidation\tvalidation_hand_rule\t"
             "seconds\tinner_steps\ttasks\n";
  }
  const auto started = std::chrono::steady_clock::now();
  const auto elapsed_hours = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count() /
           3600.0;
  };
  flt::detail::ProgressBar bar("es", writes, static_cast<double>(state.generation) / a.generations);
  // Rank 0's clock and its look at the stop file decide when this invocation ends: ranks that
  // disagreed would wait for each other in the next generation's collectives. The stop file ends
  // it at a generation's boundary, where a signal would lose the generation in progress.
  bool asked_to_stop = false;
  const auto within_budget = [&] {
    asked_to_stop = writes && fs::exists(a.stop_file);
    auto go = torch::tensor({elapsed_hours() < a.hours && !asked_to_stop ? 1 : 0}, torch::kInt64);
    if (communicator) communicator->broadcast(go);
    return go.item<int64_t>() == 1;
  };
  while (state.generation < a.generations && within_budget()) {
    const auto record = es.step(state, [&](int64_t done, int64_t total) {
      bar.update((state.generation + static_cast<double>(done) / total) / a.generations,
                 "generation " + std::to_string(state.generation));
    });
    if (!writes) {
      if (stops(a, state, record).empty()) continue;
      return;
    }
    fm::save_es_state(state, state_path);
    fo::save_schedule(es.schedule_at(state.best_theta), a.dir + "/best.pt");
    log << record.generation << '\t' << record.theta_score << '\t' << record.hand_rule_score << '\t'
        << record.perturbed_score << '\t' << record.validation << '\t'
        << record.validation_hand_rule << '\t' << record.seconds << '\t' << record.inner_steps
        << '\t' << record.tasks << std::endl;
    std::fprintf(stderr,
                 "\ngeneration %lld: theta %.4f, hand rule %.4f on the batch; validation %.4f "
                 "(hand rule %.4f); %.0f s, %.0f inner steps/s\n",
                 static_cast<long long>(record.generation), record.theta_score,
                 record.hand_rule_score, record.validation, record.validation_hand_rule,
                 record.seconds, static_cast<double>(record.inner_steps) / record.seconds);
    const auto why = stops(a, state, record);
    if (!why.empty()) {
      std::ofstream(a.dir + "/STOPPED") << why;
      std::printf("%s", why.c_str());
      return;
    }
  }
  if (asked_to_stop)
    std::printf("flt-metatrain-es: %s asks the campaign to stop; remove it to continue\n",
                a.stop_file.c_str());
  if (writes)
    std::printf("flt-metatrain-es: at generation %lld; best validation %.4f (generation %lld)\n",
                static_cast<long long>(state.generation), state.best_validation,
                static_cast<long long>(state.best_generation));
}

// Joins the other ranks, opens the campaign in a.dir (checking its settings), and runs what was
// asked: an inspection, or generations. -> exit code
int open_and_run(EsArgs& a, const fm::Rendezvous& rendezvous) {
  const int rank = rendezvous.rank, world_size = rendezvous.world_size;
  namespace fs = std::filesystem;
  const std::string config_path = a.dir + "/config.txt", state_path = a.dir + "/state.pt";
  const std::string config = config_text(a);
  const bool inspect_only = a.diagnose || a.step_sweep > 0 || a.fresh_validation > 0 ||
                            !a.export_theta.empty() || !a.export_parts.empty();
  TORCH_CHECK(!(inspect_only && world_size > 1),
              "--diagnose, --step-sweep, --fresh-validation and the exports run on one process "
              "(WORLD_SIZE is ",
              world_size, ")");
  if (world_size > 1) {
    a.es.communicator(fm::connect(rendezvous));
    check_same_config(*a.es.communicator(), config);
  }
  if (rank == 0) {
    fs::create_directories(a.dir);
    if (!fs::exists(config_path)) std::ofstream(config_path) << config;
  }
  // The other ranks read what rank 0 wrote, once it has.
  if (a.es.communicator()) a.es.communicator()->barrier();
  TORCH_CHECK(read_file(config_path) == config, config_path,
              " was written with other settings; continue it with the same flags or use "
              "another --dir. It says:\n",
              read_file(config_path));
  if (fs::exists(a.dir + "/STOPPED") && !inspect_only) {
    if (rank == 0) std::printf("%s", read_file(a.dir + "/STOPPED").c_str());
    return 0;
  }
  fm::ReferenceCache references(a.dir + "/references.tsv", /*appends=*/rank == 0);
  torch::manual_seed(a.es.seed());  // the schedule's initial weights
  const fo::LearnedSchedule schedule(a.shape);
  fm::EpisodeES es(schedule, a.es, references);
  auto state = fs::exists(state_path) ? fm::load_es_state(state_path) : es.initial_state();
  if (a.diagnose) {
    diagnose(es, schedule, state);
    return 0;
  }
  if (a.step_sweep > 0) {
    step_sweep(es, schedule, a.step_sweep);
    return 0;
  }
  if (a.fresh_validation > 0) {
    TORCH_CHECK(fs::exists(state_path), "--fresh-validation: ", a.dir,
                " holds no campaign (no state.pt)");
    fresh_validation(es, schedule, state, a.fresh_validation, a.fresh_from);
    return 0;
  }
  if (!a.export_theta.empty()) {
    TORCH_CHECK(fs::exists(state_path), "--export-theta: ", a.dir,
                " holds no campaign (no state.pt)");
    fo::save_schedule(es.schedule_at(state.theta), a.export_theta);
    std::printf("wrote theta of generation %lld to %s; best.pt is generation %lld's%s\n",
                static_cast<long long>(state.generation), a.export_theta.c_str(),
                static_cast<long long>(state.best_generation),
                state.best_generation == 0 ? " (the hand rule)" : "");
    return 0;
  }
  if (!a.export_parts.empty()) {
    TORCH_CHECK(fs::exists(state_path), "--export-best-parts: ", a.dir,
                " holds no campaign (no state.pt)");
    TORCH_CHECK(state.best_generation > 0, "--export-best-parts: ", a.dir,
                "'s best.pt is the hand rule (no theta has beaten it on validation): no change to "
                "split");
    const auto parts = change_parts(es.initial_state().theta, state.best_theta, schedule);
    const std::string steps_file = a.export_parts + "-step-numbers.pt",
                      rest_file = a.export_parts + "-rest.pt";
    fo::save_schedule(es.schedule_at(parts.step_numbers), steps_file);
    fo::save_schedule(es.schedule_at(parts.rest), rest_file);
    std::printf(
        "wrote the hand rule moved by best.pt's (generation %lld's) change in its step "
        "numbers only to %s, in the rest only to %s\n",
        static_cast<long long>(state.best_generation), steps_file.c_str(), rest_file.c_str());
    return 0;
  }
  run_generations(a, es, state, references.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  EsArgs a;
  CLI::App app{
      "flt-metatrain-es: meta-trains ScheduleMnemosyne's schedule by evolution strategies over "
      "whole episodes, scored against tuned AdamW-cosine on held-out loss; a campaign in --dir "
      "that checkpoints every generation and continues where it stopped"};
  app.option_defaults()->always_capture_default();
  app.add_option("--dir", a.dir, "campaign directory (created; continued if it has a state)")
      ->required();
  app.add_option("--hours", a.hours, "wall-clock budget of this invocation")
      ->check(CLI::PositiveNumber);
  app.add_option("--generations", a.generations, "the campaign ends at this generation")
      ->check(integer_at_least(1));
  int64_t pairs = a.es.pairs(), episodes = a.es.episodes(), instances = a.es.instances(),
          min_steps = a.es.min_steps(), max_steps = a.es.max_steps(),
          every = a.es.validation_every(), validation_episodes = a.es.validation_episodes();
  bool rescale = a.es.rescale(), fixed_step_numbers = a.es.fixed_step_numbers();
  double sigma = a.es.sigma(), lr = a.es.learning_rate();
  int64_t seed = 0, hidden = a.shape.hidden(), key_dim = a.shape.key_dim(),
          value_dim = a.shape.value_dim(), features = a.shape.features(),
          rpe_features = a.shape.rpe_features();
  app.add_option("--pairs", pairs, "antithetic pairs per generation")->check(integer_at_least(1));
  app.add_option("--sigma", sigma, "perturbation scale")->check(CLI::PositiveNumber);
  app.add_option("--lr", lr, "Adam's step on the schedule's numbers")->check(CLI::PositiveNumber);
  app.add_option("--episodes", episodes, "episodes (a family's shape each) per generation")
      ->check(integer_at_least(1));
  app.add_option("--instances", instances, "instances per episode, every candidate on each")
      ->check(integer_at_least(1));
  app.add_flag("--rescale", rescale, "the parameter-rescaling augmentation on every episode");
  app.add_flag("--fixed-step-numbers", fixed_step_numbers,
               "hold the schedule's step numbers at the hand rule's: ES moves only the head, the "
               "corrector and the memory");
  app.add_option("--min-steps", min_steps, "shortest episode")->check(integer_at_least(1));
  app.add_option("--max-steps", max_steps, "longest episode")->check(integer_at_least(1));
  app.add_option("--train-families", a.train, "families the generations draw from");
  app.add_option("--validation-families", a.validation,
                 "held-out families validation draws from (none trained on)");
  app.add_option("--validation-every", every, "generations between validations")
      ->check(integer_at_least(1));
  app.add_option("--validation-episodes", validation_episodes, "episodes in the validation set")
      ->check(integer_at_least(1));
  app.add_option("--seed", seed, "campaign seed")->check(integer_at_least(0));
  app.add_option("--memory", a.memory, "the schedule's memory: flt, performer, lstm, ema or none");
  app.add_option("--hidden", hidden, "head width")->check(integer_at_least(1));
  app.add_option("--key-dim", key_dim, "memory query/key width")->check(integer_at_least(1));
  app.add_option("--value-dim", value_dim, "memory value width")->check(integer_at_least(1));
  app.add_option("--features", features, "memory random features")->check(integer_at_least(1));
  app.add_option("--rpe-features", rpe_features, "FLT memory RPE features")
      ->check(integer_at_least(1));
  app.add_option("--stop-check", a.stop_check, "generation from which the stop rule applies")
      ->check(integer_at_least(1));
  app.add_option("--stop-margin", a.stop_margin,
                 "the best validation score must beat the hand rule's by this much (log ratio)");
  app.add_flag("--diagnose", a.diagnose,
               "score the hand rule, theta and theta's change split in two on the validation set, "
               "print how the memory weighs its entries by age, then exit (the campaign is not "
               "advanced)");
  app.add_option("--step-sweep", a.step_sweep,
                 "score the hand rule with its relative step moved by log -0.6 .. 1.2 on the "
                 "first N generations' training episodes and on the validation set, family by "
                 "family, then exit")
      ->check(integer_at_least(1));
  app.add_option("--fresh-validation", a.fresh_validation,
                 "score the hand rule and best.pt on the campaign's validation set and on N fresh "
                 "draws of the same held-out families (their references join the cache), print "
                 "each lead and the fresh draws' mean, then exit")
      ->check(integer_at_least(1));
  app.add_option("--fresh-from", a.fresh_from,
                 "the first fresh draw --fresh-validation scores (draws that chose a design are no "
                 "longer fresh for it)")
      ->check(integer_at_least(1));
  app.add_option("--export-theta", a.export_theta,
                 "write the campaign's current theta as a schedule weights file (best.pt is the "
                 "best by validation, the hand rule until a theta beats it), then exit")
      ->type_name("FILE");
  app.add_option("--export-best-parts", a.export_parts,
                 "write the hand rule moved by best.pt's change in its step numbers only "
                 "(PREFIX-step-numbers.pt) and in the rest only (PREFIX-rest.pt) as schedule "
                 "weights files, then exit")
      ->type_name("PREFIX");
  app.add_option("--plot-ablation", a.plot_ablation,
                 "read --dir as a folder of campaigns (MEMORY-sSEED, the memory ablation's), draw "
                 "theta's validation score minus the hand rule's over the generations, a panel "
                 "per seed, to this PNG, then exit")
      ->type_name("PNG");
  app.add_option("--stop-file", a.stop_file,
                 "while this file exists no generation starts: creating it ends the campaign after "
                 "the generation in progress, checkpointed (default DIR/STOP)")
      ->type_name("FILE");
  flt::detail::add_rendezvous_flags(app, a.rendezvous, a.timeout_seconds, "collective");
  CLI11_PARSE(app, argc, argv);
  if (a.stop_file.empty()) a.stop_file = a.dir + "/STOP";
  int rank = 0, world_size = 1;
  try {
    if (!a.plot_ablation.empty()) {
      const int drawn = flt::tools::plot_ablation(a.dir, a.plot_ablation, a.stop_margin);
      std::printf("drew %d campaigns to %s\n", drawn, a.plot_ablation.c_str());
      return 0;
    }
    flt::set_threads(1);
    auto rendezvous = fm::Rendezvous::from_environment();
    rendezvous.method = a.rendezvous;
    rendezvous.timeout = std::chrono::seconds(a.timeout_seconds);
    rank = rendezvous.rank;
    world_size = rendezvous.world_size;
    a.es.pairs(pairs)
        .sigma(sigma)
        .learning_rate(lr)
        .episodes(episodes)
        .instances(instances)
        .min_steps(min_steps)
        .max_steps(max_steps)
        .rescale(rescale)
        .fixed_step_numbers(fixed_step_numbers)
        .validation_every(every)
        .validation_episodes(validation_episodes)
        .seed(static_cast<uint64_t>(seed));
    a.es.train_families(families(a.train));
    a.es.validation_families(families(a.validation));
    a.shape.memory(fo::memory_from_name(a.memory))
        .hidden(hidden)
        .key_dim(key_dim)
        .value_dim(value_dim)
        .features(features)
        .rpe_features(rpe_features);
    return open_and_run(a, rendezvous);
  } catch (const c10::Error& e) {
    std::fprintf(stderr, "flt-metatrain-es: %s\n", e.what_without_backtrace());
    return 1;
  } catch (const std::exception& e) {  // c10d's sockets throw std::system_error
    std::fprintf(stderr, "flt-metatrain-es: rank %d of %d: %s\n", rank, world_size, e.what());
    return 1;
  }
  return 0;
}
