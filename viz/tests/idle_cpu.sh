#!/bin/sh
# An idle flt-lab window (nothing playing, no input) redraws only on change: it must use under 5%
# of one core. Starts the interactive app under xvfb-run, lets it settle, and measures the CPU
# time (user + system, all threads) the process spends over a window of idle seconds.
# Usage: idle_cpu.sh FLT_LAB [SECONDS]      (prints the measured share; exit 1 above 5%)
# Run under xvfb-run:  xvfb-run -a -s "-screen 0 1280x800x24" sh idle_cpu.sh FLT_LAB
set -eu
lab=$1
seconds=${2:-10}
"$lab" &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
sleep 8  # start-up: window, runtime, the first frames
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
before=$(ticks)
sleep "$seconds"
after=$(ticks)
kill -0 "$pid"  # still running
hz=$(getconf CLK_TCK)
share=$(awk -v a="$before" -v b="$after" -v hz="$hz" -v s="$seconds" \
  'BEGIN { printf "%.2f", 100 * (b - a) / hz / s }')
echo "flt-lab idle: ${share}% of one core over ${seconds} s ($((after - before)) ticks at ${hz} Hz)"
awk -v p="$share" 'BEGIN { exit !(p < 5.0) }'
