#!/usr/bin/env bash
# Everything that needs the GPU machine, in one call (see bench/RESULTS.md):
#   bash bench/gpu_check.sh [parity] [kernels] [probe] [bench] [library] [stream] [memsoak] [rtload] [shards] [latency] [hop] [bulk] [wall] [reader] [peers] [topdown] [signal] [elution] [cluster] [tdcluster] | all   (all = parity bench library stream)
# rtload: bench/rtload_bench.py with RTLOAD_ARGS (the shared client and echo floor copied to .gpudata/tools), then
#   with RTLOAD2_ARGS if set; nvidia-smi's GPU use logged beside (gpu_use.csv); read both with
#   `python bench/rtload_summary.py OUT/rtload.json` (a line a phase: the client's figures, mean batch, GPU use, and
#   where a spectrum's time went inside the daemon, stage by stage); with --tap in RTLOAD_ARGS a lighter subscriber
#   beside the client gives each phase's latency without the client's own queue (bench/results_tap.py)
# memsoak: bench/memory_soak.py with MEMSOAK_ARGS (the daemon's memory under rt_load.py; default 9 minutes of load,
#   what a 600-s call holds after the daemon's ~25 s start, at 30,000 /s with --lanes 4: half the highest rate at
#   p99 <= 50 ms measured, RESULTS 2026-11-26); 10 minutes span two calls: bench/soak_call.sh (start, collect)
# shards: bench/shards_probe.py with SHARDS_ARGS (K daemons side by side, K clients: would runs spread over
#   processes pay?)
# latency: bench/latency_probe.py with LATENCY_ARGS (a lone spectrum's latency, stage by stage)
# hop: bench/engine_hop.py with HOP_ARGS (a lone batch through the engine, in process and through engine processes)
# bulk: bench/bulk_bench.py with BULK_ARGS (rtsearch-sim replay --rate max against the offline engine)
# wall: bench/search_wall.py (rtsearch search's whole process on the 50,000-spectrum MGF, cold and warm kernel cache)
# reader: bench/reader_bench.py (the bulk MGF reader against pyteomics')
# topdown: bench/topdown_search.py on the FLASHApp run (TOPDOWN_VARIANTS, "Da:ppm" fragment tolerances, default
#   "0.02:15 0.05:0"; with truncations, CuPy), then rtsearch search of the FLASHApp and Jurkat msalign against the E. coli proteoform database,
#   and of the simulated run in .gpudata/tdsim (if there) scored against its truth beside TopPIC's
# signal: bench/signal_bench.py (the MS1 Savitzky-Golay smoother, NumPy against the GPU; lcms-ms1 copied to .gpudata/data)
# elution: the signal GPU tests, then bench/elution_bench.py with ELUTION_ARGS (MS2 latency, plain and --elution)
# cluster: the GPU cluster tests (CLUSTER_TESTS=0: not), then bench/cluster_bench.py with CLUSTER_ARGS (balance; one
#   engine against N workers under rt_load.py), then BASELINE's (a carried copy of another checkout, e.g.
#   `git archive C | tar -x -C .gpudata/base`) with the same arguments and index, into $OUT/base; on a
#   machine with several GPUs (issue 21): CLUSTER_ARGS='--gpus-per-worker 1 --serve-args "--backend cupy"
#   --configs 2:replicate,2:partition' (local placement: worker k on GPU k mod GPUs); K:lanes:G configurations run
#   --lanes K on the first G GPUs (K:lanes:G:C:MODE[:ROOM][:shared|:own]: with C workers, shared by the lanes or
#   each lane's own); --search-toml "precursor_tolerance = \"200 Da\"" makes the GPU the limit; --stop-after 2 skips a
#   configuration's rates past two in a row over --p99-ms, --refine N offers N more halfway to the first failing
#   rate (each row also reports the spectra's age on arrival and the
#   intake's wait: what the door sheds by). Its database is made
#   of every FASTA under .gpudata/data: keep the other data folders elsewhere for figures comparable with RESULTS
#   (kernels and parity need them all there: move them in after the cluster bench, in the same command)
#   bench/cluster_call.sh runs issue 21's whole measurement through this mode and tars it (8 files come back at most)
# tdcluster: bench/topdown_daemon.py with TDCLUSTER_ARGS (e.g. "--configs 1,2 --gpus-per-worker 1"); TD_DATA: a
#   folder holding topdown-flashapp-ecoli (kept out of .gpudata/data, whose FASTAs make the cluster bench's database)
# peers: bench/peers.py with PEERS_ARGS (Comet and Sage on the same FASTA and MGF; .deb/.whl in .gpudata/peers)
# Expects the wheels in .whl/ (`../shared/tools/device-wheels.sh orjson lxml threadpoolctl hypothesis attrs
#   sortedcontainers`: the image has none of these; psims, 23 MB, only for mzIdentML) and the real data copied
# to .gpudata/data/ (both git-ignored, carried by the device tool); writes logs under $OUT.
# BASELINE=DIR (a carried copy of another checkout) runs that checkout's GPU tests beside this one's.
set -uo pipefail
modes=" ${*:-all} "
[[ $modes == " all " ]] && modes=" parity bench library stream "
out=${OUT:-/tmp/rtsearch-out}
mkdir -p "$out"
python3 -m pip install -q --upgrade --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
# Bytecode compiled once a call, as pip does on a user's install, not by every process: the device's image sets
# PYTHONDONTWRITEBYTECODE, the wheels above go in with --no-compile, and the image's own packages (numpy, CuPy...)
# come without .pyc files, so each process compiled hundreds of modules from source (0.84 s of the 50,000-spectrum
# search's 4.99 under cProfile). Compiled in place, beside the sources (the wheels, this checkout, and the image's
# packages on this disposable machine): /tmp/site and the checkout so took the search's warm wall from 4.57-4.71 to
# 3.30 s (bench/RESULTS.md, 2026-11-28 12:38-12:55). Not PYTHONPYCACHEPREFIX: under a prefix Python reads no .pyc of
# the standard library either, and every process was slower (6.8-8.7 s, same entry). PRECOMPILE=0: as the image is.
if [[ ${PRECOMPILE:-1} != 0 ]]; then
  PYTHONPATH=/tmp/site python3 bench/precompile.py /tmp/site rtsearch simulators ${BASELINE:+"$BASELINE/rtsearch"}
