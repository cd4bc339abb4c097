#!/bin/sh
# fltlab installs the way PyTorch extensions do: `pip install --no-build-isolation .` into a fresh
# virtual environment that sees the system's torch (--system-site-packages), offline (--no-index),
# reusing this build directory (FLT_BUILD_DIR: the extension is already built, so pip only
# packages it); then, from another folder, fltlab is the venv's and trains a step.
# Usage: pip_install.sh SOURCE_DIR BUILD_DIR PYTHON
set -eu
source_dir=$1 build_dir=$2 python=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$python" -m venv --system-site-packages "$work/venv"
FLT_BUILD_DIR="$build_dir" CMAKE_BUILD_PARALLEL_LEVEL=1 \
  "$work/venv/bin/pip" install --quiet --no-build-isolation --no-index "$source_dir"
cd "$work"
"$work/venv/bin/python" - "$work/venv" <<'PYTHON'
import sys
import torch
import fltlab

venv = sys.argv[1]
assert fltlab.__file__.startswith(venv), f"fltlab imported from {fltlab.__file__}, not the venv"
torch.manual_seed(0)
layer = fltlab.nn.FLTAttention(heads=2, head_dim=8)
q, k, v = (torch.randn(1, 2, 10, 8) for _ in range(3))
opt = fltlab.optim.ScheduleMnemosyne(layer.parameters())
loss = layer(q, k, v).pow(2).mean()
loss.backward()
opt.step()
print("pip-installed fltlab", fltlab.__version__, "from", fltlab.__file__, "loss", float(loss))
PYTHON
