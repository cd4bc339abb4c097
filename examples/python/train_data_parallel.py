#!/usr/bin/env python3
"""Data-parallel training with fltlab's learned optimizers: torch.distributed (gloo) and
DistributedDataParallel, every rank on its shard of each global batch.

    python3 examples/python/train_data_parallel.py --ranks 2 [--optimizer coordinate]

starts 2 ranks with torch.multiprocessing on this machine; started with RANK, WORLD_SIZE,
MASTER_ADDR and MASTER_PORT set (torchrun, scripts/launch-ranks, a batch system), it runs as that
rank. From a build tree: PYTHONPATH=build/python. DDP averages the gradients;
``ScheduleMnemosyne(process_group=WORLD)`` averages the reported loss and validation metric, so the
ranks stay bit-identical. The model, data and flags are examples/data_parallel.cpp's: --steps,
--stop-at, --batch (global), --accumulate, --hidden, --threads, --timeout, --log-every, --save
(rank 0 writes it; %r in the path: every rank, %r its rank), --resume (continue a saved run, on any
number of ranks).
"""

import argparse
import contextlib
import datetime
import os
import socket
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel

import fltlab


def examples(seed, rows):
    """`rows` examples drawn with `seed`: inputs (rows, 32) and the class a fixed random teacher
    gives each, (rows). Global batch `step` has seed 1000 + step: the same on every rank."""
    teacher = torch.randn(32, 8, generator=torch.Generator().manual_seed(7))
    x = torch.randn(rows, 32, generator=torch.Generator().manual_seed(seed))
    return x, (x @ teacher).argmax(1)


def train(rank, world, args):
    """One rank's run; world 1 runs alone, without torch.distributed."""
    torch.set_num_threads(args.threads or max(1, (os.cpu_count() or 1) // world))
    store = None
    if world > 1:
        # A TCPStore at MASTER_ADDR:MASTER_PORT; a collective that waits longer than the timeout
        # fails instead of hanging, and naming_failed_ranks (below) names the rank it waited for.
        os.environ.update(RANK=str(rank), WORLD_SIZE=str(world))
        store = fltlab.distributed.init_process_group(
            "gloo", timeout=datetime.timedelta(seconds=args.timeout))
    torch.manual_seed(0)  # DDP also sends rank 0's initial weights to the others
    net = nn.Sequential(nn.Linear(32, args.hidden), nn.ReLU(), nn.Linear(args.hidden, args.hidden),
                        nn.ReLU(), nn.Linear(args.hidden, 8))
    model = DistributedDataParallel(net) if world > 1 else net
    if args.optimizer == "coordinate":  # reads only the (averaged) gradients
        optimizer = fltlab.optim.CoordinateMnemosyne(net.parameters(), total_steps=args.steps)
    else:  # also reads the reported loss and validation: averaged over the group
        optimizer = fltlab.optim.ScheduleMnemosyne(
            net.parameters(), total_steps=args.steps,
            process_group=dist.group.WORLD if world > 1 else None)
    first_step = 0
    if args.resume:
        saved = torch.load(args.resume)
        net.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        first_step = saved["step"]

    with fltlab.distributed.naming_failed_ranks(store) if store else contextlib.nullcontext():
        loop(rank, world, args, model, net, optimizer, first_step)
    if world > 1:
        dist.destroy_process_group()


def loop(rank, world, args, model, net, optimizer, first_step):
    """Steps first_step to --stop-at, then reports and saves."""
    micro = args.batch // (world * args.accumulate)  # rows of one micro-batch
    x_val, y_val = examples(1, 1024)  # held out
    start, timed_from = time.perf_counter(), first_step
    for step in range(first_step, args.stop_at):
        if step == first_step + 5:  # steps/s after the first steps
            start, timed_from = time.perf_counter(), step
        x, y = examples(1000 + step, args.batch)
        optimizer.zero_grad()
        loss_sum = 0.0
        for k in range(args.accumulate):
            row = (rank * args.accumulate + k) * micro
            rows = slice(row, row + micro)
            # DDP averages the gradients over the ranks at the last micro-batch's backward.
            sync = k == args.accumulate - 1 or world == 1
            with contextlib.nullcontext() if sync else model.no_sync():
                loss = F.cross_entropy(model(x[rows]), y[rows])
                loss.backward()
            loss_sum += loss.item()
        if args.accumulate > 1:
            for p in net.parameters():
                p.grad.div_(args.accumulate)
        optimizer.report_loss(loss_sum / args.accumulate)  # this rank's; averaged by the group
        if rank == 0 and (step + 1) % 50 == 0:  # a metric rank 0 alone evaluates
            with torch.no_grad():
                optimizer.report_validation(F.cross_entropy(net(x_val), y_val).item())
        optimizer.step()
        if rank == 0 and ((step + 1) % args.log_every == 0 or step + 1 == args.stop_at):
            print(f"step {step + 1}  loss {loss_sum / args.accumulate:.4f} (rank 0's shard)",
                  flush=True)
    seconds = time.perf_counter() - start
    with torch.no_grad():
        validation = F.cross_entropy(net(x_val), y_val).item()
    if rank == 0:
        rate = (args.stop_at - timed_from) / seconds if args.stop_at > timed_from else 0.0
        print(f"done: {world} rank(s) x {torch.get_num_threads()} thread(s), global batch "
              f"{args.batch}, validation loss {validation:.4f}, {rate:.2f} steps/s", flush=True)
    if args.save and (rank == 0 or "%r" in args.save):
        torch.save({"model": net.state_dict(), "optimizer": optimizer.state_dict(),
                    "step": args.stop_at}, args.save.replace("%r", str(rank)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ranks", type=int, default=1,
                        help="ranks to start here (ignored when RANK is set)")
    parser.add_argument("--optimizer", choices=("coordinate", "schedule"), default="schedule")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--stop-at", type=int, default=0)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--accumulate", type=int, default=1)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--timeout", type=int, default=60)
    parser.add_argument("--log-every", type=int, default=20)
    parser.add_argument("--save", default="")
    parser.add_argument("--resume", default="")
    args = parser.parse_args()
    if not 0 < args.stop_at <= args.steps:
        args.stop_at = args.steps
    if "RANK" in os.environ:  # started as one rank (torchrun, scripts/launch-ranks)
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    else:
        rank, world = None, args.ranks
    if args.batch % (world * args.accumulate):
        parser.error(f"--batch {args.batch} must be a multiple of ranks x --accumulate = "
                     f"{world * args.accumulate}")
    if rank is not None or world == 1:
        train(rank or 0, world, args)
        return
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    if "MASTER_PORT" not in os.environ:  # a port free now
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            os.environ["MASTER_PORT"] = str(probe.getsockname()[1])
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # one machine: loopback
    mp.spawn(train, args=(world, args), nprocs=world)


if __name__ == "__main__":
    main()
