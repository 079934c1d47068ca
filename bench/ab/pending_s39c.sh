#!/usr/bin/env bash
# Thirty-ninth session, H200: dropout v15 (the 16-bit gelu forward on four waves of its
# resident blocks up to N = 16384, `_default_fwd_fill`) as shipped:
#   the GPU tests of the forward and the new ones, memcheck of the dropout workload at
#   fp16, then the gelu forward across N (numba and eager, fp16 / bf16, M x N = 2^26).
#   bash bench/ab/pending_s39c.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: pending_s39c.sh OUTDIR}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
timeout -k 5 150 python3 -m pytest -q -p no:cacheprovider -n 14 tests/test_dropout.py \
  -m "not ptx" -k "fwd_fill or forward or gelu or identical" --timeout 120 \
  > "$OUT/v_tests.log" 2>&1
echo "tests rc $?"; tail -2 "$OUT/v_tests.log"; grep -E "^FAILED" "$OUT/v_tests.log" | head
SAN_OPS="dropout:float16" SAN_TOOLS="memcheck" SAN_TIMEOUT=100 \
  timeout -k 10 120 bash bench/gpu_harness.sh "$OUT/san" --stages sanitize > "$OUT/san.out" 2>&1
echo "sanitize rc $?"; grep -E "memcheck" "$OUT/san/summary.md"
SHAPES=131072x512,87381x768,65536x1024,32768x2048,16384x4096,13107x5120,8192x8192
SHAPES=$SHAPES,5461x12288,4096x16384,1024x65536
timeout -k 10 200 python3 bench/dropout.py --shapes "$SHAPES" --dtypes float16,bfloat16 \
  --activations gelu --directions fwd --providers numba,eager --reps 30 --warmup 5 \
  --no-host-overhead --no-memory --json "$OUT/gelu_fwd_sweep.json" > "$OUT/gelu_fwd_sweep.log" 2>&1
echo "sweep rc $?"; tail -30 "$OUT/gelu_fwd_sweep.log"
