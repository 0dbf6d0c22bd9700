#!/usr/bin/env bash
# Issue 16's memory soak over 10 minutes, across two device calls (a call lasts 600 s at most):
#   bash bench/soak_call.sh start     # starts `bench/gpu_check.sh memsoak` in a process session of its own (setsid:
#                                     # the device tool leaves such a process running after the call returns) with
#                                     # OUT=/tmp/soak, and copies its logs to $OUT every 10 s for 560 s
#   bash bench/soak_call.sh collect   # the next call, made at once (a machine stays warm 30 s after a call): waits
#                                     # for the soak's memsoak.json and copies it and the logs to $OUT; on a fresh
#                                     # machine it says so and stops (the start call's copies hold what was seen)
# MEMSOAK_ARGS as for gpu_check.sh (default here: 30,000 /s, 10.5 minutes of 30-s phases, the first phase warm-up:
# 10 minutes watched). bench/RESULTS.md 2026-11-29 10:32-10:43 UTC ran these lines.
set -uo pipefail
case ${1:-} in
  start)
    mkdir -p /tmp/soak
    export PRECOMPILE=0 MEMSOAK_ARGS=${MEMSOAK_ARGS:-"--rate 30000 --minutes 10.5 --phase-seconds 30 --warm-phases 1 --serve-args=--lanes=4"}
    OUT=/tmp/soak setsid nohup bash bench/gpu_check.sh memsoak > /tmp/soak/run.log 2>&1 < /dev/null &
    date -u +%H:%M:%S > /tmp/soak/started.txt
    for _ in $(seq 1 56); do
      sleep 10
      cp /tmp/soak/memsoak.log /tmp/soak/run.log /tmp/soak/started.txt /tmp/soak/gpu.txt "$OUT"/ 2>/dev/null
    done
    date -u +%H:%M:%S > "$OUT/a_done.txt"
    ;;
  collect)
    if [[ ! -d /tmp/soak ]]; then echo "fresh machine: no soak here" > "$OUT/b.txt"; exit 0; fi
    echo "same machine: the soak started $(cat /tmp/soak/started.txt)" > "$OUT/b.txt"
    for _ in $(seq 1 40); do
      cp /tmp/soak/memsoak.log /tmp/soak/run.log /tmp/soak/gpu.txt "$OUT"/ 2>/dev/null
      [[ -f /tmp/soak/memsoak.json ]] && break
      sleep 4
    done
    cp /tmp/soak/memsoak.json /tmp/soak/memsoak.log /tmp/soak/run.log "$OUT"/ 2>/dev/null
    date -u +%H:%M:%S >> "$OUT/b.txt"
    ;;
  *) echo "usage: bash bench/soak_call.sh start|collect" >&2; exit 2 ;;
esac
