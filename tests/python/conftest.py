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


@pytest.fixture(scope="session")
def reference():
    """Runs the C++ reference loop (tests/python/reference.cpp) and returns its stdout."""
    program = os.environ.get("FLT_PYTHON_REFERENCE",
                             str(SOURCE_DIR / "build" / "tests" / "flt_python_reference"))
    assert os.path.exists(program), f"the C++ reference loop {program} is not built"

    def run(*args):
        done = subprocess.run([program, *map(str, args)], capture_output=True, text=True,
                              env={**os.environ, "OMP_NUM_THREADS": "1"})
        assert done.returncode == 0, done.stderr
        return done.stdout

    return run
