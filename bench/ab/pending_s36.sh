#!/usr/bin/env bash
# Written in the thirty-fifth session for the next (an H200): the v37 candidate,
# tuning bwd_rms_sum1 (RMSNorm's backward kernels reduce its one row sum, _row_sum1 /
# _row_sum2_direct(nw, rms=True), instead of LayerNorm's pair whose second they
# dropped; bench/NOTES.md). Opt-in: every part compares it with the default in this
# one tree.
#   d: output digests at every sweep row length and dtype (bits_dump.py), default and
#      candidate, both with the backward grid fixed at 264 (the two forms' registers
#      differ, and the deterministic dW's grouping follows the grid); the two dumps
#      side by side, then compared. Prediction: all 300 identical. ~4 minutes.
#   b: the A/B of the RMSNorm backward, default / candidate at each (N, dtype) in one
#      process (tune_layer_norm.py --tunes), N = 512 .. 8192, fp16 / bf16 / float32,
#      two passes. Prediction: 16-bit 1-3 us faster at N = 512-5120 where the row
#      step shuffles (the 4096 / 8192 direct-step kernels even: their second sum was
#      dead code already), float32 within 1 us (some of its kernels take more
#      registers). Then one pass of the 16-bit LayerNorm backward at N = 2048, 4096,
#      8192 with the lean kernel (tuning bwd_lean_min 0: w and dW / dB in shared
#      memory, 64 registers, so 4 blocks of 256 an SM at 4096 where the row kernel's
#      128 registers hold 2; never timed below N = 8192). Prediction: if the row
#      kernel's barrier wait (ncu, thirty-fifth session: 38% of issue gaps at 16 warps
#      an SM) bounds 4096, the lean kernel's 32 warps take 2-5 us off; if its shared
#      w / dW / dB traffic costs more, it loses as at 8192 on the H100 (+6%). ~9 minutes.
#   a: memcheck / racecheck of sanitize.py's layer_norm_rms_sum1 (the candidate's
#      kernels: row kernels at N = 512 and 4096 both cross-warp steps, lean at 16384,
#      streaming with the statistics pass), then its GPU tests. ~7 minutes.
#   c: if b wins: make it the default first, then the norms sweep (carry .whl).
#   f: memcheck / racecheck of sanitize.py's fp16 layer_norm workload (the forwards,
#      every layout) alone: with three other jobs on the GPU it ran past 330 s in the
#      thirty-fifth session. ~6 minutes.
#   bash bench/ab/pending_s36.sh "$OUT" d|b|a|c|f
set -uo pipefail
OUT=${1:?usage: pending_s36.sh OUTDIR d|b|a|c|f}
PART=${2:?usage: pending_s36.sh OUTDIR d|b|a|c|f}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
case "$PART" in
d)
  timeout -k 5 280 python3 bench/ab/bits_dump.py --out "$OUT/bits_default.json" \
    --tune '{"bwd_grid": 264}' > "$OUT/bits_default.log" 2>&1 &
  timeout -k 5 280 python3 bench/ab/bits_dump.py --out "$OUT/bits_sum1.json" \
    --tune '{"bwd_grid": 264, "bwd_rms_sum1": true}' > "$OUT/bits_sum1.log" 2>&1 &
  wait
  python3 bench/ab/bits_dump.py --compare "$OUT/bits_default.json" "$OUT/bits_sum1.json"
  ;;
b)
  # 42 rows a pass, more than tl prints: the whole logs come back under $OUT/tl.
  export TL_DIR="$OUT/tl" && mkdir -p "$TL_DIR"
  . bench/ab/tl.sh
  for pass in $(seq 1 "${PASSES:-2}"); do
    tl "rms_$pass" 290 --reps 30 --op rms --ns 512,768,1024,2048,4096,5120,8192 \
      --dtypes float16,bfloat16,float32 --tunes '{}' '{"bwd_rms_sum1": true}' \
      | tee -a "$OUT/b_rows.log"
  done
  tl ln_lean 150 --reps 30 --op ln --ns 2048,4096,8192 --dtypes float16,bfloat16 \
    --tunes '{}' '{"bwd_lean_min": 0}' | tee -a "$OUT/b_rows.log"
  ;;
a)
  SAN_OPS="layer_norm_rms_sum1:float16 layer_norm_rms_sum1:float32" \
    SAN_TOOLS="memcheck racecheck" SAN_TIMEOUT=250 timeout -k 10 270 bash bench/gpu_harness.sh \
    "$OUT/san" --stages sanitize > "$OUT/san.out" 2>&1
  echo "sanitize rc $?"; cat "$OUT/san/summary.md"
  timeout -k 5 150 python3 -m pytest -q -p no:cacheprovider tests/test_layer_norm.py \
    -k "rms_sum1 or row_sum2_same_bits" > "$OUT/a_tests.log" 2>&1
  echo "tests rc $?"; tail -3 "$OUT/a_tests.log"
  ;;
c)
  bash bench/ab/norms_sweep.sh "$OUT" h200_s36_v37
  ;;
f)
  SAN_OPS="layer_norm:float16" SAN_TOOLS="memcheck racecheck" SAN_TIMEOUT=330 \
    timeout -k 10 350 bash bench/gpu_harness.sh "$OUT/san_f" --stages sanitize \
    > "$OUT/san_f.out" 2>&1
  echo "sanitize rc $?"; cat "$OUT/san_f/summary.md"
  ;;
*) echo "PART must be d, b, a, c or f" >&2; exit 2 ;;
esac
