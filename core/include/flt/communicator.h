#pragma once
// The processes ("ranks") a program trains or meta-trains with, as the library sees them: the few
// collectives it calls, behind an interface so that the layers below meta-training (the
// optimizers) need neither c10d nor Gloo. flt::metatrain::connect (flt/metatrain/distributed.h)
// returns one over c10d's Gloo process group; a program with a process group of its own (NCCL,
// MPI) can wrap it in a class of a few lines.
//
// Data-parallel training (docs/data-parallel.md):
//
//   auto ranks = flt::metatrain::connect(flt::metatrain::Rendezvous::from_environment());
//   flt::optim::ScheduleMnemosyne opt(model->parameters(),
//                                     flt::optim::ScheduleMnemosyneOptions().communicator(ranks));
//   for (...) {   // each rank on its own shard of the batch
//     opt.zero_grad(); auto loss = ...; loss.backward();
//     flt::average_gradients(*ranks, model->parameters());   // the ranks' mean gradient
//     opt.report_loss(loss.item<double>());                  // averaged over the ranks in step()
//     opt.step();
//   }

#include <torch/types.h>

#include <vector>

namespace flt {

/// The collectives the library needs. Every rank calls them in the same order; a call that cannot
/// complete (a rank died, or hung past the timeout) throws naming the rank and the timeout.
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  /// Every rank's `local` (the same shape and dtype on every rank), in rank order.
  virtual std::vector<torch::Tensor> allgather(const torch::Tensor& local) = 0;
  /// Rank 0's `tensor` copied into `tensor` on every other rank (same shape and dtype everywhere).
  virtual void broadcast(torch::Tensor& tensor) = 0;
  virtual void barrier() = 0;
  /// The sum over the ranks of `tensor` (contiguous, the same shape and dtype on every rank),
  /// written into `tensor` on every rank: the same bits on every rank. This default gathers every
  /// rank's tensor and adds them in rank order; a communicator with a native all-reduce overrides
  /// it.
  virtual void allreduce(torch::Tensor& tensor);
};

/// Data parallelism's gradient exchange: replaces each parameter's gradient by its mean over the
/// ranks, (sum over ranks) / world_size, the same bits on every rank. One all-reduce per dtype and
/// device (the gradients flattened in parameter order, as DistributedDataParallel's buckets).
/// Every rank passes the same parameters, each with a dense gradient (a parameter without one is
/// named: data parallelism needs every rank to contribute to every gradient).
void average_gradients(Communicator& communicator, const std::vector<torch::Tensor>& parameters);

}  // namespace flt
