// Data-parallel training with the learned optimizers over c10d Gloo: every rank holds the whole
// model, computes the gradient of its shard of each global batch, and the ranks average their
// gradients before each step, so every rank takes the same step (docs/data-parallel.md).
//
//   scripts/launch-ranks 2 build/examples/flt-data-parallel --optimizer schedule
//
// (or torchrun --nproc_per_node 2 --no_python ..., with a torchrun that runs: Debian 12's does
// not), or by hand, one command per rank (the variables torchrun sets; across machines,
// MASTER_ADDR is rank 0's address):
//
//   export WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500
//   RANK=0 build/examples/flt-data-parallel & RANK=1 build/examples/flt-data-parallel
//
// Flags: --optimizer coordinate|schedule (default schedule, flt::optim::Mnemosyne), --steps N
// (200), --batch B (global batch, 256), --accumulate K (micro-batches per rank and step, 1),
// --hidden H (256), --threads T (cores / ranks on this machine), --timeout S (60), --log-every N
// (20), --stop-at S (end this sitting after step S of --steps, as a batch job's time limit would),
// --save PATH (at the end of the sitting: rank 0 writes PATH; a PATH with %r is written by every
// rank, %r its rank), --resume PATH (every rank continues from a saved sitting, on any number of
// ranks). WORLD_SIZE 1 (or unset) runs alone, without a rendezvous.
#include <ATen/CPUGeneratorImpl.h>
#include <flt/flt.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

namespace {

namespace fo = flt::optim;

struct Flags {
  std::string optimizer = "schedule";
  int64_t steps = 200, stop_at = 0, batch = 256, accumulate = 1, hidden = 256, log_every = 20;
  int64_t threads = 0, timeout = 60;
  std::string save, resume;
};

Flags parse(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help") {
      std::printf(
          "usage: %s [--optimizer coordinate|schedule] [--steps N] [--stop-at S] "
          "[--batch B] [--accumulate K] [--hidden H] [--threads T] [--timeout S] "
          "[--log-every N] [--save PATH] [--resume PATH]\n(RANK, WORLD_SIZE, "
          "MASTER_ADDR, MASTER_PORT as torchrun sets them; see examples/data_parallel.cpp)\n",
          argv[0]);
      std::exit(0);
    }
    if (i + 1 >= argc) throw std::invalid_argument(flag + " needs a value");
    const std::string value = argv[++i];
    const auto number = [&] {
      size_t end = 0;
      long long v = 0;
      try {
        v = std::stoll(value, &end);
      } catch (const std::logic_error&) {
        end = 0;
      }
      if (end == 0 || end != value.size() || v < 1)
        throw std::invalid_argument(flag + " must be an integer >= 1, got " + value);
      return v;
    };
    // The flags that take a whole number, and where each goes.
    const std::map<std::string, int64_t*> counts = {
        {"--steps", &f.steps},           {"--stop-at", &f.stop_at}, {"--batch", &f.batch},
        {"--accumulate", &f.accumulate}, {"--hidden", &f.hidden},   {"--log-every", &f.log_every},
        {"--threads", &f.threads},       {"--timeout", &f.timeout}};
    if (const auto it = counts.find(flag); it != counts.end())
      *it->second = number();
    else if (flag == "--optimizer")
      f.optimizer = value;
    else if (flag == "--save")
      f.save = value;
    else if (flag == "--resume")
      f.resume = value;
    else
      throw std::invalid_argument("unknown flag " + flag);
  }
  if (f.stop_at == 0 || f.stop_at > f.steps) f.stop_at = f.steps;
  if (f.optimizer != "coordinate" && f.optimizer != "schedule")
    throw std::invalid_argument("--optimizer must be coordinate or schedule, got " + f.optimizer);
  return f;
}

