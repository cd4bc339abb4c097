#!/usr/bin/env bash
# Data-parallel training with the learned optimizers (examples/data_parallel.cpp) on loopback, 2
# ranks of one thread each. Run by ctest as
#   data_parallel.sh CASE EXAMPLE COMPARE LAUNCHER WORK_DIR
# Cases:
#   identical_coordinate  after 30 steps both ranks hold the same parameters and CoordinateMnemosyne
#                         state, bit for bit, and so does one process that accumulates the two
#                         ranks' micro-batches (--accumulate 2)
#   identical_schedule    the same for ScheduleMnemosyne with report_loss on every rank and
#                         report_validation on rank 0 alone (averaged over its communicator)
#   resume_on_one         for both optimizers: a run saved at step 15 on 2 ranks, resumed on one
#                         process, ends at step 30 with the bits of one process's run straight
#                         through; resumed on 2 ranks, too
#   rank_dies             rank 1 (then, in a second run, rank 0, which serves the rendezvous) is
#                         killed: the other stops at once with an error naming it
#   rank_hangs            rank 1 (then rank 0) stops answering: the other stops within its 3 s
#                         timeout plus the 2 s it waits for reports, naming it
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
case_name=$1 example=$2 compare=$3 launcher=$4 work=$5
rm -rf "$work" && mkdir -p "$work" && cd "$work"
export OMP_WAIT_POLICY=PASSIVE GLOO_SOCKET_IFNAME=lo
unset RANK WORLD_SIZE MASTER_ADDR MASTER_PORT LOCAL_WORLD_SIZE

small=(--threads 1 --hidden 32 --batch 64 --log-every 1000)

# fail, started/cleanup, free_port, wait_for
source "$here/ranks_util.sh"

# Starts both ranks of an endless run in the background (rank R logs to rankR.log) and waits
# until rank 0 has logged 3 steps.
start_endless() {
  local port
  port=$(free_port)
  rm -f rank0.log rank1.log
  started=()
  for rank in 0 1; do
    RANK=$rank WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$example" "${small[@]}" \
      --optimizer schedule --steps 100000000 --log-every 1 "$@" >"rank$rank.log" 2>&1 &
    started+=($!)
  done
  for ((i = 0; i < 300; ++i)); do
    [ "$(grep -c '^step' rank0.log 2>/dev/null)" -ge 3 ] && return || sleep 0.1
  done
  fail "rank 0 logged no 3 steps in 30 s"
}

same() {  # OPTIMIZER FILE FILE...: bit-identical, or fail
  "$compare" "$1" 32 "${@:2}" >compare.log 2>&1 || fail "$1: $(cat compare.log)"
  echo "$1: $(cat compare.log)"
}

case "$case_name" in
  identical_coordinate | identical_schedule)
    optimizer=${case_name#identical_}
    run=("${small[@]}" --optimizer "$optimizer" --steps 30)
    mkdir -p r0 r1 one
    "$launcher" 2 "$example" "${run[@]}" --save "r%r/state.pt" >two.log 2>&1 || fail "2 ranks"
    "$example" "${run[@]}" --accumulate 2 --save one/state.pt >one.log 2>&1 || fail "1 process"
    same "$optimizer" r0/state.pt r1/state.pt one/state.pt
    ;;
  resume_on_one)
    for optimizer in coordinate schedule; do
      run=("${small[@]}" --optimizer "$optimizer" --steps 30)
      mkdir -p "$optimizer"/{r0,r1,one,two}
      cd "$optimizer"
      "$launcher" 2 "$example" "${run[@]}" --stop-at 15 --save "r%r/state.pt" >saved.log 2>&1 ||
        fail "$optimizer: 2 ranks to step 15"
      "$example" "${run[@]}" --accumulate 2 --resume r1/state.pt --save one/resumed.pt \
        >resumed.log 2>&1 || fail "$optimizer: resumed on one process"
      "$launcher" 2 "$example" "${run[@]}" --resume r0/state.pt --save two/resumed.pt \
        >resumed-two.log 2>&1 || fail "$optimizer: resumed on 2 ranks"
      "$example" "${run[@]}" --accumulate 2 --save one/straight.pt >straight.log 2>&1 ||
        fail "$optimizer: one process straight through"
      same "$optimizer" one/straight.pt one/resumed.pt two/resumed.pt
      cd ..
    done
    ;;
  rank_dies)
    for victim in 1 0; do
      survivor=$((1 - victim))
      start_endless --timeout 20
      kill -9 "${started[$victim]}"
      wait_for "${started[$survivor]}" 10  # a dead peer is seen at once, not after --timeout
      [ "$code" -ne 0 ] || fail "rank $survivor ended with exit code 0 after rank $victim died"
      if [ "$victim" = 1 ]; then
        expected="rank 1 did not report the failure within 2 s: it died or hangs"
      else
        expected="the rendezvous that rank 0 serves .*rank 0 died or hangs"
      fi
      grep -q "rank $survivor of 2: the allreduce failed: another rank died.*$expected" \
        "rank$survivor.log" || fail "rank $survivor did not name rank $victim"
      echo "rank $survivor stopped ${waited} s after rank $victim was killed:"
      cat "rank$survivor.log" | grep "flt-data-parallel:"
    done
    ;;
  rank_hangs)
    for victim in 1 0; do
      survivor=$((1 - victim))
      start_endless --timeout 3
      kill -STOP "${started[$victim]}"
      wait_for "${started[$survivor]}" 15
      [ "$code" -ne 0 ] || fail "rank $survivor ended with exit code 0 while rank $victim hung"
      if [ "$victim" = 1 ]; then
        expected="rank 1 did not report the failure within 2 s: it died or hangs"
      else
        expected="the rendezvous that rank 0 serves .*rank 0 died or hangs"
      fi
      grep -q "hung for longer than the timeout (3 s); $expected" "rank$survivor.log" ||
        fail "rank $survivor did not name the timeout and rank $victim"
      ((waited >= 2)) || fail "rank $survivor stopped after ${waited} s, before the 3 s timeout"
      echo "rank $survivor stopped ${waited} s after rank $victim hung (--timeout 3):"
      grep "flt-data-parallel:" "rank$survivor.log"
      kill -9 "${started[$victim]}"
    done
    ;;
  *) fail "unknown case $case_name" ;;
esac
