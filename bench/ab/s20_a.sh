#!/usr/bin/env bash
# Twentieth session, first call: the "nc" (and every other) fwd_evict hint under
# pytest on the GPU (test_forward_evict_hints_same_bits at 4099 x 4096) and the
# layer_norm workloads under memcheck / racecheck (bench/sanitize.py now runs every
# hint), then pending_s20.sh (one-wave groups-a-thread A/B). About 8 minutes.
#   bash bench/ab/s20_a.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: s20_a.sh OUTDIR}
. bench/ab/tl.sh
ab_verify s20_evict 330 evict_hints "layer_norm:float32 layer_norm:float16 layer_norm:bfloat16"
bash bench/ab/pending_s20.sh "$OUT"
