#!/usr/bin/env bash
# A 2-rank `mpirun` sweep writes byte for byte what one process writes, and a 2-rank plan
# ranks the same strategies.
#   tests/mpi_test.sh MPIEXEC PIPESIM [WORKDIR]
set -euo pipefail
mpiexec=$1
pipesim=$2
work=${3:-$(mktemp -d)}
mkdir -p "$work"
cd "$(dirname "$0")/.."
scenario=scenarios/examples/toy-gpipe.yaml
flags=()
# Open MPI refuses root without this, and a machine with fewer cores than ranks without
# --oversubscribe; other MPIs take neither flag.
if OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "$mpiexec" --version 2>&1 | grep -qiE "open ?mpi|openrte"; then flags=(--allow-run-as-root --oversubscribe); fi
# Schedules that fail validation (zb-h1 without split backwards) and points that run out of
# memory (micro-batches of 64 on V100s) are part of the comparison.
grid=(--grid "training.micro_batch=1..64*2" --grid "strategy.schedule=gpipe,dapple,zb-h1,interleaved")

"$pipesim" sweep "$scenario" "${grid[@]}" --threads 1 --quiet \
  --csv "$work/one.csv" --json "$work/one.json" >"$work/one.out"
"$mpiexec" "${flags[@]}" -n 2 "$pipesim" sweep "$scenario" "${grid[@]}" --quiet \
  --csv "$work/two.csv" --json "$work/two.json" >"$work/two.out"
for f in csv json out; do
  cmp "$work/one.$f" "$work/two.$f"
done
grep -q "out of memory" "$work/one.out" || { echo "expected a point out of memory"; exit 1; }
grep -q ",zb-h1,.*needs every layer" "$work/one.csv" || { echo "expected failing points"; exit 1; }

# An output rank 0 refuses (a directory) stops every rank: exit 2, no rank left waiting.
mkdir -p "$work/a-directory"
rc=0
timeout 60 "$mpiexec" "${flags[@]}" -n 2 "$pipesim" sweep "$scenario" "${grid[@]}" --quiet \
  --json "$work/a-directory" >/dev/null 2>"$work/refused.err" || rc=$?
if [ "$rc" = 0 ] || [ "$rc" = 124 ]; then echo "expected a refused output, not exit $rc"; exit 1; fi
grep -q "the output path is a directory" "$work/refused.err"

# The planner's simulation phase over 2 ranks: the same table (but for its timing line).
"$pipesim" plan "$scenario" --quiet | grep -v " in [0-9.]* s" >"$work/plan-one.out"
"$mpiexec" "${flags[@]}" -n 2 "$pipesim" plan "$scenario" --quiet |
  grep -v " in [0-9.]* s" >"$work/plan-two.out"
cmp "$work/plan-one.out" "$work/plan-two.out"
echo "2-rank sweep and plan match one process"
