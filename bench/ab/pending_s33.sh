#!/usr/bin/env bash
# Written in the thirty-second session for the next (an H200). Each part fits one call:
#   a: tuning bwd_pdl's GPU checks: test_layer_norm.py -k "bwd_pdl or bwd_min_blocks" (bits over
#      back-to-back calls at every dtype, now with the lean kernels' trigger at
#      float32 N = 8192 and 16-bit N = 16384; the CUDA-graph capture through the torch
#      front end, i.e. the prepared launch path of a dependent kernel), then memcheck
#      / racecheck of sanitize.py's layer_norm_pdl workload. ~4 minutes.
#   b: the A/B default / bwd_pdl (two alternating passes) at the backward cells not yet
#      timed: bf16 4096, fp16 1024 / 16384 (lean), RMSNorm fp16 4096, float32
#      LayerNorm 8192 (lean, behind Liger by 2.0 us in the v33 sweep) and RMSNorm 768
#      / 4096 (behind by 1.1-1.2). ~4 minutes.
#   c: two candidates for the 16-bit LayerNorm backward (0.115 ms under bwd_pdl against
#      the 0.112 target), each on top of bwd_pdl: (1) the dW / dB reduction's loads
#      in one round, dwdb_unroll 16 (or 8) at its shipped 2 blocks an SM (32
#      registers, no spills; the fourteenth session's +1.1 us at 16 was measured at
#      one block an SM, 1.94 waves); (2) the row kernel without the prefetch under
#      bounds for 3 blocks an SM (bwd_min_blocks 3: 80 registers, no spills, against
#      2 blocks of 125-128; 396 partial rows instead of 264). ~4 minutes.
#   d: the float32 LayerNorm forward at N = 4096 (ours 134 us, inductor 129): ncu in
#      the thirty-second session read 40 warps an SM against inductor's 64, with the
#      same stall profile, so more bytes or warps in flight an SM: the plain kernel at
#      6 blocks an SM (40 registers, 12 bytes spilled), at 8 words a thread, 128
#      threads, 8 blocks an SM (64 registers, no spills: 128 KB of loads in flight an
#      SM against 80 KB). (2 words at 512 threads takes w / b early in
#      fwd_plain_layout, refuted at 4 blocks in the thirtieth session.) ~2 minutes.
#   If a and b hold, set bwd_pdl's default to True, then GPU suite parts 1 and 3
#   (bench/ab/full_suite.sh OUT 1 / 3) and the norms sweep (bench/ab/norms_sweep.sh).
#   bash bench/ab/pending_s33.sh "$OUT" a|b|c|d
set -uo pipefail
OUT=${1:?usage: pending_s33.sh OUTDIR a|b|c|d}
PART=${2:?usage: pending_s33.sh OUTDIR a|b|c|d}
. bench/ab/tl.sh
P='{"bwd_pdl": true}'
case "$PART" in
a)
  timeout -k 5 260 python3 -m pytest -q -p no:cacheprovider -n 6 tests/test_layer_norm.py \
    -k "bwd_pdl or bwd_min_blocks" > "$OUT/pdl_tests.log" 2>&1
  echo "tests rc $?"; tail -4 "$OUT/pdl_tests.log"
  for tool in memcheck racecheck; do
    timeout -k 5 120 compute-sanitizer --tool "$tool" --report-api-errors no python3 \
      bench/sanitize.py layer_norm_pdl:float16 layer_norm_pdl:float32 \
      > "$OUT/san_$tool.log" 2>&1
    echo "$tool rc $?"; grep -E "ran|FAILED|SUMMARY" "$OUT/san_$tool.log"
  done
  ;;
b)
  tl ln16 100 --reps 30 --op ln --ns 1024,16384 --dtypes float16 --tunes '{}' "$P" '{}' "$P"
  tl lnbf 50 --reps 30 --op ln --ns 4096 --dtypes bfloat16 --tunes '{}' "$P" '{}' "$P"
  tl rms16 50 --reps 30 --op rms --ns 4096 --dtypes float16 --tunes '{}' "$P" '{}' "$P"
  tl ln32 60 --reps 30 --op ln --ns 8192 --dtypes float32 --tunes '{}' "$P" '{}' "$P"
  tl rms32 80 --reps 30 --op rms --ns 768,4096 --dtypes float32 --tunes '{}' "$P" '{}' "$P"
  cp "$TL_DIR"/*.log "$OUT/"
  ;;
c)
  U16='{"bwd_pdl": true, "dwdb_unroll": 16}'
  U8='{"bwd_pdl": true, "dwdb_unroll": 8}'
  M3='{"bwd_pdl": true, "prefetch": false, "bwd_min_blocks": 3}'
  tl unroll 110 --reps 30 --op ln --ns 4096,8192 --dtypes float16 \
    --tunes "$P" "$U16" "$U8" "$P" "$U16" "$U8"
  tl mb3 110 --reps 30 --op ln --ns 4096 --dtypes float16,bfloat16 \
    --tunes "$P" "$M3" "$P" "$M3"
  tl mb3rms 60 --reps 30 --op rms --ns 4096 --dtypes float16 --tunes "$P" "$M3" "$P" "$M3"
  cp "$TL_DIR"/*.log "$OUT/"
  ;;
d)
  B6='{"fwd_plain_min_blocks": 6}'
  W8='{"fwd_plain_layout": [8, 1], "fwd_plain_min_blocks": 8}'
  tl f32fwd 100 --reps 30 --op ln --ns 4096 --dtypes float32 \
    --tunes '{}' "$B6" "$W8" '{}' "$B6" "$W8"
  cp "$TL_DIR"/*.log "$OUT/"
  ;;
*) echo "PART must be a, b, c or d" >&2; exit 2 ;;
esac
