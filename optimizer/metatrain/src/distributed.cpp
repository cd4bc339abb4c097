#include "flt/metatrain/distributed.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <future>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#ifdef FLT_WITH_C10D
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#endif

namespace flt::metatrain {

namespace {

/// The integer in environment variable `name`, or `fallback` when it is unset.
int environment_integer(const char* name, int fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text, &end, 10);
  TORCH_CHECK(*end == '\0' && errno == 0 && value >= 0 && value <= 1 << 30,
              "distributed: environment variable ", name, " must be a non-negative integer, got \"",
              text, "\"");
  return static_cast<int>(value);
}

}  // namespace

Rendezvous Rendezvous::from_environment() {
  Rendezvous out;
  out.rank = environment_integer("RANK", out.rank);
  out.world_size = environment_integer("WORLD_SIZE", out.world_size);
  if (const char* addr = std::getenv("MASTER_ADDR"); addr != nullptr && *addr != '\0') {
    out.master_addr = addr;
  }
  out.master_port = environment_integer("MASTER_PORT", out.master_port);
  TORCH_CHECK(out.master_port > 0 && out.master_port < 65536,
              "distributed: MASTER_PORT must be a port number in 1..65535, got ", out.master_port);
  return out;
}

#ifndef FLT_WITH_C10D

bool distributed_supported() {
  return false;
}

std::shared_ptr<Communicator> connect(const Rendezvous& rendezvous) {
  TORCH_CHECK(false,
              "distributed: this build of flt has no c10d Gloo process group, so WORLD_SIZE ",
              rendezvous.world_size,
              " cannot be joined (it was configured where c10d's Gloo headers, Debian "
              "libgloo-dev, or LibTorch's c10d symbols were missing; see FLT_WITH_DISTRIBUTED)");
}

#else

