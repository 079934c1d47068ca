#!/usr/bin/env bash
# Written in the thirty-third session for the next (an H200). Each part fits one call:
#   a: the backward's row balance. The persistent row kernels take rows b, b + grid, ...
#      (static), so at M = 16384 and a grid of 264 (2 blocks an SM) 16 blocks take 63
#      rows and 248 take 62: the last ~1/62 of the kernel runs on 16 SMs. A grid that
#      divides M (256 x 64 rows; at 1 block an SM, 128 x 64 instead of 132 x 62-63)
#      ends every block together, on fewer blocks. Prediction: if the row kernels are
#      DRAM-bound as a whole, the balanced grid gains about half a row's time (16-bit
#      N = 4096: ~0.9 us of its 1.8 us a row; float32 N = 8192 lean: ~1.8 of 3.7);
#      if each SM is its own bound (the 16-bit kernel is MIO-bound, ncu), it loses
#      1-2.5 row times. Cells: fp16 / bf16 LayerNorm 4096 (264 -> 256) and 8192 (132
#      -> 128), fp16 RMSNorm 4096, float32 LayerNorm 4096 (wide, 264 -> 256), 8192
#      (lean, 132 -> 128, behind Liger) and float32 RMSNorm 4096 (264 -> 256, behind
#      inductor by 1.4 us). Default and balanced alternate twice. ~5 minutes.
#   b: the norms sweep at v35 (bwd_pdl on), for RESULTS.md: bench/ab/norms_sweep.sh
#      (~8 minutes; carry .whl).
#   c: the bwd_stages candidate (written on the CPU in the thirty-third session): the
#      row kernels read x and dy from a cp.async ring of 2-4 row buffers in shared
#      memory instead of the register prefetch (one row ahead). The 16-bit row kernel
#      at N = 4096 holds 32 KB of loads in flight an SM at 2 blocks; 3 buffers hold 64
#      KB (123 registers, no spills; ptxas). First its GPU bits test and memcheck /
#      racecheck of sanitize.py's layer_norm_stages, then the A/B (default, stages
#      2 / 3 / 4, alternating) at fp16 / bf16 LayerNorm 4096 and 8192 and RMSNorm
#      4096 (float32 rows of two groups are wide kernels: no ring). Prediction: 2-5
#      us off the 16-bit 4096 backward (115.7 -> ~111-113) if bytes in flight bound
#      it, nothing if the MIO-bound row loop does. ~7 minutes.
#   bash bench/ab/pending_s34.sh "$OUT" a|b|c
set -uo pipefail
OUT=${1:?usage: pending_s34.sh OUTDIR a|b|c}
PART=${2:?usage: pending_s34.sh OUTDIR a|b|c}
case "$PART" in
a)
  . bench/ab/tl.sh
  G256='{"bwd_grid": 256}'
  G128='{"bwd_grid": 128}'
  tl ln16 80 --reps 30 --op ln --ns 4096 --dtypes float16,bfloat16 \
    --tunes '{}' "$G256" '{}' "$G256"
  tl ln16w 80 --reps 30 --op ln --ns 8192 --dtypes float16,bfloat16 \
    --tunes '{}' "$G128" '{}' "$G128"
  tl rms16 45 --reps 30 --op rms --ns 4096 --dtypes float16 --tunes '{}' "$G256" '{}' "$G256"
  tl ln32 60 --reps 30 --op ln --ns 4096 --dtypes float32 --tunes '{}' "$G256" '{}' "$G256"
  tl ln32w 60 --reps 30 --op ln --ns 8192 --dtypes float32 --tunes '{}' "$G128" '{}' "$G128"
  tl rms32 60 --reps 30 --op rms --ns 4096 --dtypes float32 --tunes '{}' "$G256" '{}' "$G256"
  cp "$TL_DIR"/*.log "$OUT/"
  ;;
b)
  bash bench/ab/norms_sweep.sh "$OUT" h200_s34_v35
  ;;
c)
  . bench/ab/tl.sh
  ab_verify stages_verify 300 "bwd_stages" "layer_norm_stages:float16 layer_norm_stages:float32"
  S2='{"bwd_stages": 2}'
  S3='{"bwd_stages": 3}'
  S4='{"bwd_stages": 4}'
  tl st16 110 --reps 30 --op ln --ns 4096,8192 --dtypes float16,bfloat16 \
    --tunes '{}' "$S2" "$S3" "$S4" '{}' "$S3"
  tl strms 60 --reps 30 --op rms --ns 4096 --dtypes float16,bfloat16 \
    --tunes '{}' "$S2" "$S3" "$S4" '{}' "$S3"
  cp "$TL_DIR"/*.log "$OUT/"
  ;;
*) echo "PART must be a, b or c" >&2; exit 2 ;;
esac