fi
export PYTHONPATH=/tmp/site:$PWD:$PWD/simulators PYTHONUNBUFFERED=1 RTSEARCH_DATA=$PWD/.gpudata/data
# NVLink multicast stays off on the shared multi-GPU hosts (the device tool's KINDS.md), in every child too
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
# the host's cores as lscpu counts them (threads a core: are the 16 "cores" 8 with two threads each?)
lscpu 2>/dev/null | grep -E '^(Model name|CPU\(s\)|Thread\(s\) per core|Core\(s\) per socket|Socket\(s\))' | tee -a "$out/gpu.txt"
# how fast the host runs small-object Python and process hops right now (calls land on hosts of different pace)
python3 bench/host_speed.py | tee -a "$out/gpu.txt"
# MPS=1: every CUDA process of this call shares the GPU through CUDA MPS (the lanes' and workers' engine processes
# run their kernels side by side instead of taking turns), under a control daemon of the call's own, quit at the
# end; MPS=variants: started, not exported (a variant's words CUDA_MPS_PIPE_DIRECTORY=/tmp/rtsearch-mps/pipe put
# one daemon under it, beside others without, in one call). Four lanes at 20 ppm gained nothing under it beyond
# the order of the variants in a call (bench/RESULTS.md 2026-11-29).
if [[ -n ${MPS:-} && ${MPS:-} != 0 ]]; then
  mkdir -p /tmp/rtsearch-mps/pipe /tmp/rtsearch-mps/log
  CUDA_MPS_PIPE_DIRECTORY=/tmp/rtsearch-mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/rtsearch-mps/log \
    nvidia-cuda-mps-control -d && echo "CUDA MPS control daemon started ($MPS)" | tee -a "$out/gpu.txt"
  trap 'echo quit | CUDA_MPS_PIPE_DIRECTORY=/tmp/rtsearch-mps/pipe nvidia-cuda-mps-control' EXIT
  [[ $MPS == variants ]] || export CUDA_MPS_PIPE_DIRECTORY=/tmp/rtsearch-mps/pipe
