#!/usr/bin/env bash
# GPU harness for the lent GPU (its image as is; nothing is installed). From the
# repository root:   bash bench/gpu_harness.sh OUTDIR [--quick] [pytest args...]
# 1. the test-suite for real (tests/, GPU mode)          -> OUTDIR/pytest.log
# 2. every op's kernels under compute-sanitizer memcheck  -> OUTDIR/memcheck.log
#    and racecheck                                        -> OUTDIR/racecheck.log
# 3. the benchmarks (python -m bench)                     -> OUTDIR/bench.log, OUTDIR/results/
# then OUTDIR/summary.md with one line per step.
set -uo pipefail
cd "$(dirname "$0")/.."
OUTDIR=${1:?usage: bash bench/gpu_harness.sh OUTDIR [--quick] [pytest args]}
shift
QUICK=""
if [ "${1:-}" = "--quick" ]; then QUICK="--quick"; shift; fi
mkdir -p "$OUTDIR"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
PY=${PY:-python3}

{
  nvidia-smi -L
  "$PY" -c "import sys, numpy, numba, torch; import numba_cuda; print(sys.version); print('numpy', numpy.__version__, 'numba', numba.__version__, 'torch', torch.__version__)"
  "$PY" -m pip list 2>/dev/null | grep -i -E "^(numba|numba-cuda|cupy|cuda-core|cuda-bindings|torch|triton) "
} > "$OUTDIR/env.txt" 2>&1

"$PY" -m pytest -q -rs -p no:cacheprovider tests "$@" > "$OUTDIR/pytest.log" 2>&1
TESTS_RC=$?
SAN=${SANITIZER:-compute-sanitizer}
$SAN --tool memcheck --report-api-errors no --error-exitcode 9 "$PY" bench/sanitize.py > "$OUTDIR/memcheck.log" 2>&1
MEM_RC=$?
$SAN --tool racecheck --error-exitcode 9 "$PY" bench/sanitize.py > "$OUTDIR/racecheck.log" 2>&1
RACE_RC=$?
"$PY" -m bench $QUICK --out "$OUTDIR/results" > "$OUTDIR/bench.log" 2>&1
BENCH_RC=$?

{
  echo "# GPU harness summary"
  echo
  echo "- env: $(head -1 "$OUTDIR/env.txt")"
  echo "- tests (rc $TESTS_RC): $(tail -1 "$OUTDIR/pytest.log")"
  echo "- memcheck (rc $MEM_RC): $(grep -h 'ERROR SUMMARY' "$OUTDIR/memcheck.log" | tail -1)"
  echo "- racecheck (rc $RACE_RC): $(grep -h 'RACECHECK SUMMARY' "$OUTDIR/racecheck.log" | tail -1)"
  echo "- bench (rc $BENCH_RC): see bench.log and results/"
} > "$OUTDIR/summary.md"
cat "$OUTDIR/summary.md"
[ $TESTS_RC -eq 0 ] && [ $MEM_RC -eq 0 ] && [ $RACE_RC -eq 0 ] && [ $BENCH_RC -eq 0 ]
