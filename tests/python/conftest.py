"""Shared set-up of fltlab's tests (run by ctest: python_test_*; or by hand with
PYTHONPATH=build/python python3 -m pytest tests/python)."""

import os
import pathlib
import subprocess

import pytest
import torch

SOURCE_DIR = pathlib.Path(os.environ.get("FLT_SOURCE_DIR",
                                         pathlib.Path(__file__).resolve().parents[2]))

# One intra-op thread: the C++ reference loops run with one too, so both add up in the same order
# (and two test processes do not fight over a 2-core machine).
torch.set_num_threads(1)


def libtorch_in_this_process():
    """The libtorch_cpu files the Python torch loaded (resolved paths)."""
    with open("/proc/self/maps") as maps:
        return {os.path.realpath(line.split()[-1]) for line in maps
                if "libtorch_cpu" in line.split()[-1]}


def libtorch_of(program):
    """The libtorch_cpu file `program` loads, as the dynamic loader resolves it."""
    listing = subprocess.run(["ldd", program], capture_output=True, text=True).stdout
    return {os.path.realpath(line.split("=>")[1].split()[0]) for line in listing.splitlines()
            if "libtorch_cpu" in line and "=>" in line}


@pytest.fixture(scope="session")
def reference():
    """Runs the C++ reference loop (tests/python/reference.cpp) and returns its stdout. The
    comparisons with it are bit for bit, which holds only when the Python torch and the C++ build
    use one libtorch: checked first, so a second libtorch (a pip torch beside Debian's) is named as
    such rather than showing up as a numeric mismatch."""
    program = os.environ.get("FLT_PYTHON_REFERENCE",
                             str(SOURCE_DIR / "build" / "tests" / "flt_python_reference"))
    assert os.path.exists(program), f"the C++ reference loop {program} is not built"
    python_side, cpp_side = libtorch_in_this_process(), libtorch_of(program)
    if python_side != cpp_side:
        pytest.fail(f"the Python torch loads {sorted(python_side)} but the C++ build loads "
                    f"{sorted(cpp_side)}: the bit-for-bit comparisons need one libtorch "
                    "(Debian's python3-torch and libtorch-dev)")

    def run(*args):
        done = subprocess.run([program, *map(str, args)], capture_output=True, text=True,
                              env={**os.environ, "OMP_NUM_THREADS": "1"})
        assert done.returncode == 0, done.stderr
        return done.stdout

    return run