fi
python3 -c 'import cupy, numpy; print("cupy", cupy.__version__, "numpy", numpy.__version__)' | tee -a "$out/gpu.txt"
rc=0
if [[ $modes == *" parity "* ]]; then
  if [[ -n ${BASELINE:-} ]]; then  # another checkout's GPU tests (say, before a change) beside this one's, same call
    (cd "$BASELINE" && PYTHONPATH=/tmp/site:$PWD:$PWD/simulators python3 -m pytest -m gpu tests/gpu -q -s \
      -p no:cacheprovider > "$out/pytest_gpu_baseline.log" 2>&1; echo "exit code $?" >> "$out/pytest_gpu_baseline.log") &
  fi
  python3 -m pytest -m gpu tests/gpu -q -s -p no:cacheprovider 2>&1 | tee "$out/pytest_gpu.log"
  rc=${PIPESTATUS[0]}
  wait
fi
if [[ $modes == *" kernels "* ]]; then  # the precompiled kernels rtsearch seeds CuPy's cache with (kernel_cache.py)
  kc=$(mktemp -d)
  CUPY_CACHE_DIR=$kc python3 -m pytest -m gpu -q -p no:cacheprovider tests/gpu/test_index_build.py \
    tests/gpu/test_parity.py tests/gpu/test_streaming.py tests/gpu/test_preprocess_kernel.py tests/gpu/test_upload.py \
    tests/gpu/test_library_parity.py tests/gpu/test_topdown_parity.py tests/gpu/test_signal_parity.py \
    tests/gpu/test_merge_kernel.py 2>&1 \
    | tee "$out/pytest_kernels.log"
  python3 bench/kernel_archive.py "$kc" "$out" || rc=1
fi
if [[ $modes == *" hop "* ]]; then
  # shellcheck disable=SC2086
  python3 bench/engine_hop.py --data "$RTSEARCH_DATA" --index-cache .benchcache/idx20k ${HOP_ARGS:-} \
    --json "$out/engine_hop.json" 2>&1 | tee "$out/engine_hop.log"
  [[ ${PIPESTATUS[0]} == 0 ]] || rc=1
fi
if [[ $modes == *" probe "* ]]; then
  python3 bench/engine_probe.py --data "$RTSEARCH_DATA" --index-cache .benchcache/idx20k ${PROBE_ARGS:-} 2>&1 | tee "$out/engine_probe.log"
  [[ ${PIPESTATUS[0]} == 0 ]] || rc=1
fi
if [[ $modes == *" bench "* ]]; then
  python3 bench/search_bench.py --data "$RTSEARCH_DATA" ${BENCH_ARGS:-} --json "$out/search_bench.json" 2>&1 | tee "$out/search_bench.log"
  [[ ${PIPESTATUS[0]} == 0 ]] || rc=1
fi
if [[ $modes == *" library "* ]]; then
  python3 bench/library_bench.py --data "$RTSEARCH_DATA" ${LIBRARY_ARGS:-} --json "$out/library_bench.json" 2>&1 \
    | tee "$out/library_bench.log"
  [[ ${PIPESTATUS[0]} == 0 ]] || rc=1
fi
if [[ $modes == *" stream "* ]]; then
  python3 bench/stream_bench.py --data "$RTSEARCH_DATA" --index-cache .benchcache/idx20k ${STREAM_ARGS:-} \
    --json "$out/stream_bench.json" 2>&1 | tee "$out/stream_bench.log"
  [[ ${PIPESTATUS[0]} == 0 ]] || rc=1
fi
if [[ $modes == *" memsoak "* ]]; then  # issue 16's memory: rtsearch serve under rt_load.py (MEMSOAK_ARGS)
  # shellcheck disable=SC2086
  python3 bench/memory_soak.py --data "$RTSEARCH_DATA" --tools .gpudata/tools --index-cache .benchcache/idx20k \
    ${MEMSOAK_ARGS:---rate 30000 --minutes 9 --phase-seconds 30 --serve-args=--lanes=4} --json "$out/memsoak.json" 2>&1 | tee "$out/memsoak.log"
  [[ ${PIPESTATUS[0]} == 0 ]] || rc=1
fi
if [[ $modes == *" shards "* ]]; then  # K whole daemons side by side, each fed its own runs (bench/shards_probe.py)
  # shellcheck disable=SC2086
  python3 bench/shards_probe.py --data "$RTSEARCH_DATA" --tools .gpudata/tools --index-cache .benchcache/idx20k \
    ${SHARDS_ARGS:-} --json "$out/shards.json" 2>&1 | tee "$out/shards.log"
  [[ ${PIPESTATUS[0]} == 0 ]] || rc=1
