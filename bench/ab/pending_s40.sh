#!/usr/bin/env bash
# Written in the thirty-ninth session (after its device time) for the next, an H200:
# dropout v16 candidate, LaunchConfig(ahead=2): the forward at one row a batch issues
# the load of row r + 2 steps before row r is computed (two rows in flight a thread).
# Why (bench/notes_dropout.md, v15): ncu of the 16-bit gelu forward at v15 found no pipe
# near its limit (fmaheavy 52%, MUFU 41%) and issue 76% active, with 6.15 cycles not
# selected and 5.4 on loads per issued instruction: the warps wait on their loads
# together. ptxas sm_90: 40 registers (gelu fp16 / bf16; 6 blocks of 256 an SM against
# 8 at 32), 37 for 'none'; float32 gelu 71 at 512 threads. No spills.
#   a: tune_dropout fp16 / bf16 16384 x 4096, forward, shipped / ahead=2 (v15's fill 4
#      of its own resident blocks) / ahead=2 fill=0 / ahead=2 threads=512 / shipped;
#      acts gelu, none. Prediction: gelu 84.8-85.9 -> 79-82 us if loads in flight bind
#      it (48 warps x 2 rows an SM against 64 x 1); slower if the lost quarter of the
#      warps costs more; 'none' within 1 us. ~2 minutes.
#   t: GPU tests (`-k "two_rows_ahead or bad_launch"`) and memcheck / racecheck of the
#      dropout workload (it runs the candidate) at fp16. ~2 minutes.
#   If a wins: the default for the 16-bit gelu forward (the fill with it re-measured),
#   shipped_kernels entries, then the gelu forward across N (bench/ab/pending_s39c.sh).
#   bash bench/ab/pending_s40.sh "$OUT" a|t
set -uo pipefail
OUT=${1:?usage: pending_s40.sh OUTDIR a|t}
PART=${2:?usage: pending_s40.sh OUTDIR a|t}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
case "$PART" in
a)
  for dt in float16 bfloat16; do
    timeout -k 5 150 python3 bench/tune_dropout.py --out "$OUT/a_$dt" --reps 30 --dtype "$dt" \
      --configs "shipped,ahead=2,ahead=2 fill=0,ahead=2 threads=512,shipped" \
      --acts gelu,none --cases fwd > "$OUT/a_$dt.log" 2>&1
    echo "tune $dt rc $?"; grep " call \|registers" "$OUT/a_$dt.log" | grep -v " p0 "
  done
  ;;
t)
  timeout -k 5 150 python3 -m pytest -q -p no:cacheprovider -n 8 tests/test_dropout.py \
    -m "not ptx" -k "two_rows_ahead or bad_launch" --timeout 120 > "$OUT/t_tests.log" 2>&1
  echo "tests rc $?"; tail -2 "$OUT/t_tests.log"; grep -E "^FAILED" "$OUT/t_tests.log" | head
  SAN_OPS="dropout:float16" SAN_TOOLS="memcheck racecheck" SAN_TIMEOUT=100 \
    timeout -k 10 230 bash bench/gpu_harness.sh "$OUT/san" --stages sanitize \
    > "$OUT/san.out" 2>&1
  echo "sanitize rc $?"; cat "$OUT/san/summary.md"
  ;;
*) echo "PART must be a or t" >&2; exit 2 ;;
esac
