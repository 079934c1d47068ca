#!/usr/bin/env bash
# Written in the fifteenth session for the next GPU session (one call of about 6
# minutes on an H100), two opt-in candidates, each variant run twice:
#  1. fwd_lean_regs (float32 lean forward of two groups, launch bounds capping ptxas at
#     40 registers; one A/B so far: N = 4096 183.8 / 184.3 -> 181.7 us, N = 2048 ->
#     182.8): shipped, two groups, two groups capped at N = 1024 / 2048 / 4096;
#  2. v13 bwd_lean (16-bit backward past the row kernels: raw words in registers, w and
#     dW/dB in shared memory, two groups x up to 1024 threads; predicted N = 12288 /
#     16384 0.24 -> ~0.16 ms): shipped, lean, lean without its prefetch, at N = 12288 /
#     16384, and at 8192 (bwd_lean_min 0) against the v12 row kernel;
#  3. their GPU tests, then memcheck and racecheck on the layer_norm workloads
#     (bench/sanitize.py runs both candidates).
#   bash bench/ab/pending_s16.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: pending_s16.sh OUTDIR}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
nvidia-smi -L
W2='{"fwd_words": 2}'
CAP='{"fwd_words": 2, "fwd_lean_regs": 40}'
timeout -k 5 150 python3 bench/tune_layer_norm.py --out "$OUT/ln_regs" --reps 50 \
  --ns 1024,2048,4096 --dtypes float32 \
  --tunes '{}' "$W2" "$CAP" '{}' "$W2" "$CAP" > "$OUT/ln_lean_regs_ab.log" 2>&1
echo "ln lean_regs rc $?"; grep '^|' "$OUT/ln_lean_regs_ab.log" | head -20
LEAN='{"bwd_lean": true}'
NOPF='{"bwd_lean": true, "bwd_lean_prefetch": false}'
timeout -k 5 150 python3 bench/tune_layer_norm.py --out "$OUT/ln_lean" --reps 30 \
  --ns 12288,16384 --dtypes float16,bfloat16 \
  --tunes '{}' "$LEAN" "$NOPF" '{}' "$LEAN" "$NOPF" > "$OUT/ln_lean_bwd_ab.log" 2>&1
echo "ln lean bwd rc $?"; grep '^|' "$OUT/ln_lean_bwd_ab.log" | head -28
timeout -k 5 60 python3 bench/tune_layer_norm.py --out "$OUT/ln_lean8k" --reps 30 \
  --ns 8192 --dtypes float16 \
  --tunes '{}' '{"bwd_lean": true, "bwd_lean_min": 0}' '{}' > "$OUT/ln_lean_8k_ab.log" 2>&1
echo "ln lean 8192 rc $?"; grep '^|' "$OUT/ln_lean_8k_ab.log" | head -6
TESTS="tests/test_layer_norm.py" SAN_OPS="layer_norm:float16 layer_norm:float32" \
  SAN_TOOLS="memcheck racecheck" SAN_TIMEOUT=170 \
  timeout -k 10 240 bash bench/gpu_harness.sh "$OUT/verify" --stages tests,sanitize --workers 14 \
  -k "lean_regs or lean_backward"
