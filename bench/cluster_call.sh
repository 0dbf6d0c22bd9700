#!/usr/bin/env bash
# Issue 21's measurement in one device call, everything tarred into $OUT/cluster-call.tgz (the device tool brings back
# 8 files at most: a baseline's results were lost once to that). Partition (PAR_CONFIGS; default four lanes sharing
# two pieces on one GPU, then two and four pieces on two GPUs; a worker of the last killed), then replicate on one
# GPU (REP1_CONFIGS: four lanes, each its own worker) and on two (REP2_CONFIGS; a worker of the last killed). Lanes
# scaled with the GPUs keep the one-GPU configuration's daemon and worker processes a GPU (four lanes never lost to
# two: bench/RESULTS.md, 2026-11-27 19:14; the defaults are the configurations and rates of the Done-when calls since,
# about 6 minutes on 2x H100). The efficiency of each mode: its best two-GPU
# capacity over twice its best one-GPU capacity, read across the runs of the call. Optional: OFF_PAR_RATES /
# ON_PAR_RATES (partition again with RTSEARCH_GIVE_UP_BEHIND=0 / =1), AB_ENV with AB_RATES (the two-GPU replicate
# again with that environment), PAR_AB_ENV with PAR_AB_RATES (partition so), SHM_REP2_RATES (again with the
# daemons' results files and journals on /dev/shm),
# SPY=RATES (each lane recorded with py-spy at those rates). (Another commit beside this one: gpu_check.sh's BASELINE.)
#   bash bench/cluster_call.sh    (PARTS: which runs, default "par rep1 rep2"; SENDERS: rt_load's senders, a run
#                                  each, default 4: a run is one lane's, so K lanes need K senders; PAR_RATES,
#                                  PAR_CONFIGS, REP1_RATES,
#                                  REP1_CONFIGS, REP2_RATES, REP2_CONFIGS, KILL_RATE (0: no kill), BUDGET_MS, WINDOW,
#                                  REFINE, TIMELINE_MS override the defaults below; REFINE: rates
#                                  offered past the grid, halfway to the first that failed; TIMELINE_MS: each rate's
#                                  answers binned by when they came, bench/latency_timeline.py, 0: none)
# A configuration none of whose rates passed tries 0.75 and 0.5 of its first rate (cluster_bench.py --below): on a
# slow-Python host every rate of a grid may shed (bench/RESULTS.md, "Two workers a piece"), and the call still
# measures a capacity. The database is made of every FASTA under .gpudata/data (bench/gpu_check.sh's cluster mode). About 7-8 min on 2x H100
# (a device call's limit is 10). Read it with `python bench/cluster_summary.py cluster-call.tgz` (the Done-when's
# figures: capacities, efficiency a GPU of each mode against its best one-GPU configuration, balance, kills).
set -uo pipefail
out=${OUT:-/tmp/rtsearch-out}
r=$(mktemp -d)/r  # outside $OUT, tarred there after each run: a call cut short still brings back what it finished
mkdir -p "$r" "$out"
python3 -c 'import time; t = time.perf_counter(); sum(i * i for i in range(10**7)); print("host loop s", time.perf_counter() - t)' \
  > "$r/host.txt"