namespace {

std::string reason(const std::exception& e) {
  if (const auto* error = dynamic_cast<const c10::Error*>(&e))
    return error->what_without_backtrace();
  return e.what();
}

double seconds(std::chrono::milliseconds duration) {
  return duration.count() / 1000.0;
}

std::string store_key(const char* what, int rank) {
  return std::string("flt/") + what + "/" + std::to_string(rank);
}

/// After a failed collective: which ranks are gone. Each rank that sees the failure records it in
/// the store, then waits up to `grace` for the others' records; a rank without one died or hangs.
/// Runs on a thread of its own that is abandoned after grace + 1 s, since a TCPStore whose server
/// (rank 0) is stopped may never answer; that silence names rank 0.
std::string missing_ranks(const c10::intrusive_ptr<c10d::Store>& store, int rank, int world_size,
                          std::chrono::milliseconds grace, bool rank0_serves) {
  const std::string store_gone =
      rank0_serves ? "the rendezvous that rank 0 serves" : "the rendezvous file";
  auto found = std::make_shared<std::promise<std::string> >();
  auto answer = found->get_future();
  std::thread([store, rank, world_size, grace, found, store_gone, rank0_serves] {
    try {
      store->setTimeout(grace);
      store->set(store_key("failed", rank), std::vector<uint8_t>{1});
      std::vector<int> missing;
      for (int r = 0; r < world_size; ++r)
        if (r != rank) missing.push_back(r);
      const auto deadline = std::chrono::steady_clock::now() + grace;
      while (!missing.empty() && std::chrono::steady_clock::now() < deadline) {
        std::vector<int> still;
        for (int r : missing)
          if (!store->check({store_key("failed", r)})) still.push_back(r);
        missing.swap(still);
        if (!missing.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      std::ostringstream text;
      if (missing.empty()) {
        text << "every other rank saw the failure too (a connection between ranks broke)";
      } else {
        text << (missing.size() == 1 ? "rank" : "ranks");
        for (int r : missing) text << " " << r;
        text << " did not report the failure within " << seconds(grace) << " s: "
             << (missing.size() == 1 ? "it died or hangs"
                                     : "the one that died or hangs is "
                                       "among them");
      }
      found->set_value(text.str());
    } catch (const std::exception& e) {
      found->set_value(store_gone + " is gone (" + reason(e) + ")" +
                       (rank0_serves ? ": rank 0 died or hangs" : ""));
    }
  }).detach();
  if (answer.wait_for(grace + std::chrono::seconds(1)) == std::future_status::ready)
    return answer.get();
  return store_gone + " does not answer" + (rank0_serves ? ": rank 0 died or hangs" : "");
}

class GlooCommunicator final : public Communicator {
 public:
  GlooCommunicator(c10::intrusive_ptr<c10d::ProcessGroupGloo> group,
                   c10::intrusive_ptr<c10d::Store> store, const Rendezvous& rendezvous)
      : group_(std::move(group)), store_(std::move(store)), rendezvous_(rendezvous) {}

  int rank() const override { return rendezvous_.rank; }
  int world_size() const override { return rendezvous_.world_size; }

  std::vector<torch::Tensor> allgather(const torch::Tensor& local) override {
    std::vector<torch::Tensor> input{local.contiguous()};
    std::vector<std::vector<torch::Tensor> > output(1);
    for (int r = 0; r < world_size(); ++r) output[0].push_back(at::empty_like(input[0]));
    run("allgather", [&] { return group_->allgather(output, input); });
    return output[0];
  }

  void broadcast(torch::Tensor& tensor) override {
    TORCH_CHECK(tensor.is_contiguous(), "distributed: broadcast needs a contiguous tensor");
    std::vector<torch::Tensor> tensors{tensor};
    run("broadcast", [&] { return group_->broadcast(tensors); });
  }

  void barrier() override {
    run("barrier", [&] { return group_->barrier(); });
  }

  // Gloo's ring all-reduce: each chunk is summed once and then copied to every rank, so every
  // rank holds the same bits.
  void allreduce(torch::Tensor& tensor) override {
    TORCH_CHECK(tensor.is_contiguous(), "distributed: allreduce needs a contiguous tensor");
    std::vector<torch::Tensor> tensors{tensor};
    run("allreduce", [&] { return group_->allreduce(tensors); });
  }

 private:
  /// Starts a collective and waits for it; Gloo fails it when a peer's connection breaks (a rank
  /// died) or after the process group's timeout (a rank hangs or is far behind).
  template <typename Start>
  void run(const char* what, Start start) {
    try {
      start()->wait();
    } catch (const std::exception& e) {
      const auto grace = std::min<std::chrono::milliseconds>(rendezvous_.timeout, kGrace);
      TORCH_CHECK(false, "distributed: rank ", rank(), " of ", world_size(), ": the ", what,
                  " failed: another rank died, or hung for longer than the timeout (",
                  seconds(rendezvous_.timeout), " s); ",
                  missing_ranks(store_, rank(), world_size(), grace,
                                rendezvous_.method.rfind("file://", 0) != 0),
                  ": ", reason(e));
    }
  }

  /// How long a rank that saw a collective fail waits for the others to report it: the ranks
  /// beside a dead one see it at once, all see a hung one at their timeout.
  static constexpr std::chrono::milliseconds kGrace{2000};

  c10::intrusive_ptr<c10d::ProcessGroupGloo> group_;
  c10::intrusive_ptr<c10d::Store> store_;  // kept alive with the group: rank 0 serves the TCPStore
  Rendezvous rendezvous_;
};

bool is_loopback(const std::string& address) {
  return address == "localhost" || address.rfind("127.", 0) == 0 || address == "::1";
}

/// The Gloo device (network interface) of this rank: GLOO_SOCKET_IFNAME as in PyTorch; else the
/// loopback address when the master is on loopback (one machine); else the interface this host
/// name resolves to.
std::shared_ptr< ::gloo::transport::Device> gloo_device(const Rendezvous& rendezvous) {
  if (const char* name = std::getenv("GLOO_SOCKET_IFNAME"); name != nullptr && *name != '\0') {
    return c10d::ProcessGroupGloo::createDeviceForInterface(name);
  }
  if (rendezvous.method.empty() && is_loopback(rendezvous.master_addr)) {
    return c10d::ProcessGroupGloo::createDeviceForHostname(rendezvous.master_addr);
  }
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

/// The store every rank meets in: rank 0 serves a TCPStore at MASTER_ADDR:MASTER_PORT and the
/// others connect to it, or all open the same FileStore.
c10::intrusive_ptr<c10d::Store> open_store(const Rendezvous& rendezvous) {
  const std::string file_prefix = "file://";
  if (rendezvous.method.rfind(file_prefix, 0) == 0) {
    const auto path = rendezvous.method.substr(file_prefix.size());
    TORCH_CHECK(!path.empty(), "distributed: --rendezvous file:// needs a path, got \"",
                rendezvous.method, "\"");
    try {
      auto store = c10::make_intrusive<c10d::FileStore>(path, rendezvous.world_size);
      store->setTimeout(rendezvous.timeout);
      return store;
    } catch (const std::exception& e) {
      TORCH_CHECK(false, "distributed: rank ", rendezvous.rank, " cannot open the rendezvous file ",
                  path, ": ", reason(e));
    }
  }
  TORCH_CHECK(rendezvous.method.empty() || rendezvous.method == "env://",
              "distributed: unknown rendezvous \"", rendezvous.method,
              "\" (expected file://PATH, or env:// for MASTER_ADDR and MASTER_PORT)");
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(rendezvous.master_port);
  options.isServer = rendezvous.rank == 0;
  options.numWorkers = rendezvous.world_size;
  options.waitWorkers = false;  // join() below waits, naming who is missing
  options.timeout = rendezvous.timeout;
  try {
    return c10::make_intrusive<c10d::TCPStore>(rendezvous.master_addr, options);
  } catch (const std::exception& e) {
    TORCH_CHECK(false, "distributed: rank ", rendezvous.rank,
                rendezvous.rank == 0 ? " cannot serve" : " cannot reach",
                " the master at MASTER_ADDR:MASTER_PORT = ", rendezvous.master_addr, ":",
                rendezvous.master_port, " within ", seconds(rendezvous.timeout), " s: ", reason(e));
  }
}

/// Every rank announces itself and its WORLD_SIZE, then waits for all the others: a rank that
/// never comes, a rank claimed twice, or ranks that disagree on WORLD_SIZE give an error naming
/// it instead of a hang in Gloo's own rendezvous.
void join(c10d::Store& store, const Rendezvous& rendezvous) {
  const auto as_bytes = [](const std::string& text) {
    return std::vector<uint8_t>(text.begin(), text.end());
  };
  TORCH_CHECK(store.add(store_key("claims", rendezvous.rank), 1) == 1,
              "distributed: two processes ", "were started with RANK ", rendezvous.rank,
              " (WORLD_SIZE ", rendezvous.world_size, "): every rank must be given once",
              rendezvous.method.empty() ? ""
                                        : "; or the rendezvous file is left over from an earlier "
                                          "run: give each run a new path");
  store.set(store_key("world_size", rendezvous.rank),
            as_bytes(std::to_string(rendezvous.world_size)));
  std::vector<std::string> everyone;
  for (int r = 0; r < rendezvous.world_size; ++r) everyone.push_back(store_key("world_size", r));
  try {
    store.wait(everyone, rendezvous.timeout);
  } catch (const std::exception& e) {
    std::ostringstream missing;
    try {
      for (int r = 0; r < rendezvous.world_size; ++r) {
        if (!store.check({store_key("world_size", r)})) missing << " " << r;
      }
    } catch (const std::exception&) {
      missing << " unknown (the rendezvous closed: rank 0 stopped)";
    }
    TORCH_CHECK(
        false, "distributed: rank ", rendezvous.rank, " waited ", seconds(rendezvous.timeout),
        " s for WORLD_SIZE ", rendezvous.world_size, " ranks; missing ranks:", missing.str(),
        " (is WORLD_SIZE right, and were they started with the same rendezvous?): ", reason(e));
  }
  for (int r = 0; r < rendezvous.world_size; ++r) {
    const auto theirs = store.get(store_key("world_size", r));
    const std::string text(theirs.begin(), theirs.end());
    TORCH_CHECK(text == std::to_string(rendezvous.world_size), "distributed: rank ", r,
                " was started with WORLD_SIZE ", text, ", rank ", rendezvous.rank, " with ",
                rendezvous.world_size, ": every rank needs the same WORLD_SIZE");
  }
}

}  // namespace

bool distributed_supported() {
  return true;
}

std::shared_ptr<Communicator> connect(const Rendezvous& rendezvous) {
  TORCH_CHECK(rendezvous.world_size >= 1, "distributed: WORLD_SIZE must be at least 1, got ",
              rendezvous.world_size);
  TORCH_CHECK(rendezvous.rank >= 0 && rendezvous.rank < rendezvous.world_size,
              "distributed: RANK must be in 0..WORLD_SIZE-1 = 0..", rendezvous.world_size - 1,
              ", got ", rendezvous.rank);
  TORCH_CHECK(rendezvous.timeout.count() > 0, "distributed: the timeout must be positive, got ",
              seconds(rendezvous.timeout), " s");
  // A write to a dead rank's socket must become Gloo's error, not SIGPIPE killing this process
  // (Python, where c10d usually runs, ignores SIGPIPE too).
  std::signal(SIGPIPE, SIG_IGN);
  auto store = open_store(rendezvous);
  join(*store, rendezvous);
  auto options = c10d::ProcessGroupGloo::Options::create(rendezvous.timeout);
  options->threads = 1;  // one collective at a time
  try {
    options->devices.push_back(gloo_device(rendezvous));
    auto group = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rendezvous.rank,
                                                             rendezvous.world_size, options);
    return std::make_shared<GlooCommunicator>(std::move(group), std::move(store), rendezvous);
  } catch (const std::exception& e) {
    TORCH_CHECK(false, "distributed: rank ", rendezvous.rank, " of ", rendezvous.world_size,
                " could not connect Gloo to the other ranks within ", seconds(rendezvous.timeout),
                " s: ", reason(e));
  }
}

#endif  // FLT_WITH_C10D

}  // namespace flt::metatrain
