#!/usr/bin/env bash
# Written in the thirty-sixth session for the next (an H200), after v37 went default
# (tuning bwd_rms_sum1 None: RMSNorm's backward reduces its one row sum but at blocks of
# several rows of several warps; bench/NOTES.md).
#   t: the RMSNorm GPU tests under v37's default (test_layer_norm.py -k rms, not the
#      PTX ones; 14 workers, ~3.5 minutes). In the thirty-sixth session 161 passed and
#      15 failed, all on kernel-name assertions that did not expect the _s1 suffix
#      (results/s36_ab/rms_gpu_tests_before_name_fix.log); the tests were fixed on the
#      CPU after the device time ran out. Prediction: 176 passed.
#   c: the norms sweep at v37, Liger included (carry .whl; ~8 minutes): RESULTS.md's
#      table and plots, LayerNorm's rows unchanged from v36 within the runs' spread.
#   b: bwd_block 64 (one row a block where rows take two warps: 16-bit N = 1024, float32
#      512; one-warp rows two a block for four: 16-bit 512) against the default 128
#      (two two-warp rows a block; N = 768's 96 threads are one row either way),
#      backward A/B in one process, RMSNorm two passes, LayerNorm one. Why: v37 keeps
#      the pair's step at two-warp rows two a block (the one sum lost 6-7.6 us there:
#      the shorter step hid less of the next row's loads); one row a block takes the
#      one-row kernel and the one sum. Prediction: RMSNorm 16-bit 1024 within 1 us
#      either way of 112-113 (the same threads an SM, 8 blocks of 64 for 4 of 128;
#      v20's 256 -> 128 gained 2-10 us on the H100 by the same move); float32 512 and
#      16-bit 512 even; LayerNorm even. ~3 minutes.
#   bash bench/ab/pending_s37.sh "$OUT" t|b|c
set -uo pipefail
OUT=${1:?usage: pending_s37.sh OUTDIR t|b|c}
PART=${2:?usage: pending_s37.sh OUTDIR t|b|c}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
case "$PART" in
t)
  timeout -k 5 280 python3 -m pytest -q -p no:cacheprovider -n 14 tests/test_layer_norm.py \
    -m "not ptx" -k rms --timeout 200 > "$OUT/t_tests.log" 2>&1
  echo "tests rc $?"; tail -4 "$OUT/t_tests.log"; grep -E "^FAILED" "$OUT/t_tests.log" | head -20
  ;;
b)
  export TL_DIR="$OUT/tl" && mkdir -p "$TL_DIR"
  . bench/ab/tl.sh
  for pass in 1 2; do
    tl "rms_blk_$pass" 150 --reps 30 --op rms --ns 512,768,1024 \
      --dtypes float16,bfloat16,float32 --tunes '{}' '{"bwd_block": 64}' \
      | tee -a "$OUT/b_rows.log"
  done
  tl ln_blk 150 --reps 30 --op ln --ns 512,768,1024 --dtypes float16,bfloat16,float32 \
    --tunes '{}' '{"bwd_block": 64}' | tee -a "$OUT/b_rows.log"
  ;;
c)
  bash bench/ab/norms_sweep.sh "$OUT" h200_s37_v37
  ;;
*) echo "PART must be t, b or c" >&2; exit 2 ;;
esac