# whether this machine stalls (all its CPUs at once: bench/RESULTS.md, 2026-11-23), to read beside its runs' spread
python3 bench/machine_stalls.py --hz 200 --seconds 4 --per-cpu 0,5,10,15,20,25,30 >> "$r/host.txt" 2>&1
b="--gpus-per-worker 1 --search-toml \"precursor_tolerance = \\\"${WINDOW:-200 Da}\\\"\" --skip-engine --stop-after 2 \
--seconds 3 --senders ${SENDERS:-4} --budget-ms ${BUDGET_MS:-40} --p99-ms 50 --refine ${REFINE:-1} --serve-args \"--backend cupy\" \
--timeline-ms ${TIMELINE_MS:-250}"
toml() { [ -n "$1" ] && echo "--serve-toml \"$1\""; }  # SERVE_TOML: [serve] lines for every daemon (e.g. publishers = 1)
b="$b $(toml "${SERVE_TOML:-}")"
pc=${PAR_CONFIGS:-4:lanes:1:2:partition,4:lanes:2:2:partition,4:lanes:2:4:partition}  # a worker of the last one is killed
par="--configs $pc"
export RTSEARCH_EXPIRY_SLACK_MS=${RTSEARCH_EXPIRY_SLACK_MS:-5} CLUSTER_TESTS=0
run() {  # NAME ARGS [ENV=VALUE ...]: this checkout's cluster bench into $r/NAME
  local name=$1 args=$2
  shift 2
  env "$@" OUT="$r/$name" CLUSTER_ARGS="$args" bash bench/gpu_check.sh cluster > "$r/$name.log" 2>&1
  tar -C "$(dirname "$r")" -czf "$out/cluster-call.tgz" r
}
spy=${SPY:+--py-spy $SPY}
# replicate: each GPU count its own grid (a grid shared by both stopped at the one-GPU figure's neighbourhood: two
# GPUs passed its top); partition: one grid, each configuration stopping after two failures (`--stop-after 2`);
# partition first, the one-GPU replicate next, the two-GPU replicate last, each configuration refined once
parts=" ${PARTS:-par rep1 rep2} "  # PARTS: which of the three runs below (the optional ones follow their variables)
[[ $parts == *" par "* ]] && run par "$b $par --rates ${PAR_RATES:-9000,12000,15000,18000,21000,24000} $spy --kill-rate ${KILL_RATE:-4000} \
--kill-configs ${pc##*,}"
[[ $parts == *" rep1 "* ]] && run rep1 "$b --configs ${REP1_CONFIGS:-4:lanes:1:1} --rates ${REP1_RATES:-11500,13000,14500,16000} \
$spy --kill-rate 0"
rep2=${REP2_CONFIGS:-4:lanes:2:1}  # the N-GPU replicate configurations; a worker of the last one is killed
[[ $parts == *" rep2 "* ]] && run rep2 "$b --configs $rep2 --rates ${REP2_RATES:-22000,25000,28000,31000} $spy --kill-rate ${KILL_RATE:-4000} \
--kill-configs ${rep2##*,}"
[ -n "${OFF_PAR_RATES:-}" ] && run par_off "$b $par --rates $OFF_PAR_RATES --kill-rate 0" RTSEARCH_GIVE_UP_BEHIND=0
[ -n "${ON_PAR_RATES:-}" ] && run par_on "$b $par --rates $ON_PAR_RATES --kill-rate 0" RTSEARCH_GIVE_UP_BEHIND=1
# AB_ENV="NAME=VALUE ..." AB_RATES=R,...: the N-GPU replicate again at R with that environment (e.g.
# RTSEARCH_GIL_SWITCH_S=0.0001: a lane's threads winning the GIL back sooner), beside its own run above
# shellcheck disable=SC2086
# AB_SERVE_TOML: the A/B run's [serve] lines instead of SERVE_TOML's ("" for none)
ab=$b
[ -n "${AB_SERVE_TOML+set}" ] && ab="${b%--serve-toml*} $(toml "$AB_SERVE_TOML")"
[ -n "${AB_RATES:-}" ] && run rep2_ab "$ab --configs $rep2 --rates $AB_RATES --kill-rate 0" ${AB_ENV:-}
# PAR_AB_ENV="NAME=VALUE ..." PAR_AB_RATES=R,...: the partition configurations again at R with that environment (e.g.
# RTSEARCH_CLUSTER_DEPTH=2: two batches in flight a lane)
# shellcheck disable=SC2086
[ -n "${PAR_AB_RATES:-}" ] && run par_ab "$b $par --rates $PAR_AB_RATES --kill-rate 0" ${PAR_AB_ENV:-}
[ -n "${SHM_REP2_RATES:-}" ] && run rep2_shm "$b --configs $rep2 --rates $SHM_REP2_RATES --results-root /dev/shm \
--kill-rate 0"
rm -rf "$(dirname "$r")"
ls -l "$out"
