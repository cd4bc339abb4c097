#!/bin/sh
# Headless means headless: with no display at all, `flt-lab --headless --scene all --out DIR`
# starts its own Xvfb, writes every scene's PNG and leaves no Xvfb behind.
# Usage: headless_without_display.sh FLT_LAB OUT_DIR
set -eu
lab=$1
out=$2
rm -rf "$out"
env -u DISPLAY -u WAYLAND_DISPLAY "$lab" --headless --scene all --out "$out"
for scene in attention kernel rpe training arena lessons; do
  test -s "$out/$scene.png" || { echo "missing $out/$scene.png"; exit 1; }
done
