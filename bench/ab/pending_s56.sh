#!/usr/bin/env bash
# Written in the fifty-fifth session for the next (an H200; bench/NOTES.md, fifty-fifth
# session): what dropout v24 (the four-wave 16-bit gelu forward in blocks of 128) still
# owes, and one cheap question for the bias-grad backward.
#   t: the dropout GPU tests (tests/test_dropout.py, tests/test_nonfinite.py; call 10 of
#      the fifty-fifth session was cut 1 test short by the device time), then the four
#      sanitizers on bench/sanitize.py's dropout workload (which now runs the 128-thread
#      forward and, with the per-launch limit lowered, the g64 kernels of row pieces).
#      ~400 s.
#   w: the dropout sweep at v24 (pending_sweep.sh, all three dtypes), then
#      interop.torch beside the array level at every shape (one run each, ~230 s).
#   b: the bias-grad backward at 128 threads against 256, alternating (ptxas: 93-95
#      registers, 5 blocks of 128 an SM = 20 warps against 2 of 256 = 16), fp16 and
#      bf16, 'none' and gelu, with and without the bias grad (~90 s). The v10-era try
#      (NOTES, "within 1 either way") predates v13-v23.
#   bash bench/ab/pending_s56.sh "$OUT" {t|w|b}
set -uo pipefail
OUT=${1:?"usage: pending_s56.sh OUTDIR t|w|b"}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
SHAPES=131072x512,87381x768,65536x1024,32768x2048,16384x4096,13107x5120,8192x8192
SHAPES=$SHAPES,5461x12288,4096x16384,1024x65536
case "${2:?t, w or b}" in
  t)
    timeout -k 5 330 python3 -m pytest -q -p no:cacheprovider -n 15 tests/test_dropout.py \
      tests/test_nonfinite.py > "$OUT/tests.log" 2>&1
    echo "tests rc $?"; tail -2 "$OUT/tests.log"
    SAN_TOOLS="memcheck racecheck synccheck initcheck" SAN_OPS=dropout SAN_TIMEOUT=200 \
      timeout -k 10 230 bash bench/gpu_harness.sh "$OUT/san" --stages sanitize \
      > "$OUT/san.log" 2>&1
    cat "$OUT/san/summary.md"
    ;;
  w)
    bash bench/ab/pending_sweep.sh "$OUT" float16,bfloat16,float32
    timeout -k 10 200 python3 bench/dropout.py --shapes "$SHAPES" \
      --dtypes float16,bfloat16,float32 --activations none,gelu \
      --providers numba,numba_torch --reps 30 --warmup 5 --no-host-overhead --no-memory \
      --json "$OUT/dropout_interop_sweep.json" > "$OUT/dropout_interop_sweep.log" 2>&1
    echo "interop rc $?"; grep -E "16384x4096 \| float16" "$OUT/dropout_interop_sweep.log"
    ;;
  b)
    for dt in float16 bfloat16; do
      timeout -k 5 150 python3 bench/tune_dropout.py --out "$OUT/b_$dt" --dtype "$dt" \
        --cases "bwd,bwd nobias" --acts none,gelu \
        --configs "shipped,threads=128,shipped,threads=128,shipped,threads=128" \
        > "$OUT/b_$dt.log" 2>&1
      echo "== $dt rc $?"; grep -E "^\| (shipped|threads)" "$OUT/b_$dt/tune_dropout.md" \
        | grep -v p0
      grep -i "registers" "$OUT/b_$dt/tune_dropout.md" | head -2
    done
    ;;
  *) echo "t, w or b" >&2; exit 2 ;;
esac
