#!/usr/bin/env bash
# Seventy-second session: pending_s71.sh a passed on an H100 (test_layer_norm.py whole,
# the sanitizers on layer_norm_stats_block); c half did: LayerNorm, RMSNorm and linear
# kernels loaded in a second process (same bits), dropout's and attention's main
# kernels (the Philox ones) missed there and compiled again. What waits for the GPU:
#   d: bench/ab/cache_diag.py (any card, ~1 min): which of key, kernel or load differs
#      for those kernels between two processes; then the fix, then pending_s71.sh c
#      again (predicted: every kernel hits, first_call's warm column in milliseconds).
#   o: (an H200 only) pending_s70.sh o: v61's float32 RMSNorm A/B.
#   bash bench/ab/pending_s72.sh "$OUT" d|o
set -uo pipefail
OUT=${1:?"usage: pending_s72.sh OUTDIR d|o"}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
case "${2:?d|o}" in
  d)
    timeout -k 10 300 python3 bench/ab/cache_diag.py "$OUT" > "$OUT/cache_diag.log" 2>&1
    echo "cache_diag rc $?"; cut -c1-400 "$OUT/cache_diag.log" | head -120
    ;;
  o)
    bash bench/ab/pending_s70.sh "$OUT" o
    ;;
  *) echo "d or o" >&2; exit 2 ;;
esac
