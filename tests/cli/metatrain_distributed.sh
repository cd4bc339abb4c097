#!/usr/bin/env bash
# Distributed meta-training through the command line, on loopback only. Run by ctest as
#   metatrain_distributed.sh CASE FLT_METATRAIN LAUNCHER WORK_DIR
# Cases:
#   same_weights         world sizes 1 and 2 give bit-identical weights (TBPTT over TCP, PES over a
#                        rendezvous file); only rank 0 writes the CSV
#   rank_dies            one of 2 ranks is killed: the other stops with an error at once; a restart
#                        from the checkpoint ends with the weights of an uninterrupted run
#   rank_hangs           one of 2 ranks stops answering: the other stops within --timeout
#   unreachable_master   a rank whose MASTER_ADDR:MASTER_PORT has no master names that address
#   missing_rank         WORLD_SIZE 2 with one rank started names the missing rank
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
case_name=$1 program=$2 launcher=$3 work=$4
rm -rf "$work" && mkdir -p "$work" && cd "$work"
export OMP_WAIT_POLICY=PASSIVE GLOO_SOCKET_IFNAME=lo FLT_METATRAIN="$program"
unset RANK WORLD_SIZE MASTER_ADDR MASTER_PORT

# A tiny meta-training: 4 workers, tasks restart every 2 iterations (a checkpoint each time).
tiny=(--workers 4 --unroll 2 --horizon 4 --families noisy_quadratic,rosenbrock --threads 1)

# fail, started/cleanup, free_port, wait_for
source "$here/ranks_util.sh"

# Starts rank $1 of 2 in the background (rendezvous file ./store) with the remaining flags.
start_rank() {
  local rank=$1
  shift
  RANK=$rank WORLD_SIZE=2 "$program" --rendezvous "file://$work/store" "$@" >"rank$rank.log" 2>&1 &
  started+=($!)
}

case "$case_name" in
  same_weights)
    for estimator in tbptt pes; do
      run=(--iterations 6 --horizon-max 8 --estimator "$estimator" "${tiny[@]}" --quiet)
      mkdir -p "one-$estimator" "two-$estimator"
      "$program" --out "one-$estimator/weights.pt" "${run[@]}" >one.log 2>&1 || fail "1 rank"
      if [ "$estimator" = tbptt ]; then  # TCPStore at MASTER_ADDR:MASTER_PORT
        MASTER_ADDR=127.0.0.1 MASTER_PORT=$(free_port) "$launcher" 2 \
          --out "two-$estimator/weights.pt" --csv two.csv "${run[@]}" >two.log 2>&1 || fail "2 ranks"
        lines=$(wc -l <two.csv)
        [ "$lines" -eq 7 ] || fail "two.csv has $lines lines, expected a header and 6 rows (rank 0 only)"
      else  # the launcher's rendezvous file
        "$launcher" 2 --out "two-$estimator/weights.pt" "${run[@]}" >two.log 2>&1 || fail "2 ranks"
      fi
      cmp "one-$estimator/weights.pt" "two-$estimator/weights.pt" ||
        fail "$estimator: the weights of 1 and 2 ranks differ"
      echo "$estimator: 1 and 2 ranks wrote identical weights"
    done
    ;;
  rank_dies)
    run=(--iterations 150 --timeout 20 "${tiny[@]}")
    mkdir -p straight resumed
    "$program" --out straight/weights.pt "${run[@]}" --quiet >straight.log 2>&1 ||
      fail "uninterrupted run"
    run+=(--checkpoint "$work/checkpoint.pt")
    start_rank 0 --out resumed/weights.pt "${run[@]}" --quiet
    start_rank 1 --out resumed/weights.pt "${run[@]}" --quiet
    for ((i = 0; i < 300; ++i)); do [ -f checkpoint.pt ] && break || sleep 0.1; done
    [ -f checkpoint.pt ] || fail "no checkpoint after 30 s"
    kill -9 "${started[1]}"
    wait_for "${started[0]}" 10  # a dead peer is seen at once, not after --timeout
    [ "$code" -ne 0 ] || fail "rank 0 ended with exit code 0 after rank 1 was killed"
    grep -q "rank 0 of 2: the allgather failed: another rank died" rank0.log ||
      fail "rank 0 did not say that another rank died"
    echo "rank 0 stopped ${waited} s after rank 1 was killed (exit code $code)"
    rm -f store  # the killed rank's rendezvous file
    "$launcher" 2 --out resumed/weights.pt "${run[@]}" >resume.log 2>&1 || fail "resumed run"  # says so
    grep -q "resumed from" resume.log || fail "the restart did not resume from the checkpoint"
    cmp straight/weights.pt resumed/weights.pt ||
      fail "the resumed 2-rank run's weights differ from the uninterrupted run's"
    echo "the resumed run wrote the uninterrupted run's weights"
    ;;
  rank_hangs)
    run=(--out weights.pt --iterations 100000 --timeout 3 "${tiny[@]}" --quiet)
    start_rank 0 "${run[@]}" --csv progress.csv
    start_rank 1 "${run[@]}"
    for ((i = 0; i < 300; ++i)); do
      [ "$(cat progress.csv 2>/dev/null | wc -l)" -ge 3 ] && break || sleep 0.1
    done
    kill -STOP "${started[1]}"
    wait_for "${started[0]}" 15
    [ "$code" -ne 0 ] || fail "rank 0 ended with exit code 0 while rank 1 hung"
    grep -q "hung for longer than the timeout (3 s)" rank0.log || fail "rank 0 did not name the timeout"
    ((waited >= 2)) || fail "rank 0 stopped after ${waited} s, before the 3 s timeout"
    echo "rank 0 stopped ${waited} s after rank 1 hung (--timeout 3)"
    ;;
  unreachable_master)
    # Port 1 on loopback: nothing listens there, the connection is refused until the timeout.
    code=0
    RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=1 "$program" --out weights.pt \
      --timeout 2 "${tiny[@]}" --quiet >rank1.log 2>&1 || code=$?
    [ "$code" -ne 0 ] || fail "exit code 0 without a master"
    grep -q "rank 1 cannot reach the master at MASTER_ADDR:MASTER_PORT = 127.0.0.1:1 within 2 s" \
      rank1.log || fail "the error does not name the master's address"
    cat rank1.log
    ;;
  missing_rank)
    start_rank 0 --out weights.pt --timeout 2 "${tiny[@]}" --quiet
    wait_for "${started[0]}" 15
    [ "$code" -ne 0 ] || fail "exit code 0 with a rank missing"
    grep -q "waited 2 s for WORLD_SIZE 2 ranks; missing ranks: 1" rank0.log ||
      fail "the error does not name the world size and the missing rank"
    cat rank0.log
    ;;
  *) fail "unknown case $case_name" ;;
esac
