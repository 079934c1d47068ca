#!/usr/bin/env bash
# Twelfth session, second A/B: where the LayerNorm forward's last 1-3% against inductor
# goes (every 16-bit forward below N = 65536 is 0.095-0.096 ms against 0.093-0.094 on
# the H100). Variants of the lean forward: groups a thread (fwd_words 2: 16 elements a
# thread as inductor's 256-thread rows at N = 4096), row slots a block (fwd_block 128 /
# 512), persistent blocks. bench/notes_layer_norm.md says what each predicts.
#   bash bench/ab/ab_s12_fwd.sh "$OUT"     (about 2 minutes on an H100)
set -uo pipefail
OUT=${1:?usage: ab_s12_fwd.sh OUTDIR}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
nvidia-smi -L
timeout -k 5 280 python3 bench/tune_layer_norm.py --out "$OUT/f16" --reps 30 \
  --ns 1024,4096,8192 --dtypes float16 --tunes '{}' '{"fwd_words": 2}' \
  '{"fwd_block": 128}' '{"fwd_block": 512}' '{"fwd_lean_persistent": true}' '{}' \
  > "$OUT/fwd16_ab.log" 2>&1
echo "fwd fp16 rc $?"
timeout -k 5 200 python3 bench/tune_layer_norm.py --out "$OUT/f32" --reps 30 \
  --ns 4096,16384 --dtypes float32 --tunes '{}' '{"fwd_words": 2}' '{"fwd_block": 512}' \
  '{"fwd_lean_persistent": true}' '{}' > "$OUT/fwd32_ab.log" 2>&1
echo "fwd fp32 rc $?"
rm -f "$OUT"/f16/*.md "$OUT"/f32/*.md
tail -20 "$OUT/fwd16_ab.log"; tail -12 "$OUT/fwd32_ab.log"
