#!/usr/bin/env bash
# Issue 21's measurement in one device call, everything tarred into $OUT/cluster-call.tgz (the device tool brings back
# 8 files at most: a baseline's results were lost once to that). Replicate (2:lanes:1:1 against 2:lanes:2:1, a worker
# killed in the latter), then partition (2:lanes:1:2 against 2:lanes:2:2, shared workers) with
# RTSEARCH_GIVE_UP_BEHIND=0 (a worker killed) and =1 beside it. (Another commit beside it: gpu_check.sh's BASELINE.)
#   bash bench/cluster_call.sh        (REP_RATES, PAR_RATES, BUDGET_MS, WINDOW, REFINE override the defaults below;
#                                      REFINE: rates offered past the grid, halfway to the first that failed)
# The database is made of every FASTA under .gpudata/data (bench/gpu_check.sh's cluster mode). About 7 min on 2x H200
# (a device call's limit is 10).
set -uo pipefail
out=${OUT:-/tmp/rtsearch-out}
r=$out/r
mkdir -p "$r"
python3 -c 'import time; t = time.perf_counter(); sum(i * i for i in range(10**7)); print("host loop s", time.perf_counter() - t)' \
  > "$r/host.txt"
b="--gpus-per-worker 1 --search-toml \"precursor_tolerance = \\\"${WINDOW:-200 Da}\\\"\" --skip-engine --stop-after 2 \
--seconds 3 --senders 4 --budget-ms ${BUDGET_MS:-40} --p99-ms 50 --refine ${REFINE:-1} --serve-args \"--backend cupy\""
rep="$b --rates ${REP_RATES:-13000,16000,19000,22000,25000,28000,31000} --configs 2:lanes:1:1,2:lanes:2:1"
par="$b --rates ${PAR_RATES:-7000,10000,13000,16000} --configs 2:lanes:1:2:partition,2:lanes:2:2:partition"
export RTSEARCH_EXPIRY_SLACK_MS=${RTSEARCH_EXPIRY_SLACK_MS:-5} CLUSTER_TESTS=0
run() {  # NAME ARGS [ENV=VALUE ...]: this checkout's cluster bench into $r/NAME
  local name=$1 args=$2
  shift 2
  env "$@" OUT="$r/$name" CLUSTER_ARGS="$args" bash bench/gpu_check.sh cluster > "$r/$name.log" 2>&1
}
run rep "$rep --kill-rate 4000 --kill-configs 2:lanes:2:1"
run par "$par --kill-rate 4000 --kill-configs 2:lanes:2:2:partition" RTSEARCH_GIVE_UP_BEHIND=0
run par_give_up "$par --kill-rate 0" RTSEARCH_GIVE_UP_BEHIND=1
tar -C "$out" -czf "$out/cluster-call.tgz" r && rm -rf "$r"
ls -l "$out"
