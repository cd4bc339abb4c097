// Distributed meta-training's contract at the library boundary: the rendezvous read from torchrun's
// environment variables, and the errors that name a bad value before any process is contacted.
// Several processes on loopback: tests/cli/metatrain_distributed.sh (ctest
// metatrain_distributed_*).
#include <gtest/gtest.h>

#include <cstdlib>

#include "flt/metatrain/distributed.h"
#include "flt/metatrain/meta_train.h"
#include "test_util.h"

namespace fo = flt::optim;

namespace fm = flt::metatrain;
using namespace flt::testing;

namespace {

/// Sets the torchrun variables for one test and restores "unset" afterwards.
struct Environment {
  Environment(const char* rank, const char* world_size, const char* addr, const char* port) {
    set("RANK", rank);
    set("WORLD_SIZE", world_size);
    set("MASTER_ADDR", addr);
    set("MASTER_PORT", port);
  }
  ~Environment() {
    for (const char* name : {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}) unsetenv(name);
  }
  static void set(const char* name, const char* value) {
    if (value == nullptr) {
      unsetenv(name);
    } else {
      setenv(name, value, /*overwrite=*/1);
    }
  }
};

/// A communicator that is never asked to communicate: meta_train must refuse it first.
class Unconnected final : public fm::Communicator {
 public:
  Unconnected(int rank, int world_size) : rank_(rank), world_size_(world_size) {}
  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  std::vector<torch::Tensor> allgather(const torch::Tensor&) override {
    ADD_FAILURE() << "allgather called";
    return {};
  }
  void broadcast(torch::Tensor&) override { ADD_FAILURE() << "broadcast called"; }
  void barrier() override { ADD_FAILURE() << "barrier called"; }

 private:
  int rank_, world_size_;
};

}  // namespace

class Distributed : public flt::testing::SeededTest {};

TEST_F(Distributed, Rendezvous_ReadsTorchrunVariables) {
  {
    Environment env(nullptr, nullptr, nullptr, nullptr);
    const auto r = fm::Rendezvous::from_environment();
    EXPECT_EQ(r.rank, 0);
    EXPECT_EQ(r.world_size, 1);
    EXPECT_EQ(r.master_addr, "127.0.0.1");
    EXPECT_EQ(r.master_port, 29500);
  }
  Environment env("3", "4", "10.1.2.3", "1234");
  const auto r = fm::Rendezvous::from_environment();
  EXPECT_EQ(r.rank, 3);
  EXPECT_EQ(r.world_size, 4);
  EXPECT_EQ(r.master_addr, "10.1.2.3");
  EXPECT_EQ(r.master_port, 1234);
}

TEST_F(Distributed, Rendezvous_NamesAMalformedVariable) {
  {
    Environment env("one", "2", nullptr, nullptr);
    expect_error([] { fm::Rendezvous::from_environment(); }, {"RANK", "\"one\""});
  }
  {
    Environment env("0", "2", nullptr, "70000");
    expect_error([] { fm::Rendezvous::from_environment(); }, {"MASTER_PORT", "70000"});
  }
}

TEST_F(Distributed, Connect_NamesABadRankOrRendezvous) {
  fm::Rendezvous r;
  r.rank = 2;
  r.world_size = 2;
  if (!fm::distributed_supported()) {
    expect_error([&] { fm::connect(r); }, {"no c10d Gloo", "FLT_WITH_DISTRIBUTED"});
    return;
  }
  expect_error([&] { fm::connect(r); }, {"RANK must be in 0..WORLD_SIZE-1 = 0..1", "got 2"});
  r.rank = 0;
  r.method = "tcp://somewhere";
  expect_error([&] { fm::connect(r); }, {"unknown rendezvous", "tcp://somewhere"});
}

TEST_F(Distributed, MetaTrain_NeedsAWorkerPerRank) {
  fm::MetaTrainOptions options;
  options.workers(2);
  options.iterations(1);
  options.progress(false);
  options.communicator(std::make_shared<Unconnected>(0, 3));
  expect_error([&] { fm::meta_train(fo::LearnedOptimizerModel(), options); },
               {"2 workers cannot be shared by 3 ranks"});
}
