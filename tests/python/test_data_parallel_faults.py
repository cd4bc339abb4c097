"""A rank of examples/python/train_data_parallel.py (2 ranks over gloo on loopback, started as
torchrun would) that dies or hangs stops the other within its timeout with an error that names it
(fltlab.distributed.naming_failed_ranks), never a hang."""

import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from conftest import SOURCE_DIR

EXAMPLE = SOURCE_DIR / "examples" / "python" / "train_data_parallel.py"


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_ranks(*args):
    """Both ranks of an endless run; returns once rank 0 has logged three steps."""
    port, processes = free_port(), []
    for rank in (0, 1):
        env = dict(os.environ, OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo", RANK=str(rank),
                   WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        processes.append(subprocess.Popen(
            [sys.executable, str(EXAMPLE), "--threads", "1", "--hidden", "32", "--batch", "64",
             "--steps", "100000000", "--log-every", "1", "--optimizer", "schedule", *args],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    for _ in range(3):
        line = processes[0].stdout.readline()
        assert line.startswith("step"), line + processes[0].stdout.read()
    return processes


@pytest.mark.parametrize("fault", ["dies", "hangs"])
def test_a_rank_that_dies_or_hangs_is_named_within_the_timeout(fault):
    processes = start_ranks("--timeout", "3")
    survivor, victim = processes
    try:
        began = time.monotonic()
        victim.send_signal(signal.SIGKILL if fault == "dies" else signal.SIGSTOP)
        output, _ = survivor.communicate(timeout=20)
        waited = time.monotonic() - began
        assert survivor.returncode != 0, output
        assert ("rank 0 of 2: a collective failed: another rank died, or hung for longer than the "
                "timeout (3 s); rank 1 did not report the failure within 2 s: it died or hangs"
                in output), output
        # A dead rank is seen at once, a hung one at the timeout; then 2 s for the reports.
        assert (waited < 4.5) if fault == "dies" else (3 <= waited < 7.5), (waited, output)
    finally:
        for p in processes:
            p.kill()
            p.wait()
