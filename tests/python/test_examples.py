"""The Python example and the README's Python lines run as written."""

import os
import re
import subprocess
import sys

import torch

from conftest import SOURCE_DIR


def test_training_example_learns():
    script = SOURCE_DIR / "examples" / "python" / "train_flt_lm.py"
    done = subprocess.run([sys.executable, str(script), "--steps", "40"], capture_output=True,
                          text=True, env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=240)
    assert done.returncode == 0, done.stderr
    before = float(re.search(r"held-out loss before: ([0-9.]+)", done.stdout).group(1))
    after = float(re.search(r"held-out loss after: ([0-9.]+)", done.stdout).group(1))
    assert after < before - 1.0, done.stdout  # ln 256 = 5.5 at the start


def test_readme_python_lines_run():
    readme = (SOURCE_DIR / "README.md").read_text()
    section = readme.split("## From Python (PyTorch)")[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    model = torch.nn.Linear(4, 2)
    scope = {"model": model}
    exec(code, scope)
    model(torch.randn(3, 4)).sum().backward()
    before = model.weight.detach().clone()
    scope["optimizer"].step()
    assert not torch.equal(model.weight, before)
    q = torch.randn(1, 4, 5, 16)
    assert scope["attention"](q, q, q, causal=True).shape == (1, 4, 5, 16)
