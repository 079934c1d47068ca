#!/usr/bin/env bash
# Written in the thirty-seventh session for the next (an H200): dropout v13 candidate,
# LaunchConfig.stages (opt-in): the 16-bit vector forward reads its rows through a
# cp.async ring of 2-4 shared slots, 1-3 rows in flight a thread at 32 registers.
# Why: v11 (fewer instructions) and v12 (one row staged a whole iteration ahead) left
# the 16-bit gelu forward at 86 us, with 40% of its stall samples on the loaded row's
# first use; by Little's law a load takes ~2.7 us at 16 bytes in flight a warp, so
# the lever left is bytes in flight, which unroll 2 bought with registers (64, 4 blocks
# an SM: slower) and the ring buys with shared memory (bench/notes_dropout.md v12).
#   a: tune_dropout.py at 16384 x 4096, fp16 and bf16, configs shipped / stages=2 /
#      stages=3 / stages=4 / shipped, activations gelu and none (forward and backward:
#      the knob stages both passes, the backward at 48 registers against 93-96).
#      Prediction: gelu fwd 86 -> 74-78 us at stages 3 or 4 (2-3 rows in flight, twice
#      to three times v12's bytes); 'none' fwd 72 -> 66-70 (stages 3: 64 warps x 2 rows
#      against unroll 2's 32 x 2); stages 2 even with shipped (v12's form); 'none' bwd
#      76 -> 72-74; gelu bwd within 2 us of 110. ~4 minutes.
#   t: the staged GPU tests (`-k "staged or identical_across or bad_launch"`) and
#      memcheck / racecheck of a staged forward workload. ~3 minutes.
#   If a wins: the default stages per pass and activation (a `_default_stages`, the
#   shipped_kernels entries, the sweep `bench/dropout.py` at 16-bit for RESULTS.md).
#   bash bench/ab/pending_s38.sh "$OUT" a|t
set -uo pipefail
OUT=${1:?usage: pending_s38.sh OUTDIR a|t}
PART=${2:?usage: pending_s38.sh OUTDIR a|t}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
case "$PART" in
a)
  for dt in float16 bfloat16; do
    timeout -k 5 150 python3 bench/tune_dropout.py --out "$OUT/td_$dt" --reps 30 --dtype "$dt" \
      --configs shipped,stages=2,stages=3,stages=4,shipped --acts gelu,none \
      > "$OUT/td_$dt.log" 2>&1
    echo "tune $dt rc $?"; grep " call " "$OUT/td_$dt.log" | grep -v " p0 "
  done
  ;;
t)
  timeout -k 5 200 python3 -m pytest -q -p no:cacheprovider -n 14 tests/test_dropout.py \
    -m "not ptx" -k "staged or identical_across or bad_launch" --timeout 150 \
    > "$OUT/t_tests.log" 2>&1
  echo "tests rc $?"; tail -3 "$OUT/t_tests.log"; grep -E "^FAILED" "$OUT/t_tests.log" | head
  SAN_OPS="dropout_staged:float16 dropout_staged:bfloat16" SAN_TOOLS="memcheck racecheck" \
    SAN_TIMEOUT=120 timeout -k 10 140 bash bench/gpu_harness.sh "$OUT/san" --stages sanitize \
    > "$OUT/san.out" 2>&1
  echo "sanitize rc $?"; cat "$OUT/san/summary.md"
  ;;
*) echo "PART must be a or t" >&2; exit 2 ;;
esac
