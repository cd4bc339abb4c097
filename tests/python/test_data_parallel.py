"""Data-parallel training with fltlab.optim (examples/python/train_data_parallel.py: gloo,
DistributedDataParallel, 2 ranks of one thread on loopback, started by torch.multiprocessing or as
torchrun would start them): after the run every rank holds the same parameters and optimizer state,
bit for bit, as does one process that accumulates the two ranks' micro-batches; a run saved on 2
ranks resumes on one exactly. ScheduleMnemosyne's process_group against a simulated group. A rank
that dies or hangs: test_data_parallel_faults.py."""

import math
import os
import subprocess
import sys
import warnings

import pytest
import torch

import fltlab
from conftest import SOURCE_DIR

EXAMPLE = SOURCE_DIR / "examples" / "python" / "train_data_parallel.py"
LAUNCHER = SOURCE_DIR / "scripts" / "launch-ranks"
SMALL = ["--threads", "1", "--hidden", "32", "--batch", "64", "--steps", "20",
         "--log-every", "1000"]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo"}
for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_WORLD_SIZE"):
    ENV.pop(name, None)


def run(*args, ranks=1, timeout=60):
    """The example on one process, or on `ranks` started as torchrun would (scripts/launch-ranks:
    RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)."""
    launcher = [str(LAUNCHER), str(ranks)] if ranks > 1 else []
    done = subprocess.run([*launcher, sys.executable, str(EXAMPLE), *SMALL, *args],
                          capture_output=True, text=True, env=ENV, timeout=timeout)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def same_bits(a, b, where):
    """Tensors: dtype, shape and bytes (a history's NaN "none yet" compares equal to itself);
    numbers: equal; containers: item by item. The optimizer's "rule" (its fixed weights, saved as
    an archive whose bytes depend on the saving process's addresses) is left out."""
    if isinstance(a, dict):
        a, b = ({k: v for k, v in d.items() if k != "rule"} for d in (a, b))
    if isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape, where
        assert torch.equal(a.contiguous().view(torch.uint8),
                           b.contiguous().view(torch.uint8)), where
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for key in a:
            same_bits(a[key], b[key], f"{where}/{key}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            same_bits(x, y, f"{where}/{i}")
    elif isinstance(a, float) and math.isnan(a):
        assert isinstance(b, float) and math.isnan(b), where
    else:
        assert a == b, where


def assert_identical(*paths):
    first = torch.load(paths[0])
    for path in paths[1:]:
        same_bits(first, torch.load(path), f"{paths[0].name} vs {path}")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Per optimizer: 2 ranks for 20 steps (each rank's file; CoordinateMnemosyne's started by
    torch.multiprocessing, ScheduleMnemosyne's as torchrun would) and one process through the same
    20 steps (--accumulate 2); ScheduleMnemosyne's 2 ranks stopped at step 10 too."""
    out = tmp_path_factory.mktemp("runs")
    run("--ranks", "2", "--optimizer", "coordinate", "--save", str(out / "coordinate-two-%r.pt"))
    run("--optimizer", "schedule", "--save", str(out / "schedule-two-%r.pt"), ranks=2)
    run("--optimizer", "schedule", "--stop-at", "10", "--save", str(out / "schedule-half-%r.pt"),
        ranks=2)
    for optimizer in ("coordinate", "schedule"):
        run("--accumulate", "2", "--optimizer", optimizer, "--save",
            str(out / f"{optimizer}-one.pt"))
    return out


@pytest.mark.parametrize("optimizer", ["coordinate", "schedule"])
def test_ranks_and_one_process_hold_the_same_bits(runs, optimizer):
    assert_identical(runs / f"{optimizer}-two-0.pt", runs / f"{optimizer}-two-1.pt",
                     runs / f"{optimizer}-one.pt")
    state = torch.load(runs / f"{optimizer}-two-0.pt")["optimizer"]["state"]
    assert len(state) == 6 and all(s["step"] == 20 for s in state.values())


def test_saved_on_two_ranks_resumes_on_one_exactly(runs):
    resumed = runs / "schedule-resumed.pt"
    run("--optimizer", "schedule", "--accumulate", "2", "--resume",
        str(runs / "schedule-half-1.pt"), "--save", str(resumed))
    assert_identical(runs / "schedule-one.pt", resumed)


class SimulatedGroup:
    """A stand-in for torch.distributed's all_reduce in one process: rank 0 of 2 whose partner
    reported `partner` (loss sum, count, validation sum, count)."""

    def __init__(self, partner):
        self.partner, self.calls = torch.tensor(partner, dtype=torch.float64), 0

    def all_reduce(self, tensor, group=None):
        assert group is self
        self.calls += 1
        tensor.add_(self.partner)


def test_schedule_averages_the_reports_over_its_group(monkeypatch):
    group = SimulatedGroup([0.75, 1.0, 0.0, 0.0])  # the partner's loss, no validation
    monkeypatch.setattr(torch.distributed, "all_reduce", group.all_reduce)
    torch.manual_seed(0)
    start = torch.randn(6, 4)
    alone, member = (torch.nn.Parameter(start.clone()) for _ in range(2))
    lone = fltlab.optim.ScheduleMnemosyne([alone])
    ranked = fltlab.optim.ScheduleMnemosyne([member], process_group=group)
    for step in range(4):
        grad = torch.randn(6, 4)
        alone.grad, member.grad = grad.clone(), grad.clone()
        lone.report_loss((1.0 / (step + 1) + 0.75) / 2)
        ranked.report_loss(1.0 / (step + 1))
        lone.report_validation(0.5 + step)
        ranked.report_validation(0.5 + step)
        lone.step()
        ranked.step()
    assert group.calls == 4
    same_bits(lone.state_dict(), ranked.state_dict(), "state_dict")
    same_bits(alone.detach(), member.detach(), "parameter")


def test_schedule_warns_once_when_a_rank_of_a_group_reports_alone(monkeypatch):
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.distributed, "get_world_size", lambda group=None: 2)
    monkeypatch.setattr(torch.distributed, "get_rank", lambda group=None: 1)
    p = torch.nn.Parameter(torch.randn(3))
    optimizer = fltlab.optim.ScheduleMnemosyne([p])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            p.grad = torch.ones(3)
            optimizer.report_loss(1.0)
            optimizer.step()
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(messages) == 1 and "rank 1 of 2" in messages[0] and "process_group" in messages[0]
