#!/usr/bin/env bash
# Shared set-up for ./run, ./test and scripts/bench: installs the Debian packages the project needs
# (only those missing; apt as root, or through sudo), exports the runtime settings, configures build/.
# Source it: `source scripts/setup.sh`; then call `flt_configure [cmake args]` and `flt_build [targets]`.
set -euo pipefail

FLT_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
FLT_BUILD_DIR="${FLT_BUILD_DIR:-$FLT_ROOT/build}"
FLT_PACKAGES=(
  g++ cmake ninja-build ccache pkg-config git
  libtorch-dev libopenblas0-pthread          # LibTorch 1.13; OpenBLAS instead of the 40x slower reference BLAS
  libgtest-dev libbenchmark-dev clang-format # tests, benchmarks, the format check
  libcli11-dev                               # command-line parsing (header-only)
  python3-torch python3-dev pybind11-dev python3-pytest  # the Python package fltlab and its tests
  python3-pip python3-venv python3-setuptools  # pip install --no-build-isolation . (a PEP 517 build)
  libgloo-dev                                # c10d's Gloo headers: distributed meta-training
  zlib1g-dev dataset-fashion-mnist           # real data for training runs (gzip IDX files)
  python3-sklearn                            # the held-out suite's small tabular sets (CSV files)
  libimgui-dev libglfw3-dev libstb-dev       # flt-lab (ImGui ships the GLFW + OpenGL3 backends)
  xvfb xauth libgl1-mesa-dri                 # windows and screenshots without a display
)

flt_log() { printf '\033[1m[flt]\033[0m %s\n' "$*" >&2; }

flt_install_packages() {
  local missing=()
  for pkg in "${FLT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { flt_log "need root or sudo to install: ${missing[*]}"; exit 1; }
    sudo="sudo"
  fi
  flt_log "installing Debian packages: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# Runtime settings (docs/design.md section 7): OpenMP threads sleep instead of spinning against
# OpenBLAS's pool on 2 cores. flt::init() sizes both pools to the core count unless
# OMP_NUM_THREADS is set.
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$FLT_ROOT}"

flt_jobs() { nproc 2>/dev/null || echo 2; }

flt_configure() {
  cmake -S "$FLT_ROOT" -B "$FLT_BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
}

flt_build() {
  flt_log "building ${*:-all} in $FLT_BUILD_DIR (-j$(flt_jobs))"
  cmake --build "$FLT_BUILD_DIR" -j "$(flt_jobs)" ${1:+--target "$@"}
}

flt_install_packages
