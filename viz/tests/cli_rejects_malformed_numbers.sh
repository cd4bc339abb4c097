#!/bin/sh
# `flt-lab --frames 12abc` is an error naming the option and the value (std::stoi read it as 12).
# Usage: cli_rejects_malformed_numbers.sh FLT_LAB
lab=$1
if out=$("$lab" --frames 12abc 2>&1); then
  echo "accepted: flt-lab --frames 12abc"
  exit 1
fi
echo "$out"
case "$out" in
  *--frames*12abc* | *12abc*--frames*) exit 0 ;;
  *) echo "the message does not name --frames and 12abc"; exit 1 ;;
esac