/// A classifier of 32 features into 8 classes, the same initial weights on every rank.
struct ClassifierImpl : torch::nn::Module {
  explicit ClassifierImpl(int64_t hidden)
      : layer1(register_module("layer1", torch::nn::Linear(32, hidden))),
        layer2(register_module("layer2", torch::nn::Linear(hidden, hidden))),
        head(register_module("head", torch::nn::Linear(hidden, 8))) {}
  torch::Tensor forward(const torch::Tensor& x) {  // (N, 32) -> (N, 8) logits
    return head(torch::relu(layer2(torch::relu(layer1(x)))));
  }
  torch::nn::Linear layer1, layer2, head;
};
TORCH_MODULE(Classifier);

/// `rows` examples drawn with `seed` (global batch `step` has seed 1000 + step: the same on every
/// rank, whatever the world size): inputs (rows, 32) and the class a fixed random teacher gives
/// each, (rows).
std::pair<torch::Tensor, torch::Tensor> examples(uint64_t seed, int64_t rows) {
  static const auto teacher = torch::randn({32, 8}, at::make_generator<at::CPUGeneratorImpl>(7));
  const auto x = torch::randn({rows, 32}, at::make_generator<at::CPUGeneratorImpl>(seed));
  return {x, x.matmul(teacher).argmax(1)};
}

