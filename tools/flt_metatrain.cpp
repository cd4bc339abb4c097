// flt-metatrain: meta-trains CoordinateMnemosyne's update rule (the learned optimizer with a memory
// per coordinate) and writes a weights file. ScheduleMnemosyne's schedule is meta-trained by
// flt-metatrain-es (episode ES, scripts/metatrain-es).
//
//   flt-metatrain --memory flt --out optimizer/pretrained/mnemosyne_flt.pt [--iterations 300]
//   flt-metatrain --help     (every flag with its default)
//   scripts/metatrain-distributed 4 --out rule.pt ...   (4 ranks on this machine)
//
// Resumes from --checkpoint when the file exists; deterministic for a given seed. With
// WORLD_SIZE > 1 in the environment (torchrun's RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) it is
// one rank of a distributed meta-training (docs/learned-optimizer.md): the ranks split the workers
// and rank 0 writes --out, --checkpoint and --csv; the weights are those of one process.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "flt/detail/cli_checks.h"
#include "flt/metatrain/meta_train.h"
#include "flt/optim/mnemosyne.h"
#include "flt/runtime.h"

namespace fo = flt::optim;

namespace fm = flt::metatrain;
using flt::detail::integer_at_least;
using flt::detail::library_name;

namespace {

// What the command line sets; the defaults are those --help shows.
struct MetatrainArgs {
  fm::MetaTrainOptions options;
  fo::LearnedOptimizerModelOptions model_options;
  std::string out;
  // Meta-training works on small tensors: a second thread gave no speed-up on 2 cores (about 9.6
  // iterations/s either way for the FLT memory), and one thread makes the result independent of the
  // machine's core count. Run two trainings side by side instead (scripts/optimizer-ablation).
  int threads = 1;
  std::string init;
  // Distributed: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from the environment (torchrun's).
  std::string rendezvous_method;
  int timeout_seconds = static_cast<int>(
      std::chrono::duration_cast<std::chrono::seconds>(fm::Rendezvous{}.timeout).count());
};

void declare_options(CLI::App& app, MetatrainArgs& args) {
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--out", args.out, "weights file to write")->required();
  app.add_option_function<std::string>(
         "--memory",
         [&](const std::string& name) { args.model_options.memory(fo::memory_from_name(name)); },
         "memory cell: flt, performer, none, lstm or ema")
      ->default_str(fo::memory_name(args.model_options.memory()))
      ->check(library_name(fo::memory_from_name));
  // Counts: whole integers >= 1, shown with their defaults in --help.
  const auto count = [](CLI::Option* option) {
    return option->capture_default_str()->check(integer_at_least(1));
  };
  count(app.add_option("--iterations", args.options.iterations(), "outer steps"));
  app.add_option_function<std::string>(
         "--estimator",
         [&](const std::string& name) {
           args.options.estimator(fm::meta_estimator_from_name(name));
         },
         "meta-gradient estimator: tbptt (truncated back-propagation) or pes")
      ->default_str(fm::meta_estimator_name(args.options.estimator()))
      ->check(library_name(fm::meta_estimator_from_name));
  count(app.add_option("--workers", args.options.workers(),
                       "tasks in flight (PES: antithetic pairs)"));
  count(app.add_option("--unroll", args.options.unroll(), "inner steps per truncation"));
  count(app.add_option("--horizon", args.options.horizon(),
                       "inner steps per task (a multiple of --unroll)"));
  app.add_option("--horizon-max", args.options.horizon_max(),
                 "draw each restart's horizon log-uniformly from [--horizon, --horizon-max] "
                 "(0 = always --horizon)")
      ->capture_default_str()
      ->check(integer_at_least(0));
  app.add_option_function<std::string>(
         "--train",
         [&](const std::string& name) {
           args.options.target(fm::meta_train_target_from_name(name));
         },
         "meta-parameters to train: all, rule (head and memory) or controller (the "
         "per-tensor step-size controller's scalars)")
      ->default_str(fm::meta_train_target_name(args.options.target()))
      ->check(CLI::IsMember({"all", "rule", "controller"}));
  app.add_option("--init", args.init,
                 "start from this weights file (a previous stage) instead of a fresh rule; its "
                 "shape wins over --memory/--hidden/...")
      ->check(CLI::ExistingFile);
  app.add_option("--pes-sigma", args.options.pes_sigma(), "PES perturbation std")
      ->capture_default_str();
  app.add_option("--late-emphasis", args.options.late_emphasis(),
                 "p >= 0: step t of a horizon T weighs (p + 1) (t / T)^p in the meta-loss (0: "
                 "the whole curve equally; larger: mostly the run's end)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--meta-lr", args.options.meta_lr(), "outer Adam learning rate at the start")
      ->capture_default_str();
  app.add_option("--meta-lr-end", args.options.meta_lr_end(),
                 "final fraction of --meta-lr after a half-cosine decay (1 = constant)")
      ->capture_default_str();
  app.add_option_function<std::vector<std::string>>(
         "--families",
         [&](const std::vector<std::string>& names) {
           args.options.families().clear();
           for (const auto& name : names)
             args.options.families().push_back(fm::task_family_from_name(name));
         },
         "task families, comma-separated (default: every family but tabular, the shipped "
         "weights' recipe)")
      ->delimiter(',')
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->check(library_name(fm::task_family_from_name));
  app.add_option("--seed", args.options.seed(),
                 "seed of the tasks, the features and the initial weights")
      ->capture_default_str()
      ->check(integer_at_least(0));
  app.add_option("--checkpoint", args.options.checkpoint(),
                 "checkpoint file: written at every restart boundary, resumed from if present");
  app.add_option("--csv", args.options.csv(), "per-iteration log (appended on resume)");
  app.add_flag_callback(
      "--quiet", [&] { args.options.progress(false); }, "no progress bar");
  count(app.add_option("--threads", args.threads, "intra-op threads"));
  // Distributed: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from the environment (torchrun's).
  flt::detail::add_rendezvous_flags(app, args.rendezvous_method, args.timeout_seconds,
                                    "meta-iteration");
  // The rule's shape (stored in the weights file); defaults as LearnedOptimizerModelOptions.
  count(app.add_option("--hidden", args.model_options.hidden(), "hidden width of the head MLP"));
  count(
      app.add_option("--features", args.model_options.features(), "FAVOR+ features of the memory"));
  count(app.add_option("--rpe-features", args.model_options.rpe_features(),
                       "RPE features (FLT memory)"));
  count(app.add_option("--key-dim", args.model_options.key_dim(), "query/key width of the memory"));
  count(app.add_option("--value-dim", args.model_options.value_dim(), "value width of the memory"));
}

// CoordinateMnemosyne's model, on one rank or several; rank 0 writes the files.
int train_coordinate_memory(MetatrainArgs& args, int rank, int world_size) {
  // Every rank builds the rule's shape; meta_train then gives all ranks rank 0's values.
  flt::optim::LearnedOptimizerModel model =
      args.init.empty() ? flt::optim::LearnedOptimizerModel(args.model_options)
                        : fo::load_model(args.init);
  args.model_options = model->options;
  if (rank == 0) {
    std::fprintf(
        stderr,
        "meta-training %s (%s, train %s, %lld iterations, %lld workers, unroll %lld, horizon "
        "%lld..%lld)",
        flt::optim::memory_name(args.model_options.memory()).c_str(),
        flt::metatrain::meta_estimator_name(args.options.estimator()).c_str(),
        fm::meta_train_target_name(args.options.target()).c_str(),
        static_cast<long long>(args.options.iterations()),
        static_cast<long long>(args.options.workers()),
        static_cast<long long>(args.options.unroll()),
        static_cast<long long>(args.options.horizon()),
        static_cast<long long>(std::max(args.options.horizon(), args.options.horizon_max())));
    if (world_size > 1) std::fprintf(stderr, " on %d ranks", world_size);
    std::fprintf(stderr, "\n");
  }
  const auto history = flt::metatrain::meta_train(model, args.options);
  if (rank != 0) return 0;
  flt::optim::save_model(model, args.out);
  double tail = 0.0;
  const size_t n = std::min<size_t>(20, history.size());
  for (size_t i = history.size() - n; i < history.size(); ++i)
    tail += history[i] / static_cast<double>(n);
  std::printf("wrote %s (mean meta-loss of the last %zu iterations: %.4f)\n", args.out.c_str(), n,
              tail);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  MetatrainArgs args;
  CLI::App app{
      "flt-metatrain: meta-trains the learned optimizer's update rule and writes a weights "
      "file. Resumes from --checkpoint when the file exists; deterministic for a given "
      "seed."};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  declare_options(app, args);
  CLI11_PARSE(app, argc, argv);

  flt::init();
  int rank = 0, world_size = 1;
  try {
    flt::set_threads(args.threads);
    auto rendezvous = fm::Rendezvous::from_environment();
    rendezvous.method = args.rendezvous_method;
    rendezvous.timeout = std::chrono::seconds(args.timeout_seconds);
    rank = rendezvous.rank;
    world_size = rendezvous.world_size;
    if (world_size > 1) args.options.communicator(fm::connect(rendezvous));
    torch::manual_seed(args.options.seed());
    args.model_options.seed(args.options.seed());
    return train_coordinate_memory(args, rank, world_size);
  } catch (const c10::Error& e) {
    std::fprintf(stderr, "flt-metatrain: %s\n", e.what_without_backtrace());
    return 1;
  } catch (const std::exception& e) {  // c10d's sockets throw std::system_error
    std::fprintf(stderr, "flt-metatrain: rank %d of %d: %s\n", rank, world_size, e.what());
    return 1;
  }
}
