#!/usr/bin/env bash
# Forty-ninth session, the last of its device time (~6 minutes): two float32 backward
# plan choices that were last measured on the H100 and whose losing side holds w in at
# most 48 KB of dynamic shared memory (the v42 carveout penalty's class on the H200):
#   l: float32 8192 x 8192, the lean kernel (default, 96 KB) against the wide2 row
#      kernel (tuning bwd_lean_f32 False; H100 v15: 315 against 289 us). Float32
#      LayerNorm 8192 is one of the sweep's two backwards behind (225.0 against Liger's
#      222.6).
#   s: float32 1024 x 65536 (the other, 458.2 against eager's 455.3), the streaming
#      backward with its rows' statistics from a pass of their own (bwd_stats_pass
#      True; H100 v11: 0.527 -> 0.547, not taken).
# Each: default / tuned / default / tuned, a process each (affine_share's four passes).
#   bash bench/ab/pending_s49b.sh "$OUT" {l|s}
set -uo pipefail
OUT=${1:?"usage: pending_s49b.sh OUTDIR l|s"}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
ab() {  # ab TAG SHAPE TUNE
  timeout -k 5 100 python3 bench/ab/affine_share.py --dtypes float32 --shape "$2" \
    --tune "$3" > "$OUT/s49b_$1.txt" 2>&1
  echo "== $1 $2 $3 rc $?"; grep -E "^\| (ln|rms)" "$OUT/s49b_$1.txt"
}
case "${2:?l or s}" in
  l) shape=8192x8192; tuned='{"bwd_lean_f32": false}' ;;
  s) shape=1024x65536; tuned='{"bwd_stats_pass": true}' ;;
  *) echo "l or s" >&2; exit 2 ;;
esac
for i in 1 2; do
  ab "$2${i}_default" "$shape" '{}'
  ab "$2${i}_tuned" "$shape" "$tuned"
done
