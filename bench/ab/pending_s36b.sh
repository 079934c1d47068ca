#!/usr/bin/env bash
# Written in the thirty-sixth session (an H200), after pending_s36.sh b: the v37
# candidate (tuning bwd_rms_sum1) won or tied at every RMSNorm backward cell but the
# 16-bit N = 1024, where it lost 5.6-7.6 us (113 -> 119 us; kernel 64 x 2, two rows of
# two warps a block, 122 registers against 127, both 4 blocks an SM).
#   n: ncu of that kernel, default and candidate (fp16, 65536 x 1024), to see what the
#      time goes to: stall reasons, issue rate, DRAM. ~2 minutes.
#   g: after v37 went default (bwd_rms_sum1 None: the one sum but at blocks of several
#      rows of several warps): the A/B at the rows pending_s36.sh b left out, N =
#      12288, 16384 (the lean kernel) and 65536 (streaming), fp16 / bf16 / float32,
#      pair against one sum, two passes. Prediction: even to 1 us faster (the lean and
#      streaming kernels reduce once a row of 1536-8192 groups; the step is a small
#      part). Then the GPU tests of the one-sum kernels and of the default's choice
#      (test_layer_norm.py -k "sum1 or row_sum2_same_bits", on 6 workers: alone they
#      ran past 150 s compiling). ~6 minutes.
#   bash bench/ab/pending_s36b.sh "$OUT" n|g
set -uo pipefail
OUT=${1:?usage: pending_s36b.sh OUTDIR n|g}
PART=${2:?usage: pending_s36b.sh OUTDIR n|g}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
case "$PART" in
n)
  . bench/ab/ncu_ln.sh
  ncu_norm_setup
  ncu_norm "$OUT/ncu36_rms_bwd_default.txt" 70 "$PAT" rms_bwd --dtype float16 \
    --shape 65536x1024 --provider numba
  ncu_norm "$OUT/ncu36_rms_bwd_sum1.txt" 70 "$PAT" rms_bwd --dtype float16 \
    --shape 65536x1024 --provider numba --tuning '{"bwd_rms_sum1": true}'
  ;;
g)
  export TL_DIR="$OUT/tl" && mkdir -p "$TL_DIR"
  . bench/ab/tl.sh
  for pass in 1 2; do
    tl "rms_big_$pass" 200 --reps 30 --op rms --ns 12288,16384,65536 \
      --dtypes float16,bfloat16,float32 --tunes '{"bwd_rms_sum1": false}' \
      '{"bwd_rms_sum1": true}' | tee -a "$OUT/g_rows.log"
  done
  timeout -k 5 330 python3 -m pytest -q -p no:cacheprovider -n 6 tests/test_layer_norm.py \
    -k "sum1 or row_sum2_same_bits" > "$OUT/g_tests.log" 2>&1
  echo "tests rc $?"; tail -5 "$OUT/g_tests.log"
  ;;
*) echo "PART must be n or g" >&2; exit 2 ;;
esac
