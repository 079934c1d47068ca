#!/usr/bin/env bash
# Seventy-fifth session: the H200 work of pending_s74.sh h is still owed; the kernel
# cache's command line and `_resolve` / `_scan` (72db5f0 onwards) ran in the simulator
# only.
#   a: (any card, ~9 min on an H200, ~2 min otherwise) tests/test_kernel_cache.py with
#      nothing set (predicted: 17 passed, as at 3d35ead), then `python -m
#      numba_fused.kernel_cache` on the default directory; then, on an H200 only,
#      pending_s74.sh h (v61's float32 RMSNorm A/B with statistics, the RMSNorm
#      forward sweep).
#   bash bench/ab/pending_s75.sh "$OUT" a
set -uo pipefail
OUT=${1:?"usage: pending_s75.sh OUTDIR a"}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
case "${2:?a}" in
  a)
    card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
    echo "card: $card"
    unset NUMBA_FUSED_CACHE_DIR NUMBA_FUSED_DISABLE_CACHE
    timeout -k 10 240 python3 -m pytest -q -p no:cacheprovider -rfEs tests/test_kernel_cache.py \
      > "$OUT/kernel_cache_tests.log" 2>&1
    echo "kernel_cache tests rc $?"; tail -3 "$OUT/kernel_cache_tests.log"
    timeout -k 10 60 python3 -m numba_fused.kernel_cache; echo "cli rc $?"
    case "$card" in
      *H200*) bash bench/ab/pending_s74.sh "$OUT" h ;;
      *) echo "not an H200: pending_s74.sh h not run" ;;
    esac
    ;;
  *) echo "a" >&2; exit 2 ;;
esac
