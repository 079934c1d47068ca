#!/usr/bin/env bash
# Seventy-fourth session: pending_s73.sh k passed on an H100 (every key the same in
# both processes, first_call 11 of 11 hits, the cache tests 14 passed). What waits:
#   h: (an H200 only; exits 3 on any other card before any work) pending_s73.sh o,
#      v61's float32 RMSNorm A/B, then pending_s66.sh n (ncu sectors behind the
#      statistics' cost at LayerNorm 512) while the call's time lasts.
#   bash bench/ab/pending_s74.sh "$OUT" h
set -uo pipefail
OUT=${1:?"usage: pending_s74.sh OUTDIR h"}
case "${2:?h}" in
  h)
    card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
    echo "card: $card"
    case "$card" in *H200*) ;; *) echo "not an H200" >&2; exit 3 ;; esac
    bash bench/ab/pending_s73.sh "$OUT" o
    bash bench/ab/pending_s66.sh "$OUT" n
    ;;
  *) echo "h" >&2; exit 2 ;;
esac
