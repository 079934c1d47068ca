#!/usr/bin/env bash
# The A/Bs waiting for a GPU (written 2026-11-26, eleventh session, which had no
# device time left; bench/NOTES.md says what each predicts). One call, ~9 minutes (split it at the ncu runs if it nears 10):
#   LayerNorm v10 (tuning bwd_wide) and v10b (bwd_wide2) against the shipped backward
#   at the rows they are for (float32 N = 4096 / 8192, 16-bit N = 8192) and beside them; dropout v4 (bias_reduce =
#   "kernel") against v3; ncu on the shipped dropout backward with grad_bias and on the
#   float32 LayerNorm backward at N = 4096 (the largest gaps of issue #16); LayerNorm
#   v11 (tuning bwd_stats_pass) against the shipped backward at N = 65536.
# Run from the repository root on the GPU machine: bash bench/ab/pending_ab.sh "$OUT"
# (after bench/ab/pending_verify.sh, so that the kernels timed are the ones tested).
set -uo pipefail
OUT=${1:?usage: pending_ab.sh OUTDIR}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
nvidia-smi -L
timeout -k 5 200 python3 bench/tune_layer_norm.py --out "$OUT/ln" --reps 30 \
  --ns 4096,8192 --dtypes float32 --tunes '{}' '{"bwd_wide": true}' '{"bwd_wide2": true}' \
  > "$OUT/ln_ab.log" 2>&1
echo "ln fp32 rc $?"
timeout -k 5 150 python3 bench/tune_layer_norm.py --out "$OUT/ln16" --reps 30 \
  --ns 4096,8192 --dtypes float16 --tunes '{}' '{"bwd_wide": true}' \
  '{"bwd_wide": true, "bwd_block": 1024}' > "$OUT/ln16_ab.log" 2>&1
echo "ln fp16 rc $?"
timeout -k 5 200 python3 bench/tune_layer_norm.py --out "$OUT/ln11" --reps 30 \
  --ns 65536 --dtypes float16,bfloat16,float32 --tunes '{}' '{"bwd_stats_pass": true}' \
  > "$OUT/ln11_ab.log" 2>&1
echo "ln v11 rc $?"
timeout -k 5 200 python3 bench/tune_dropout.py --out "$OUT/dr" --reps 30 \
  --configs "shipped,v4 reduce kernel,v4 reduce kernel rows=256" > "$OUT/dropout_ab.log" 2>&1
echo "dropout rc $?"
NCU=(ncu --nvtx --nvtx-include "prof/" --clock-control none --section SpeedOfLight
     --section Occupancy --section WarpStateStats --section LaunchStats
     --section MemoryWorkloadAnalysis --section SchedulerStats)
timeout -k 5 100 "${NCU[@]}" python3 bench/profile_op.py dropout_bwd --activation gelu \
  > "$OUT/ncu_dropout.txt" 2>&1
echo "ncu dropout rc $?"
timeout -k 5 100 "${NCU[@]}" python3 bench/profile_op.py ln_bwd --dtype float32 \
  > "$OUT/ncu_ln.txt" 2>&1
echo "ncu ln rc $?"
rm -f "$OUT"/ln*/*.md "$OUT"/ln16/*.json "$OUT"/dr/*.md "$OUT"/dr/*.json
tail -9 "$OUT/ln_ab.log"; tail -9 "$OUT/ln16_ab.log"; tail -9 "$OUT/ln11_ab.log"
tail -30 "$OUT/dropout_ab.log"
