#!/usr/bin/env bash
# Seventy-third session: k ran once on an H100 (cut by the budget in c's op tests);
# cache_diag found the keys moving (numba.types against numba.core.types), fixed in
# kernel_cache._module_name. What waits for the GPU:
#   k: (any card, ~6 min) bench/ab/cache_diag.py, then pending_s71.sh c: predicted,
#      every key the same in both processes, first_call 11 of 11 hits, the
#      second-process test passing (misses, if any, print kernel_cache.misses():
#      "no entry" means the key moved, anything else is what loading raised).
#   o: (an H200 only) pending_s70.sh o: v61's float32 RMSNorm A/B.
#   bash bench/ab/pending_s73.sh "$OUT" k|o
set -uo pipefail
OUT=${1:?"usage: pending_s73.sh OUTDIR k|o"}
case "${2:?k|o}" in
  k)
    bash bench/ab/pending_s72.sh "$OUT" d
    bash bench/ab/pending_s71.sh "$OUT" c
    ;;
  o)
    bash bench/ab/pending_s72.sh "$OUT" o
    ;;
  *) echo "k or o" >&2; exit 2 ;;
esac
