# Shared by the multi-process tests (data_parallel.sh, metatrain_distributed.sh); sourced from
# their work directory. fail prints every rank's log; processes added to `started` are killed
# when the script exits; free_port finds a TCP port on 127.0.0.1 that nothing listens on now;
# wait_for waits for a process with a time limit.

fail() {
  echo "FAIL: $*" >&2
  for log in *.log; do [ -f "$log" ] && { echo "--- $log" >&2; cat "$log" >&2; }; done
  exit 1
}
started=()
cleanup() { for pid in "${started[@]}"; do kill -9 "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT

free_port() {
  local port
  for ((port = 20000 + RANDOM % 20000; ; ++port)); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || { echo "$port"; return; }
  done
}

# Waits up to $2 seconds for process $1 to end; sets `waited` (seconds) and `code` (exit code).
wait_for() {
  local pid=$1 limit=$2 begin=$SECONDS
  while kill -0 "$pid" 2>/dev/null && ((SECONDS - begin < limit)); do sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && fail "process $pid still runs after ${limit} s"
  waited=$((SECONDS - begin))
  code=0
  wait "$pid" || code=$?
}
