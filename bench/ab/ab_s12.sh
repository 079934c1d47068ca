#!/usr/bin/env bash
# Twelfth session's A/Bs (bench/NOTES.md, "Twelfth session"): LayerNorm v10b
# (bwd_wide2) at float32 N = 5120 as well as 8192, and v10c (bwd_wide2_min = 512:
# float32 N = 4096 as 512 threads of two groups, two rows an SM) with one and two row
# slots a block; the shipped backward first and last (the run-to-run spread);
# the float32 dropout's launch configurations (the sweep's only losing cells).
#   bash bench/ab/ab_s12.sh "$OUT"     (about 3 minutes on an H100)
set -uo pipefail
OUT=${1:?usage: ab_s12.sh OUTDIR [dropout]}
ONLY=${2:-}
AB_DTYPE=${AB_DTYPE:-float32}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
nvidia-smi -L
[ -z "$ONLY" ] && timeout -k 5 240 python3 bench/tune_layer_norm.py --out "$OUT/ln" --reps 30 \
  --ns 4096,5120,8192 --dtypes float32 --tunes '{}' '{"bwd_wide2": true}' \
  '{"bwd_wide2": true, "bwd_wide2_min": 512}' \
  '{"bwd_wide2": true, "bwd_wide2_min": 512, "bwd_block": 1024}' '{}' \
  > "$OUT/ln_ab.log" 2>&1
echo "ln fp32 rc $?"
timeout -k 5 240 python3 bench/tune_dropout.py --out "$OUT/dr" --reps 30 --dtype "$AB_DTYPE" \
  --configs "shipped,unroll=2,unroll=4,threads=128,threads=512,threads=1024,threads=512 unroll=2,threads=128 unroll=2,threads=1024 unroll=2,rows=256" \
  > "$OUT/dropout_ab.log" 2>&1
echo "dropout rc $?"
rm -f "$OUT"/ln/*.md "$OUT"/dr/*.md
[ -z "$ONLY" ] && tail -17 "$OUT/ln_ab.log"
tail -60 "$OUT/dropout_ab.log"
# Second call: the same launch configurations at float16 (the shipped default was
# tuned there at 256 threads and one row a batch):
#   AB_DTYPE=float16 bash bench/ab/ab_s12.sh "$OUT" dropout
