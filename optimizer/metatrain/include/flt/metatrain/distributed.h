#pragma once
// Processes that meta-train or train together (docs/design.md section 5, docs/data-parallel.md):
// PyTorch's c10d with the Gloo backend, rendezvous by a TCPStore (the RANK / WORLD_SIZE /
// MASTER_ADDR / MASTER_PORT convention of torchrun) or a FileStore (`file://PATH`, one machine or
// a shared file system).
//
//   auto rendezvous = flt::metatrain::Rendezvous::from_environment();   // RANK, WORLD_SIZE, ...
//   MetaTrainOptions options;
//   if (rendezvous.world_size > 1) options.communicator(flt::metatrain::connect(rendezvous));
//   flt::metatrain::meta_train(model, options);   // ranks split the workers; rank 0 writes files
//
// Data-parallel training with the same communicator: flt/communicator.h.
//
// This header does not include c10d: a program that never calls `connect` needs nothing of it, and
// a build without the c10d Gloo headers (Debian libgloo-dev) still has these declarations;
// `connect` then throws saying so (`distributed_supported()` tells beforehand).

#include <torch/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "flt/communicator.h"

namespace flt::metatrain {

/// The collectives meta-training and data-parallel training need (flt/communicator.h).
using Communicator = flt::Communicator;

/// Where and how the ranks meet.
struct Rendezvous {
  int rank = 0;
  int world_size = 1;
  /// "" (TCP: master_addr:master_port, rank 0 listens there) or "file://PATH" (a FileStore: a file
  /// every rank can open that does not exist before the first rank starts).
  std::string method;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;  ///< torchrun's default
  /// How long a rank waits for the others: to join at the start, and in every collective.
  std::chrono::milliseconds timeout = std::chrono::seconds(300);

  /// RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT as torchrun sets them (unset: 0, 1, 127.0.0.1,
  /// 29500); a malformed value throws naming the variable.
  static Rendezvous from_environment();
};

/// Whether this build has c10d's Gloo process group (found when the library was configured).
bool distributed_supported();

/// Joins the other ranks (blocks until all `world_size` have joined or the timeout passes) and
/// returns their communicator (its allreduce is Gloo's). Sets SIGPIPE to be ignored, as Python
/// does, so that a rank that died is reported by the next collective instead of killing this
/// process. Throws naming the address when the master cannot be reached, the world size when ranks
/// disagree about it or too few join, and the rank when two processes claim it. A collective that
/// fails later (a rank died, or hung past the timeout) throws naming the ranks that did not report
/// the failure within a few seconds (the one that died or hangs), or rank 0 when the rendezvous it
/// serves no longer answers.
std::shared_ptr<Communicator> connect(const Rendezvous& rendezvous);

}  // namespace flt::metatrain
