#!/usr/bin/env bash
# Issue 21's measurement in one device call, everything tarred into $OUT/cluster-call.tgz (the device tool brings back
# 8 files at most: a baseline's results were lost once to that). Partition (2:lanes:1:2 against 2:lanes:2:2, shared
# workers, a worker killed), then replicate on one GPU (2:lanes:1:1) and on two (2:lanes:2:1, a worker killed), then,
# where OFF_PAR_RATES / ON_PAR_RATES are given, partition again with RTSEARCH_GIVE_UP_BEHIND=0 / =1. The replicate
# efficiency is rep2's capacity over twice rep1's (two runs of one call); where SHM_REP2_RATES is given, rep2 again
# with the daemons' results files and journals on /dev/shm (whether the disk's writes hold the lanes back). SPY=RATES
# records each lane with py-spy at those rates. (Another commit beside this one: gpu_check.sh's BASELINE.)
#   bash bench/cluster_call.sh    (PAR_RATES, PAR_CONFIGS, REP1_RATES, REP1_CONFIGS, REP2_RATES, REP2_CONFIGS,
#                                  BUDGET_MS, WINDOW, REFINE, TIMELINE_MS override the defaults below; REFINE: rates offered past the
#                                  grid, halfway to the first that failed; TIMELINE_MS: each rate's answers binned
#                                  by when they came, bench/latency_timeline.py, 0: none)
# The database is made of every FASTA under .gpudata/data (bench/gpu_check.sh's cluster mode). About 8 min on 2x H100
# (a device call's limit is 10).
set -uo pipefail
out=${OUT:-/tmp/rtsearch-out}
r=$(mktemp -d)/r  # outside $OUT, tarred there after each run: a call cut short still brings back what it finished
mkdir -p "$r" "$out"
python3 -c 'import time; t = time.perf_counter(); sum(i * i for i in range(10**7)); print("host loop s", time.perf_counter() - t)' \
  > "$r/host.txt"
# whether this machine stalls (all its CPUs at once: bench/RESULTS.md, 2026-11-23), to read beside its runs' spread
python3 bench/machine_stalls.py --hz 200 --seconds 4 --per-cpu 0,5,10,15,20,25,30 >> "$r/host.txt" 2>&1
b="--gpus-per-worker 1 --search-toml \"precursor_tolerance = \\\"${WINDOW:-200 Da}\\\"\" --skip-engine --stop-after 2 \
--seconds 3 --senders 4 --budget-ms ${BUDGET_MS:-40} --p99-ms 50 --refine ${REFINE:-1} --serve-args \"--backend cupy\" \
--timeline-ms ${TIMELINE_MS:-250}"
pc=${PAR_CONFIGS:-2:lanes:1:2:partition,2:lanes:2:2:partition}  # a worker of the last one is killed
par="--configs $pc"
export RTSEARCH_EXPIRY_SLACK_MS=${RTSEARCH_EXPIRY_SLACK_MS:-5} CLUSTER_TESTS=0
run() {  # NAME ARGS [ENV=VALUE ...]: this checkout's cluster bench into $r/NAME
  local name=$1 args=$2
  shift 2
  env "$@" OUT="$r/$name" CLUSTER_ARGS="$args" bash bench/gpu_check.sh cluster > "$r/$name.log" 2>&1
  tar -C "$(dirname "$r")" -czf "$out/cluster-call.tgz" r
}
spy=${SPY:+--py-spy $SPY}
# each GPU count its own grid (a grid shared by both stopped at the one-GPU figure's neighbourhood: two GPUs passed its
# top); partition first, the one-GPU replicate next, the two-GPU replicate last, each configuration refined once
run par "$b $par --rates ${PAR_RATES:-7000,10000,13000,16000} $spy --kill-rate 4000 --kill-configs ${pc##*,}"
run rep1 "$b --configs ${REP1_CONFIGS:-2:lanes:1:1} --rates ${REP1_RATES:-7000,8500,10000,11500,13000} $spy --kill-rate 0"
rep2=${REP2_CONFIGS:-2:lanes:2:1}  # the N-GPU replicate configurations; a worker of the last one is killed
run rep2 "$b --configs $rep2 --rates ${REP2_RATES:-13000,16000,19000,22000} $spy --kill-rate 4000 \
--kill-configs ${rep2##*,}"
[ -n "${OFF_PAR_RATES:-}" ] && run par_off "$b $par --rates $OFF_PAR_RATES --kill-rate 0" RTSEARCH_GIVE_UP_BEHIND=0
[ -n "${ON_PAR_RATES:-}" ] && run par_on "$b $par --rates $ON_PAR_RATES --kill-rate 0" RTSEARCH_GIVE_UP_BEHIND=1
[ -n "${SHM_REP2_RATES:-}" ] && run rep2_shm "$b --configs $rep2 --rates $SHM_REP2_RATES --results-root /dev/shm \
--kill-rate 0"
rm -rf "$(dirname "$r")"
ls -l "$out"
