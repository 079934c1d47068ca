#!/usr/bin/env bash
# Thirteenth session's last A/B call:
#  1. dropout fp16 16384 x 4096: where grad_bias's 9 us go on v5's 16 x 33 grid (without
#     grad_bias the same grid runs 99.9 us against 108.8 with it): v4's reduction kernel
#     on that grid (no arrival count, fence or last-block sum) against the shipped path;
#  2. the LayerNorm backward's back-to-back kernel timeline (row kernel and dW/dB
#     reduction apart, L2 as the previous kernel left it), ours against inductor, eager
#     and Liger.
#   bash bench/ab/ab_s13e.sh "$OUT"     (about 6 minutes on an H100; carry .whl)
set -uo pipefail
OUT=${1:?usage: ab_s13e.sh OUTDIR}
. bench/ab/liger_env.sh || echo "liger wheel not installed"
nvidia-smi -L
timeout -k 5 100 python3 bench/tune_dropout.py --out "$OUT/dr" --reps 30 --dtype float16 \
  --configs "shipped,v4 reduce kernel rows=504,rows=504,v4 reduce kernel,shipped" \
  > "$OUT/dropout_ab.log" 2>&1
echo "dropout rc $?"
timeout -k 5 270 python3 bench/ab/ln_timeline.py --out "$OUT/tl" --direction bwd \
  > "$OUT/timeline_bwd.log" 2>&1
echo "timeline rc $?"
rm -f "$OUT"/dr/*.md
grep "^| .* | none | bwd" "$OUT/dropout_ab.log"
grep -v "^{" "$OUT/timeline_bwd.log" | tail -22
