"""What torch.distributed leaves to the program in data-parallel training: naming the rank that
died or hangs. A collective that fails says only that a connection broke or that it timed out;
the library's C++ communicator (flt::metatrain::connect) names the rank, and so does this, with
the same words::

    store = fltlab.distributed.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    model = DistributedDataParallel(net)
    with fltlab.distributed.naming_failed_ranks(store):
        for step in ...:  # a rank that dies or hangs: RuntimeError "... rank 1 did not report ..."

Each rank that sees a collective fail records it in the rendezvous store and waits up to 2 s for
the others' records; a rank without one died or hangs; a store that does not answer names rank 0,
which serves it.
"""

import contextlib
import datetime
import os
import threading

import torch.distributed as dist

__all__ = ["init_process_group", "naming_failed_ranks"]

_GRACE = datetime.timedelta(seconds=2)


def init_process_group(backend: str = "gloo", *,
                       timeout: datetime.timedelta = datetime.timedelta(seconds=300)):
    """torch.distributed.init_process_group over a TCPStore at MASTER_ADDR:MASTER_PORT (rank 0
    serves it) for RANK of WORLD_SIZE, as torchrun sets them; returns the store for
    naming_failed_ranks. A collective that waits longer than `timeout` fails."""
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    store = dist.TCPStore(os.environ.get("MASTER_ADDR", "127.0.0.1"),
                          int(os.environ.get("MASTER_PORT", "29500")), world_size, rank == 0,
                          timeout)
    dist.init_process_group(backend, store=store, rank=rank, world_size=world_size,
                            timeout=timeout)
    return store


def _missing_ranks(store, rank, world_size, grace):
    found = []

    def ask():
        try:
            store.set_timeout(grace)
            store.add(f"flt/failed/{rank}", 1)
            missing = [r for r in range(world_size) if r != rank]
            deadline = datetime.datetime.now() + grace
            while missing and datetime.datetime.now() < deadline:
                missing = [r for r in missing if store.add(f"flt/failed/{r}", 0) == 0]
                if missing:
                    threading.Event().wait(0.05)
            seconds = f"{grace.total_seconds():g}"
            if not missing:
                found.append("every other rank saw the failure too (a connection between ranks "
                             "broke)")
            elif len(missing) == 1:
                found.append(f"rank {missing[0]} did not report the failure within {seconds} s: "
                             f"it died or hangs")
            else:
                found.append(f"ranks {' '.join(map(str, missing))} did not report the failure "
                             f"within {seconds} s: the one that died or hangs is among them")
        except Exception as error:  # noqa: BLE001 (the store's own errors say why it is gone)
            found.append(f"the rendezvous that rank 0 serves is gone ({error}): rank 0 died or "
                         f"hangs")

    # A thread of its own, abandoned after grace + 1 s: a store whose server (rank 0) is stopped
    # may never answer, and that silence names rank 0.
    asking = threading.Thread(target=ask, daemon=True)
    asking.start()
    asking.join(grace.total_seconds() + 1)
    return found[0] if found else ("the rendezvous that rank 0 serves does not answer: rank 0 "
                                   "died or hangs")


@contextlib.contextmanager
def naming_failed_ranks(store):
    """Re-raises Gloo's RuntimeError from the block (a failed collective) as one that names the
    ranks that died or hang: "rank R of W: a collective failed: another rank died, or hung for
    longer than the timeout (T s); rank 1 did not report the failure within 2 s: it died or hangs:
    <Gloo's message>". `store` is init_process_group's (its timeout is the collectives')."""
    try:
        yield
    except RuntimeError as error:
        if "gloo/" not in str(error):  # not a collective's failure: as it was
            raise
        rank, world_size, timeout = dist.get_rank(), dist.get_world_size(), store.timeout
        grace = min(_GRACE, timeout)
        raise RuntimeError(
            f"rank {rank} of {world_size}: a collective failed: another rank died, or hung for "
            f"longer than the timeout ({timeout.total_seconds():g} s); "
            f"{_missing_ranks(store, rank, world_size, grace)}: {error}") from error
