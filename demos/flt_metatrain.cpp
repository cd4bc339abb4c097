// flt-metatrain: meta-trains the learned optimizer's update rule and writes a weights file.
//
//   flt-metatrain --memory flt --out optimizer/pretrained/mnemosyne_flt.pt [--iterations 300]
//                 [--estimator tbptt|pes] [--workers 8] [--unroll 10] [--horizon 100]
//                 [--families rastrigin,ackley,...] [--seed 0] [--checkpoint FILE] [--csv FILE]
//                 [--meta-lr 3e-3] [--meta-lr-end 0.1] [--threads 1]
//                 [--hidden 32] [--features 4] [--rpe-features 32] [--key-dim 4] [--value-dim 2]
//
// Resumes from --checkpoint when the file exists; deterministic for a given seed.
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

#include "cli_args.h"
#include "flt/optim/meta_train.h"
#include "flt/optim/mnemosyne.h"
#include "flt/runtime.h"

namespace {

[[noreturn]] void usage(const std::string& problem) {
  std::fprintf(stderr,
               "flt-metatrain: %s\n"
               "usage: flt-metatrain --out FILE [--memory flt|performer|none|lstm] [--iterations N]\n"
               "       [--estimator tbptt|pes] [--workers N] [--unroll N] [--horizon N] [--meta-lr X]\n"
               "       [--meta-lr-end FRACTION (cosine decay, 1 = constant)]\n"
               "       [--families a,b,...] [--seed N] [--checkpoint FILE] [--csv FILE] [--quiet]\n"
               "       [--threads N (default 1)]\n"
               "       [--hidden N] [--features N] [--rpe-features N] [--key-dim N] [--value-dim N]\n",
               problem.c_str());
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  flt::init();
  flt::optim::MetaTrainOptions options;
  flt::optim::LearnedOptimizerModelOptions model_options;
  std::string out;
  // Meta-training works on small tensors: a second thread gave no speed-up on 2 cores (about 9.6
  // iterations/s either way for the FLT memory), and one thread makes the result independent of the
  // machine's core count. Run two trainings side by side instead (scripts/optimizer-ablation).
  int threads = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage("missing value after " + arg);
      return argv[++i];
    };
    const auto integer = [&]() {
      const std::string v = value();
      const auto n = flt::demos::parse_integer(v);
      if (!n) usage("not an integer for " + arg + ": " + v);
      return *n;
    };
    const auto real = [&]() {
      const std::string v = value();
      const auto x = flt::demos::parse_number(v);
      if (!x) usage("not a number for " + arg + ": " + v);
      return *x;
    };
    try {
      if (arg == "--out") out = value();
      else if (arg == "--memory") model_options.memory(flt::optim::memory_from_name(value()));
      else if (arg == "--iterations") options.iterations = integer();
      else if (arg == "--estimator") options.estimator = flt::optim::meta_estimator_from_name(value());
      else if (arg == "--workers") options.workers = integer();
      else if (arg == "--unroll") options.unroll = integer();
      else if (arg == "--horizon") options.horizon = integer();
      else if (arg == "--meta-lr") options.meta_lr = real();
      else if (arg == "--meta-lr-end") options.meta_lr_end = real();
      else if (arg == "--seed") options.seed = static_cast<uint64_t>(integer());
      else if (arg == "--checkpoint") options.checkpoint = value();
      else if (arg == "--csv") options.csv = value();
      else if (arg == "--quiet") options.progress = false;
      else if (arg == "--threads") threads = static_cast<int>(integer());
      // The rule's shape (stored in the weights file); defaults as LearnedOptimizerModelOptions.
      else if (arg == "--hidden") model_options.hidden(integer());
      else if (arg == "--features") model_options.features(integer());
      else if (arg == "--rpe-features") model_options.rpe_features(integer());
      else if (arg == "--key-dim") model_options.key_dim(integer());
      else if (arg == "--value-dim") model_options.value_dim(integer());
      else if (arg == "--families") {
        options.families.clear();
        std::stringstream list(value());
        for (std::string name; std::getline(list, name, ',');) {
          options.families.push_back(flt::optim::task_family_from_name(name));
        }
      } else usage("unknown argument " + arg);
    } catch (const c10::Error& e) {
      usage(e.what_without_backtrace());
    }
  }
  if (out.empty()) usage("--out FILE is required");
  try {
    flt::set_threads(threads);
    torch::manual_seed(options.seed);
    model_options.seed(options.seed);
    flt::optim::LearnedOptimizerModel model(model_options);
    std::fprintf(stderr, "meta-training %s (%s, %lld iterations, %lld workers, unroll %lld, horizon %lld)\n",
                 flt::optim::memory_name(model_options.memory()).c_str(),
                 flt::optim::meta_estimator_name(options.estimator).c_str(),
                 static_cast<long long>(options.iterations), static_cast<long long>(options.workers),
                 static_cast<long long>(options.unroll), static_cast<long long>(options.horizon));
    const auto history = flt::optim::meta_train(model, options);
    flt::optim::save_model(model, out);
    double tail = 0.0;
    const size_t n = std::min<size_t>(20, history.size());
    for (size_t i = history.size() - n; i < history.size(); ++i) tail += history[i] / static_cast<double>(n);
    std::printf("wrote %s (mean meta-loss of the last %zu iterations: %.4f)\n", out.c_str(), n, tail);
  } catch (const c10::Error& e) {
    std::fprintf(stderr, "flt-metatrain: %s\n", e.what_without_backtrace());
    return 1;
  }
  return 0;
}
