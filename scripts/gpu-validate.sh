#!/usr/bin/env bash
# The CUDA backend on a GPU machine, in one command (docs/backends.md, "On a GPU machine"):
# builds (or takes prebuilt binaries), runs the GPU test, one validation, a profile and the
# validation sweep, draws the plot, and leaves everything in one folder:
#   versions.txt   GPU, driver, CUDA, compiler and commit
#   gpu_test.txt   tests/gpu_test.cc's output
#   validate.json  `pipesim validate --backend cuda` on the sweep's scenario
#   profile.csv    `pipesim profile --backend cuda` on the same
#   sweep.json     `pipesim validate --sweep --backend cuda` (54 configurations by default)
#   sweep.png      plots/validation.py of sweep.json
#   log.txt        every step's output and time
#
#   scripts/gpu-validate.sh OUT_DIR
# Environment:
#   PIPESIM_BIN=DIR     binaries built elsewhere (DIR/pipesim, the CUDA plugin
#                       DIR/libpipesim-cuda.so beside it, and DIR/gpu_test, same CUDA major
#                       as the GPU machine's); their libraries may sit in DIR/../lib.
#                       Otherwise builds in ${BUILD_DIR:-build-gpu} (needs the packages of
#                       scripts/bootstrap.sh and nvcc).
#   ITERATIONS=N        timed runs per set for validate and the sweep (5; two sets each)
#   SWEEP_ARGS="..."    extra arguments for the sweep (e.g. "--stages 2,4")
# Each step has its own time limit and a failed step does not stop the later ones; the exit
# status is the number of failed steps. On one H100 (2026-11-27) the sweep's 54
# configurations take about 78 s per round of runs (0.4-3.3 s each), so the whole takes about
# 16 minutes at ITERATIONS=5 (1 + 2 x 5 runs each) and 8 at ITERATIONS=2. A sweep stopped
# before its end leaves its progress lines in log.txt; sweep.json is then rebuilt from them
# (scripts/sweep_progress.py, "partial": true).
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:?usage: scripts/gpu-validate.sh OUT_DIR}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
log="$out/log.txt"
: >"$log"
iterations="${ITERATIONS:-5}"
failed=0

step() {  # step NAME LIMIT_S COMMAND...: runs, logs, times
  local name="$1" limit="$2"
  shift 2
  local t0=$SECONDS
  echo "== $name: $*" | tee -a "$log"
  timeout "$limit" "$@" >>"$log" 2>&1
  local rc=$?
  echo "== $name: exit $rc after $((SECONDS - t0)) s" | tee -a "$log"
  [ "$rc" -eq 0 ] || failed=$((failed + 1))
  return "$rc"
}

{
  echo "date: $(date -u +%FT%TZ)"
  echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit \
    --format=csv,noheader 2>&1 || true
  nvcc --version 2>&1 | tail -1 || true
  uname -r
} >"$out/versions.txt"
cat "$out/versions.txt" | tee -a "$log"
nvidia-smi >>"$log" 2>&1 || true

if [ -n "${PIPESIM_BIN:-}" ]; then
  bin="$(cd "$PIPESIM_BIN" && pwd)"
  libs="$bin/../lib"
  # The CUDA libraries the binaries link (cudart, cublas), wherever this machine keeps them.
  cudalib="$(dirname "$(find /usr/local/cuda*/ /usr/lib /opt -name 'libcublas.so.1*' \
    2>/dev/null | head -1)")"
  export LD_LIBRARY_PATH="$libs:$cudalib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  ldd "$bin/pipesim" "$bin/libpipesim-cuda.so" | grep "not found" | tee -a "$log"
else
  build="${BUILD_DIR:-build-gpu}"
  step configure 300 cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DPIPESIM_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90
  step build 900 cmake --build "$build" --target pipesim gpu_test
  bin="$(cd "$build" && pwd)"
fi
gpu_test="$bin/gpu_test"
[ -x "$gpu_test" ] || gpu_test="$bin/tests/gpu_test"
pipesim="$bin/pipesim"
scenario=scenarios/validation/backend-sweep.yaml

step gpu_test 60 sh -c "'$gpu_test' >'$out/gpu_test.txt' 2>&1; rc=\$?; cat '$out/gpu_test.txt'; exit \$rc"
step validate 90 "$pipesim" validate "$scenario" --backend cuda --iterations "$iterations" --calibrate \
  --json "$out/validate.json"
step profile 60 "$pipesim" profile "$scenario" --backend cuda --out "$out/profile.csv"
# shellcheck disable=SC2086
step sweep 1200 "$pipesim" validate "$scenario" --sweep --backend cuda \
  --iterations "$iterations" --calibrate --json "$out/sweep.json" ${SWEEP_ARGS:-}
if [ ! -s "$out/sweep.json" ]; then
  step sweep_progress 60 python3 scripts/sweep_progress.py "$log" "$out/sweep.json"
fi
if [ -s "$out/sweep.json" ]; then
  step plot 120 python3 plots/validation.py "$out/sweep.json" "$out/sweep.png"
fi
echo "failed steps: $failed" | tee -a "$log"
exit "$failed"
