#!/usr/bin/env bash
# Written in the twenty-seventh session for the next (an H200; on an H100 the numbers
# are a guide only). About 2-3 minutes a part:
#   a: dropout v10's 16-bit backward grid (one wave of real resident blocks with a
#      bias grad, two without) regressed two sweep cells against v8's nominal plan:
#      gelu bwd N = 12288 110.6 -> 115.6 us (48 column strips x 5 row blocks = 240 of
#      264 slots at 2 blocks an SM; the nominal plan's 11 row blocks were exactly two
#      waves) and 'none' bwd N = 5120 76.5 -> 80.1 (20 strips x 13 = 260 of 264, so
#      not the slots). tune_dropout at those shapes and at 16384 x 4096 (the
#      control): shipped, the nominal plan (fill=0), two waves, one wave with the
#      last block's loads in 4s. Predicted: fill=0 or fill=2 back to ~110.6 at
#      12288 gelu; at 5120 'none' unknown (the slots do not explain it).
#   b: ncu of the 16-bit gelu forward (86 us against 72 for 'none'; 27.9 SASS
#      instructions an element, ptxas 32 registers): is it issue-bound (the
#      scheduler statistics) or short of bytes in flight (one row a batch: 16 bytes a
#      thread)? Against gelu_tanh (21.8 instructions, 76 us) and 'none'.
#   c: LayerNorm v32 candidate, tuning bwd_red_direct (written CPU-only): one-row
#      backward kernels of 4 / 8 / 16 warps a row add the warps' partials of the
#      row's two sums from shared memory (broadcast 16-byte loads, warp_sum's add
#      order, same bits) instead of a second round of shuffles. SASS of the fp16
#      LayerNorm N = 4096 row kernel (8 warps): 325 -> 303 instructions a row, SHFL
#      20 -> 10, LDS 2 + 4 LDS.128 -> 8 LDS.128, 128 registers either way, no spills;
#      MIO ops a warp and row 28 -> 20. First its GPU test and memcheck / racecheck,
#      then the A/B at the layouts it reaches (16-bit N = 4096: 8 warps, 8192: 16;
#      float32 4096: 16). Predicted: 1-4 us off the 16-bit backward at 4096 (0.1190
#      ms, target 0.1115), less at 8192.
#   bash bench/ab/pending_s28.sh "$OUT" a|b|c
set -uo pipefail
OUT=${1:?usage: pending_s28.sh OUTDIR a|b|c}
PART=${2:?usage: pending_s28.sh OUTDIR a|b|c}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
case "$PART" in
a)
  C="shipped,fill=0,fill=2,fill=1 step=4,shipped"
  for shape in 5461x12288 13107x5120 16384x4096; do
    mkdir -p "$OUT/td_$shape"
    timeout -k 5 100 python3 bench/tune_dropout.py --out "$OUT/td_$shape" --reps 30 \
      --dtype float16 --shape "$shape" --configs "$C" > "$OUT/td_$shape/log.txt" 2>&1
    echo "tune_dropout fp16 $shape rc $?"
    grep " call " "$OUT/td_$shape/log.txt" | grep -v " p0 "
  done
  ;;
b)
  NCU=(ncu --nvtx --nvtx-include "prof/" --clock-control none --cache-control none
       --section SpeedOfLight --section Occupancy --section WarpStateStats
       --section LaunchStats --section SchedulerStats --section MemoryWorkloadAnalysis)
  PAT="^  [a-z_]+.*\(|Duration|Registers Per|Block Size|Grid Size|Achieved Occupancy|Warp Cycles Per Issued|Issued Warp Per|No Eligible|Stall|Waves Per SM|Memory Throughput|DRAM Throughput"
  for act in gelu gelu_tanh none; do
    f="$OUT/ncu28_fwd_$act.txt"
    timeout -k 5 85 "${NCU[@]}" python3 bench/profile_op.py dropout_fwd --shape 16384x4096 \
      --dtype float16 --activation "$act" > "$f" 2>&1
    echo "== ncu fwd $act rc $?"
    grep -E "$PAT" "$f" | head -40
  done
  ;;
c)
  . bench/ab/tl.sh
  ab_verify pending_s28_c 220 "direct_cross_warp or one_row" layer_norm_bwd
  R='{"bwd_red_direct": true}'
  tl c_ln16 120 --reps 30 --op ln --ns 4096,8192 --dtypes float16,bfloat16 --tunes '{}' "$R" '{}' "$R"
  tl c_rms16 60 --reps 30 --op rms --ns 4096,8192 --dtypes float16 --tunes '{}' "$R" '{}' "$R"
  tl c_ln32 60 --reps 30 --op ln --ns 4096 --dtypes float32 --tunes '{}' "$R" '{}' "$R"
  tar czf "$OUT/pending_s28_c_tl.tgz" -C "$TL_DIR" .
  ;;
*) echo "PART must be a, b or c" >&2; exit 2 ;;
esac
