#!/usr/bin/env bash
# GPU harness for the lent GPU (its image as is; nothing is installed). From the
# repository root:
#   bash bench/gpu_harness.sh OUTDIR [--quick] [--stages tests,sanitize,bench] [--workers N] [pytest args...]
# Stages (all by default, in this order):
#   tests     the test-suite for real (GPU mode; $TESTS, default tests/) -> OUTDIR/pytest.log
#   sanitize  every op's kernels under compute-sanitizer's tools    -> OUTDIR/<tool>.log
#             (memcheck, racecheck, synccheck, initcheck; one process per tool and op,
#             concurrently; $SAN_TOOLS, $SAN_OPS, $SAN_TIMEOUT)
#   bench     the benchmarks and examples (python -m bench)         -> OUTDIR/bench.log, OUTDIR/results/
# Each stage appends its line to OUTDIR/summary.md, so a lease whose calls are shorter
# than the whole run (10 minutes on the lent GPU; the tests alone take 5-9) can run
# the stages in separate calls into one folder. --workers N runs the tests on N
# pytest-xdist processes (compiles dominate: use the machine's cores; default 8 when
# pytest-xdist is installed).
set -uo pipefail
cd "$(dirname "$0")/.."
OUTDIR=${1:?usage: bash bench/gpu_harness.sh OUTDIR [--quick] [--stages LIST] [--workers N] [pytest args]}
shift
QUICK=""
STAGES="tests,sanitize,bench"
WORKERS=8
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK="--quick"; shift ;;
    --stages) STAGES="$2"; shift 2 ;;
    --workers) WORKERS="$2"; shift 2 ;;
    *) break ;;
  esac
done
mkdir -p "$OUTDIR"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
PY=${PY:-python3}
SUMMARY="$OUTDIR/summary.md"
[ -f "$SUMMARY" ] || printf '# GPU harness summary\n\n' > "$SUMMARY"
has_stage() { case ",$STAGES," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
OK=0

{
  date -u +%FT%TZ
  nvidia-smi -L
  "$PY" -c "import sys, numpy, numba, torch; import numba_cuda; print(sys.version); print('numpy', numpy.__version__, 'numba', numba.__version__, 'torch', torch.__version__)"
  "$PY" -m pip list 2>/dev/null | grep -i -E "^(numba|numba-cuda|cupy|cupy-cuda13x|cuda-core|cuda-bindings|torch|triton|pytest-xdist) "
} > "$OUTDIR/env.txt" 2>&1
echo "- $(date -u +%FT%TZ) env: $(sed -n 2p "$OUTDIR/env.txt")" >> "$SUMMARY"

if has_stage tests; then
  XDIST=()
  if [ "$WORKERS" -gt 1 ] && "$PY" -c "import xdist" 2>/dev/null; then XDIST=(-n "$WORKERS"); fi
  # PTX-compile tests are CPU CI's job (the GPU compiles every kernel it runs anyway);
  # one BLAS/OpenMP thread per worker keeps the float64 references from oversubscribing.
  # -v names each test as it ends, so a run cut by the call's limit still names its
  # failures (the sixty-ninth session's cut run showed two F and no names); -rfEs
  # lists failures, errors and skips at the end.
  OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \
    "$PY" -m pytest -v -rfEs -p no:cacheprovider --durations=30 -m "not ptx" "${XDIST[@]}" ${TESTS:-tests} "$@" > "$OUTDIR/pytest.log" 2>&1
  RC=$?; [ $RC -eq 0 ] || OK=1
  echo "- tests ${TESTS:-tests} (rc $RC, ${#XDIST[@]} xdist args): $(tail -1 "$OUTDIR/pytest.log")" >> "$SUMMARY"
  grep -oE "(FAILED|ERROR) tests/[^ ]+" "$OUTDIR/pytest.log" | sort -u | head -30 \
    | sed 's/^/  - /' >> "$SUMMARY"
fi
if has_stage sanitize; then
  # One process per (tool, op), all at once: the instrumented runs are slow, a lease's
  # call is 10 minutes, and a sanitizer left running would skew later timings, so
  # each has a hard limit ($SAN_TIMEOUT s, then KILL) and all are reaped here.
  SAN=${SANITIZER:-compute-sanitizer}
  SAN_TIMEOUT=${SAN_TIMEOUT:-420}
  SAN_OPS=${SAN_OPS:-dropout layer_norm attention linear_act linear_act_wgmma}
  SAN_TOOLS=${SAN_TOOLS:-memcheck racecheck synccheck initcheck}
  SANDIR="$OUTDIR/.sanitize"; mkdir -p "$SANDIR"
  # On a machine with several GPUs the processes take them in turn ($SAN_GPUS: how
  # many to use; default all).
  NGPU=${SAN_GPUS:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')}
  [ "$NGPU" -ge 1 ] 2>/dev/null || NGPU=1
  i=0
  for tool in $SAN_TOOLS; do
    for op in $SAN_OPS; do
      args=(--tool "$tool" --error-exitcode 9)
      args+=(--report-api-errors no)
      ( CUDA_VISIBLE_DEVICES=$((i % NGPU)) timeout -k 10 "$SAN_TIMEOUT" $SAN "${args[@]}" \
          "$PY" bench/sanitize.py "$op" > "$SANDIR/${tool}_$op.log" 2>&1
        echo $? > "$SANDIR/${tool}_$op.rc" ) &
      i=$((i + 1))
    done
  done
  wait
  for tool in $SAN_TOOLS; do
    line=""
    : > "$OUTDIR/$tool.log"
    for op in $SAN_OPS; do
      RC=$(cat "$SANDIR/${tool}_$op.rc" 2>/dev/null || echo missing)
      { echo "===== $tool $op (rc $RC)"; cat "$SANDIR/${tool}_$op.log"; } >> "$OUTDIR/$tool.log"
      [ "$RC" = 0 ] || OK=1
      case "$RC" in 124|137) what="timed out after ${SAN_TIMEOUT}s" ;;
        *) what=$(grep -h -E '(ERROR|RACECHECK) SUMMARY' "$SANDIR/${tool}_$op.log" | tail -1) ;; esac
      line="$line $op rc $RC: ${what:-no summary};"
    done
    echo "- $tool:$line" >> "$SUMMARY"
  done
  rm -rf "$SANDIR"
fi
if has_stage bench; then
  "$PY" -m bench $QUICK --out "$OUTDIR/results" > "$OUTDIR/bench.log" 2>&1
  RC=$?; [ $RC -eq 0 ] || OK=1
  echo "- bench (rc $RC): see bench.log and results/" >> "$SUMMARY"
fi
cat "$SUMMARY"
exit $OK
