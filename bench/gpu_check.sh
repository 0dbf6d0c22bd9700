#!/usr/bin/env bash
# Everything that needs the GPU machine, in one device call: the GPU tests and any of the bench suites.
#   bash bench/gpu_check.sh [parity] [kernels] [search] [index] [daemon] [library] [topdown] [ms1_signal] [cluster]
#                           [soak] [readers]          (no mode: parity)
# Each suite runs as `python3 bench/SUITE.py --data .gpudata/data [--tools .gpudata/tools] $SUITE_ARGS
# --json $OUT/SUITE.json` (SUITE_ARGS: the suite's own arguments, e.g. DAEMON_ARGS="--rates 200,20000"), its output
# in $OUT/SUITE.log. parity: the GPU tests (tests/gpu); kernels: the GPU tests with an empty kernel cache, packed
# into the archive rtsearch seeds CuPy's cache from (bench/kernel_archive.py).
# Needs, git-ignored and carried by the device tool: .gpudata/data (a copy of the parts of ../shared/data the
# suites read), .gpudata/tools (../shared/tools: rt_load.py, echo_floor.py), .gpudata/peers (Comet's .deb files,
# sagepy's wheels: bench/peers.py) and .whl (`../shared/tools/device-wheels.sh orjson lxml threadpoolctl hypothesis
# attrs sortedcontainers msgspec psims sqlalchemy six greenlet typing_extensions`: wheels the machine's image lacks;
# psims, 24 MB, holds the Unimod table modifications are checked against: with it the carry's 64 MiB leaves room for
# ../shared/data less lcms-ms1 and spectral-libraries where the suites run need neither). RTSEARCH_COMMIT names the
# commit in each record.
set -uo pipefail
modes=" ${*:-parity} "
out=${OUT:-/tmp/rtsearch-out}
mkdir -p "$out"
python3 -m pip install -q --upgrade --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
# bytecode compiled once a call, as pip does at install (the image sets PYTHONDONTWRITEBYTECODE: bench/precompile.py)
PYTHONPATH=/tmp/site python3 bench/precompile.py /tmp/site rtsearch simulators
export PYTHONPATH=/tmp/site:$PWD:$PWD/simulators PYTHONUNBUFFERED=1 RTSEARCH_DATA=$PWD/.gpudata/data
# NVLink multicast stays off on the shared multi-GPU hosts (the device tool's KINDS.md), in every child too
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/gpu.txt"
python3 -c 'import cupy, numpy; print("cupy", cupy.__version__, "numpy", numpy.__version__)' | tee -a "$out/gpu.txt"
rc=0
if [[ $modes == *" parity "* ]]; then
  python3 -m pytest -m gpu tests/gpu -q -s -p no:cacheprovider 2>&1 | tee "$out/pytest_gpu.log"
  [[ ${PIPESTATUS[0]} == 0 ]] || rc=1
fi
if [[ $modes == *" kernels "* ]]; then
  kc=$(mktemp -d)
  CUPY_CACHE_DIR=$kc python3 -m pytest -m gpu -q -p no:cacheprovider tests/gpu/test_index_build.py \
    tests/gpu/test_parity.py tests/gpu/test_streaming.py tests/gpu/test_preprocess_kernel.py tests/gpu/test_upload.py \
    tests/gpu/test_library_parity.py tests/gpu/test_topdown_parity.py tests/gpu/test_signal_parity.py \
    tests/gpu/test_merge_kernel.py 2>&1 | tee "$out/pytest_kernels.log"
  python3 bench/kernel_archive.py "$kc" "$out" || rc=1
fi
for suite in search index daemon library topdown ms1_signal cluster soak readers; do
  [[ $modes == *" $suite "* ]] || continue
  var=${suite^^}_ARGS data=${suite^^}_DATA  # SUITE_DATA: another data folder (the bench database is every FASTA of one)
  eval "extra=(${!var:-})"  # shell words: DAEMON_ARGS='--variant "lanes4=--lanes,4"' keeps a word whole
  tools=()
  [[ $suite == daemon || $suite == cluster || $suite == soak ]] && tools=(--tools .gpudata/tools)
  [[ $suite == search ]] && tools=(--peers-dir .gpudata/peers)
  echo "== bench/$suite.py ${tools[*]} ${extra[*]}" | tee "$out/$suite.log"
  python3 "bench/$suite.py" --data "${!data:-$RTSEARCH_DATA}" "${tools[@]}" "${extra[@]}" --json "$out/$suite.json" 2>&1 \
    | tee -a "$out/$suite.log"
  [[ ${PIPESTATUS[0]} == 0 ]] || rc=1
done
exit $rc
