#!/usr/bin/env bash
# flt-metatrain-es on 2 ranks over loopback (ranks split each generation's candidates and the
# references' grid): a campaign of 3 generations on 2 ranks, stopped after 1, asked to stop by its
# stop file (no generation starts), then continued, ends with the state of 1 process's
# uninterrupted campaign, byte for byte; rank 0 alone writes the campaign's files. Run by ctest as
#   metatrain_es_distributed.sh FLT_METATRAIN_ES LAUNCHER WORK_DIR
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
program=$1 launcher=$2 work=$3
rm -rf "$work" && mkdir -p "$work" && cd "$work"
export OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=1 GLOO_SOCKET_IFNAME=lo
unset RANK WORLD_SIZE MASTER_ADDR MASTER_PORT
source "$here/ranks_util.sh"  # fail

tiny=(--pairs 2 --episodes 2 --instances 2 --min-steps 20 --max-steps 40 --validation-every 2
  --validation-episodes 1 --train-families tabular,factorization --validation-families autoencoder
  --key-dim 2 --value-dim 2 --hidden 4)
"$program" --dir one --generations 3 "${tiny[@]}" >one.log 2>&1 || fail "1 process"
"$launcher" 2 "$program" --dir two --generations 1 "${tiny[@]}" >two-first.log 2>&1 ||
  fail "2 ranks, generation 0"
# A stop file present: no generation starts, both ranks end cleanly, the campaign is untouched.
touch two/STOP
"$launcher" 2 "$program" --dir two --generations 3 "${tiny[@]}" >two-stop.log 2>&1 ||
  fail "2 ranks asked to stop"
grep -q "two/STOP asks the campaign to stop" two-stop.log || fail "no word of the stop file"
[ "$(wc -l <two/log.tsv)" -eq 2 ] || fail "a generation ran though two/STOP asked it to stop"
rm two/STOP
"$launcher" 2 "$program" --dir two --generations 3 "${tiny[@]}" >two.log 2>&1 ||
  fail "2 ranks, generations 1 and 2"
grep -q "generation 1 of 3, 4 references cached, 2 ranks" two.log ||
  fail "the 2-rank campaign did not continue from its checkpoint with its references"
cmp one/state.pt two/state.pt || fail "the states of 1 process and 2 ranks differ"
cmp one/best.pt two/best.pt || fail "the best schedules of 1 process and 2 ranks differ"
cut -f1-6,8 one/log.tsv >one.columns
cut -f1-6,8 two/log.tsv >two.columns
cmp one.columns two.columns || fail "the logs differ (beside the seconds)"
[ "$(grep -c '^generation' two/log.tsv)" -eq 1 ] || fail "log.tsv has more than one header"
[ "$(wc -l <two/references.tsv)" -eq "$(wc -l <one/references.tsv)" ] ||
  fail "references.tsv has $(wc -l <two/references.tsv) lines, 1 process's $(wc -l <one/references.tsv)"
echo "2 ranks, stopped and continued, wrote 1 process's state, schedule, log and references"