fi
if [[ $modes == *" rtload "* ]]; then
  # each GPU's use twice a second, timestamped (the phases' "wall" spans say which phase)
  nvidia-smi --query-gpu=timestamp,index,utilization.gpu,memory.used --format=csv -lms 500 > "$out/gpu_use.csv" &
  smi=$!
  # shellcheck disable=SC2086
  python3 bench/rtload_bench.py --data "$RTSEARCH_DATA" --tools .gpudata/tools --index-cache .benchcache/idx20k \
    ${RTLOAD_ARGS:-} --json "$out/rtload.json" 2>&1 | tee "$out/rtload.log"
  [[ ${PIPESTATUS[0]} == 0 ]] || rc=1
  if [[ -n ${RTLOAD2_ARGS:-} ]]; then  # a second pass, other senders or variants (rtload2.json)
    # shellcheck disable=SC2086
    python3 bench/rtload_bench.py --data "$RTSEARCH_DATA" --tools .gpudata/tools --index-cache .benchcache/idx20k \
      $RTLOAD2_ARGS --json "$out/rtload2.json" 2>&1 | tee "$out/rtload2.log"
    [[ ${PIPESTATUS[0]} == 0 ]] || rc=1
  fi
  kill $smi
fi
if [[ $modes == *" latency "* ]]; then
  # shellcheck disable=SC2086
  python3 bench/latency_probe.py --data "$RTSEARCH_DATA" --tools .gpudata/tools --index-cache .benchcache/idx20k \
    ${LATENCY_ARGS:-} --json "$out/latency.json" 2>&1 | tee "$out/latency.log"
  [[ ${PIPESTATUS[0]} == 0 ]] || rc=1
fi
if [[ $modes == *" bulk "* ]]; then
  # shellcheck disable=SC2086
  python3 bench/bulk_bench.py --data "$RTSEARCH_DATA" --index-cache .benchcache/idx20k ${BULK_ARGS:-} \
    --json "$out/bulk.json" 2>&1 | tee "$out/bulk.log"
  [[ ${PIPESTATUS[0]} == 0 ]] || rc=1
fi
if [[ $modes == *" wall "* ]]; then
  eval "wall_args=(${WALL_ARGS:-})"  # shell words: WALL_ARGS='--variant "--readers 16"' keeps a variant whole
  python3 bench/search_wall.py --data "$RTSEARCH_DATA" --index-cache .benchcache/idx20k "${wall_args[@]}" \
    --json "$out/search_wall.json" 2>&1 | tee "$out/search_wall.log"
  [[ ${PIPESTATUS[0]} == 0 ]] || rc=1
fi
if [[ $modes == *" signal "* ]]; then
  python3 bench/signal_bench.py --data "$RTSEARCH_DATA" ${SIGNAL_ARGS:-} 2>&1 | tee "$out/signal_bench.log"
  [[ ${PIPESTATUS[0]} == 0 ]] || rc=1
fi
if [[ $modes == *" elution "* ]]; then
  python3 -m pytest -m gpu tests/gpu/test_signal_parity.py -q -p no:cacheprovider 2>&1 | tee "$out/pytest_signal.log"
  [[ ${PIPESTATUS[0]} == 0 ]] || rc=1
  # shellcheck disable=SC2086
  python3 bench/elution_bench.py --data "$RTSEARCH_DATA" --serve-args "--backend cupy" ${ELUTION_ARGS:-} 2>&1 \
    | tee "$out/elution_bench.log"
  [[ ${PIPESTATUS[0]} == 0 ]] || rc=1
