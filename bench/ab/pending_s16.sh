#!/usr/bin/env bash
# Written in the fifteenth session for the next GPU session (one call of about 3
# minutes on an H100): confirm or refute the fwd_lean_regs candidate (float32 lean
# forward of two groups a thread, launch bounds capping ptxas at 40 registers; one
# A/B so far: N = 4096 183.8 / 184.3 -> 181.7 us, N = 2048 184.1 / 184.3 -> 182.8,
# and two groups alone at N = 2048 182.3), two passes of each variant:
#  1. float32 N = 1024 / 2048 / 4096: shipped, two groups, two groups capped;
#  2. its GPU test, then memcheck and racecheck on the float32 layer_norm workload
#     (bench/sanitize.py runs the capped kernels at N = 4096).
#   bash bench/ab/pending_s16.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: pending_s16.sh OUTDIR}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
nvidia-smi -L
W2='{"fwd_words": 2}'
CAP='{"fwd_words": 2, "fwd_lean_regs": 40}'
timeout -k 5 200 python3 bench/tune_layer_norm.py --out "$OUT/ln" --reps 50 \
  --ns 1024,2048,4096 --dtypes float32 \
  --tunes '{}' "$W2" "$CAP" '{}' "$W2" "$CAP" > "$OUT/ln_lean_regs_ab.log" 2>&1
echo "ln lean_regs rc $?"; grep '^|' "$OUT/ln_lean_regs_ab.log" | head -20
TESTS="tests/test_layer_norm.py" SAN_OPS="layer_norm:float32" \
  SAN_TOOLS="memcheck racecheck" SAN_TIMEOUT=170 \
  timeout -k 10 280 bash bench/gpu_harness.sh "$OUT/verify" --stages tests,sanitize --workers 14 \
  -k "lean_regs or lean or ptx"