/// Trains from `first_step` to flags.stop_at; `ranks` is null when this process is alone.
template <class Optimizer>
void train(Classifier& model, Optimizer& opt, const Flags& flags, int64_t first_step,
           const std::shared_ptr<flt::Communicator>& ranks) {
  const int rank = ranks ? ranks->rank() : 0, world = ranks ? ranks->world_size() : 1;
  const int64_t micro = flags.batch / (world * flags.accumulate);  // rows of one micro-batch
  const auto params = model->parameters();
  const auto [x_val, y_val] = examples(/*seed=*/1, /*rows=*/1024);  // held out
  auto start = std::chrono::steady_clock::now();
  int64_t timed_from = first_step;
  for (int64_t step = first_step; step < flags.stop_at; ++step) {
    if (step == first_step + 5) {  // steps/s after the first steps (allocation, first-touch)
      start = std::chrono::steady_clock::now();
      timed_from = step;
    }
    const auto [x, y] = examples(1000 + static_cast<uint64_t>(step), flags.batch);
    opt.zero_grad();
    // This rank's micro-batches: rank r takes the r-th run of `accumulate` of them. Each loss is
    // divided by the micro-batches of all ranks, so the averaged gradient is the global batch's.
    double loss_sum = 0.0;
    for (int64_t k = 0; k < flags.accumulate; ++k) {
      const int64_t row = (rank * flags.accumulate + k) * micro;
      const auto loss = torch::nn::functional::cross_entropy(
          model->forward(x.narrow(0, row, micro)), y.narrow(0, row, micro));
      loss.backward();
      loss_sum += loss.template item<double>();
    }
    if (ranks) {
      flt::average_gradients(*ranks, params);  // sum over the ranks / world size
    }
    if (flags.accumulate > 1) {
      for (auto& p : params) p.mutable_grad().div_(static_cast<double>(flags.accumulate));
    }
    // This rank's loss; ScheduleMnemosyne averages it over the ranks (its communicator option),
    // CoordinateMnemosyne does not read it.
    opt.report_loss(loss_sum / static_cast<double>(flags.accumulate));
    // A metric rank 0 alone evaluates: every rank records rank 0's value.
    if (rank == 0 && (step + 1) % 50 == 0) {
      torch::NoGradGuard no_grad;
      opt.report_validation(torch::nn::functional::cross_entropy(model->forward(x_val), y_val)
                                .template item<double>());
    }
    opt.step();
    if (rank == 0 && ((step + 1) % flags.log_every == 0 || step + 1 == flags.stop_at)) {
      std::printf("step %lld  loss %.4f (rank 0's shard)\n", static_cast<long long>(step + 1),
                  loss_sum / static_cast<double>(flags.accumulate));
      std::fflush(stdout);
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  torch::NoGradGuard no_grad;
  const double validation =
      torch::nn::functional::cross_entropy(model->forward(x_val), y_val).template item<double>();
  if (rank == 0) {
    std::printf(
        "done: %d rank(s) x %d thread(s), global batch %lld, validation loss %.4f, %.2f "
        "steps/s\n",
        world, torch::get_num_threads(), static_cast<long long>(flags.batch), validation,
        flags.stop_at > timed_from ? (flags.stop_at - timed_from) / seconds : 0.0);
  }
}

}  // namespace

int main(int argc, char** argv) try {
  const Flags flags = parse(argc, argv);
  flt::init(/*quiet=*/true);
  // 1. Join the other ranks (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, as torchrun sets them).
  auto rendezvous = flt::metatrain::Rendezvous::from_environment();
  rendezvous.timeout = std::chrono::seconds(flags.timeout);
  std::shared_ptr<flt::Communicator> ranks;
  if (rendezvous.world_size > 1) ranks = flt::metatrain::connect(rendezvous);
  const int world = rendezvous.world_size;
  if (flags.batch % (world * flags.accumulate) != 0) {
    throw std::invalid_argument("--batch " + std::to_string(flags.batch) +
                                " must be a multiple of WORLD_SIZE x --accumulate = " +
                                std::to_string(world * flags.accumulate));
  }
  // The ranks of one machine share its cores (torchrun's LOCAL_WORLD_SIZE, else WORLD_SIZE).
  const char* local = std::getenv("LOCAL_WORLD_SIZE");
  const int here = local != nullptr ? std::max(1, std::atoi(local)) : world;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  flt::set_threads(flags.threads > 0 ? static_cast<int>(flags.threads) : std::max(1, cores / here));

  // 2. The model: the same initial weights on every rank (rank 0's, sent to the others).
  torch::manual_seed(0);
  Classifier model(flags.hidden);
  if (ranks) {
    torch::NoGradGuard no_grad;
    for (auto& p : model->parameters()) ranks->broadcast(p);
  }

  // 3. The optimizer, then the saved run to continue, if any.
  const auto run = [&](auto& opt) {
    int64_t first_step = 0;
    if (!flags.resume.empty()) {
      torch::serialize::InputArchive archive;
      archive.load_from(flags.resume);
      torch::serialize::InputArchive part;
      archive.read("model", part);
      model->load(part);
      archive.read("optimizer", part);
      opt.load(part);
      torch::Tensor step;
      archive.read("step", step);
      first_step = step.item<int64_t>();
    }
    train(model, opt, flags, first_step, ranks);
    const int rank = ranks ? ranks->rank() : 0;
    if (!flags.save.empty() && (rank == 0 || flags.save.find("%r") != std::string::npos)) {
      std::string path = flags.save;
      if (const auto at = path.find("%r"); at != std::string::npos)
        path.replace(at, 2, std::to_string(rank));
      torch::serialize::OutputArchive archive, model_part, optimizer_part;
      model->save(model_part);
      opt.save(optimizer_part);
      archive.write("model", model_part);
      archive.write("optimizer", optimizer_part);
      archive.write("step", torch::tensor(flags.stop_at));
      archive.save_to(path);
    }
  };
  if (flags.optimizer == "coordinate") {
    fo::CoordinateMnemosyne opt(model->parameters(),
                                fo::CoordinateMnemosyneOptions().total_steps(flags.steps));
    run(opt);
  } else {
    // The reported loss and validation are averaged over `ranks` at every step.
    fo::ScheduleMnemosyne opt(
        model->parameters(),
        fo::ScheduleMnemosyneOptions().total_steps(flags.steps).communicator(ranks));
    run(opt);
  }
  return 0;
} catch (const std::exception& e) {
  const auto* error = dynamic_cast<const c10::Error*>(&e);
  std::cerr << "flt-data-parallel: " << (error ? error->what_without_backtrace() : e.what())
            << "\n";
  return 1;
}
