#!/usr/bin/env bash
# Written in the thirty-first session for the next (an H200). Each part fits one call:
#   a: GPU suite part 1 (dropout, LayerNorm, patch, fast path) at the head: v34 removed
#      (the row kernels back to v33's arguments), fwd_stream_l2 added (opt-in). ~460 s.
#   b: GPU suite part 3 (front ends, plans, stress, fuzz, bench). ~210 s.
#   c: ncu of the float32 LayerNorm forward at 16384 x 4096, ours (v33's plain kernel,
#      134 us) against inductor's (129 us): the inductor-shaped streaming kernel of
#      ours reached 134 only at RMSNorm (bench/NOTES.md, thirty-first session), so the
#      2-5 us gap is not the shape. Per-instruction stall sampling (the source page,
#      SASS) plus the DRAM bytes read / written, to find where ours waits that
#      inductor's does not. ~3 minutes.
#   d: memcheck / racecheck of sanitize.py's layer_norm workload (now with the streaming
#      forward under fwd_stream_l2, not yet sanitized), float32 and float16. ~4 minutes.
#   bash bench/ab/pending_s32.sh "$OUT" a|b|c|d
set -uo pipefail
OUT=${1:?usage: pending_s32.sh OUTDIR a|b|c|d}
PART=${2:?usage: pending_s32.sh OUTDIR a|b|c|d}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
case "$PART" in
a) bash bench/ab/full_suite.sh "$OUT" 1 ;;
b) bash bench/ab/full_suite.sh "$OUT" 3 ;;
c)
  for prov in numba compile; do
    rep="$OUT/ncu32_ln_fwd_f32_$prov"
    timeout -k 5 150 ncu --nvtx --nvtx-include "prof/" --clock-control none \
      --set full --import-source yes -o "$rep" -f \
      python3 bench/profile_op.py ln_fwd --dtype float32 --shape 16384x4096 \
      --provider "$prov" > "$rep.log" 2>&1
    echo "ncu $prov rc $?"
    timeout -k 5 60 ncu -i "$rep.ncu-rep" --page details > "$rep.txt" 2>&1
    timeout -k 5 60 ncu -i "$rep.ncu-rep" --page source --csv --print-source sass \
      > "$rep.sass.csv" 2>&1
    echo "pages rc $?"
    grep -E "Duration|DRAM Throughput|Registers Per|Achieved Occupancy|No Eligible" "$rep.txt" | head -8
    rm -f "$rep.ncu-rep"
  done
  ;;
d)
  SAN_OPS="layer_norm:float32 layer_norm:float16" SAN_TOOLS="memcheck racecheck" \
    SAN_TIMEOUT=250 timeout -k 10 560 bash bench/gpu_harness.sh "$OUT/san" \
    --stages sanitize > "$OUT/san.out" 2>&1
  echo "harness rc $?"; cat "$OUT/san/summary.md"
  ;;
*) echo "PART must be a, b, c or d" >&2; exit 2 ;;
esac