fi
if [[ $modes == *" cluster "* ]]; then
  python3 -c 'import ray; print("ray", ray.__version__)' 2>&1 | tail -1 | tee "$out/ray.txt"
  if [[ ${CLUSTER_TESTS:-1} == 1 ]]; then
    python3 -m pytest -m gpu tests/gpu/test_cluster_gpu.py -q -s -p no:cacheprovider 2>&1 | tee "$out/pytest_cluster.log"
    [[ ${PIPESTATUS[0]} == 0 ]] || rc=1
  fi
  eval "args=(${CLUSTER_ARGS:-})"
  python3 bench/cluster_bench.py --data "$RTSEARCH_DATA" --tools .gpudata/tools --index-cache .benchcache/idx20k \
    "${args[@]}" --json "$out/cluster.json" 2>&1 | tee "$out/cluster.log"
  [[ ${PIPESTATUS[0]} == 0 ]] || rc=1
  if [[ -n ${BASELINE:-} ]]; then  # another checkout's cluster bench after this one's, same arguments, same index
    mkdir -p "$out/base"
    eval "bargs=(${BASELINE_ARGS:-${CLUSTER_ARGS:-}})"  # BASELINE_ARGS: other arguments for it (fewer configurations)
    (cd "$BASELINE" && PYTHONPATH=/tmp/site:$PWD:$PWD/simulators python3 bench/cluster_bench.py --data "$RTSEARCH_DATA" \
      --tools "$OLDPWD/.gpudata/tools" --index-cache "$OLDPWD/.benchcache/idx20k" "${bargs[@]}" \
      --json "$out/base/cluster.json" > "$out/base/cluster.log" 2>&1) || rc=1
  fi
fi
if [[ $modes == *" tdcluster "* ]]; then  # issue 21: the top-down daemon (GPU-bound) through 1 and N cluster workers
  eval "args=(${TDCLUSTER_ARGS:-})"
  python3 bench/topdown_daemon.py --data "${TD_DATA:-$RTSEARCH_DATA}" --tools .gpudata/tools "${args[@]}" \
    --json "$out/tdcluster.json" 2>&1 | tee "$out/tdcluster.log"
  [[ ${PIPESTATUS[0]} == 0 ]] || rc=1
fi
if [[ $modes == *" peers "* ]]; then
  # shellcheck disable=SC2086
  python3 bench/peers.py --data "$RTSEARCH_DATA" --work .benchcache/peers ${PEERS_ARGS:-} --json "$out/peers.json" 2>&1 \
    | tee "$out/peers.log"
  [[ ${PIPESTATUS[0]} == 0 ]] || rc=1
fi
if [[ $modes == *" reader "* ]]; then
  python3 bench/reader_bench.py --data "$RTSEARCH_DATA" 2>&1 | tee "$out/reader_bench.log"
  [[ ${PIPESTATUS[0]} == 0 ]] || rc=1
fi
if [[ $modes == *" topdown "* ]]; then
  for v in ${TOPDOWN_VARIANTS:-0.02:15 0.05:0}; do
    python3 bench/topdown_search.py --data "$RTSEARCH_DATA" --backend cupy --truncations --tolerance "${v%%:*}" \
      --ppm "${v##*:}" 2>&1 | tee "$out/topdown_search_${v/:/_}.log"
    [[ ${PIPESTATUS[0]} == 0 ]] || rc=1
  done
  pf=.benchcache/ecoli.pf
  td=$RTSEARCH_DATA/topdown-flashapp-ecoli
  [[ -d $pf ]] || python3 -m rtsearch.cli proteoforms build --fasta "$td/example_database.fasta" --out "$pf"
  for run in "$td/toppic_ms2.msalign" "$RTSEARCH_DATA/topdown-jurkat/JurkatTopDownRep2Fract1_ms2.msalign"; do
    name=$(basename "$run" .msalign)
    { time python3 -m rtsearch.cli -v search "$run" --proteoforms "$pf" --backend cupy \
      -o "$out/topdown_$name.tsv"; } > "$out/topdown_$name.log" 2>&1 || rc=1
    tail -3 "$out/topdown_$name.log"
  done
  sim=.gpudata/tdsim  # bench/topdown_simulate.py's run and TopPIC's JSON on it (bench/toppic_run.py, dev machine)
  if [[ -f $sim/sim_ms2.msalign ]]; then
    [[ -d .benchcache/sim.pf ]] || python3 -m rtsearch.cli proteoforms build --fasta "$sim/example_database.fasta" \
      --out .benchcache/sim.pf
    { time python3 -m rtsearch.cli search "$sim/sim_ms2.msalign" --proteoforms .benchcache/sim.pf --backend cupy \
      -o "$out/topdown_sim.tsv"; } > "$out/topdown_sim.log" 2>&1 || rc=1
    python3 bench/topdown_truth.py --truth "$sim/truth.json" --toppic "$sim/toppic.json" --rtsearch "$out/topdown_sim.tsv" \
      --json "$out/topdown_truth.json" 2>&1 | tee -a "$out/topdown_sim.log"
  fi
fi
exit $rc
