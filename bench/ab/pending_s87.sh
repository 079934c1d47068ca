#!/usr/bin/env bash
# For the eighty-eighth session (bench/NOTES.md, "Next (eighty-eighth session)").
#   n: (any Hopper card, ~6 min) why v9 (epi 3) lost to v7b (epi 2): ncu of the plain
#      forward 8192 x 4096 -> 16384 (bias, none) and the pair forward keeping the
#      pairs (silu), each at epi 2 and 3 on v4 (wg_ncu.py --arms epi), with the memory
#      tables. Predicted: epi 3's L2 store requests about twice epi 2's for the same
#      bytes (its 32-bit stores fill half a sector); if instead its issue stalls or
#      instruction-cache misses (No Instruction) lead, the code size is the cause.
#      Then the dgrad at epi 1 against epi 2 (the one role where epi 1 led, within the
#      noise), 5 alternating rounds.
#   m: (any Hopper card, ~8 min) memcheck of sanitize.py linear_act_wgmma at bfloat16
#      (13 tilings, epi 0-3; it did not finish in 120 s in the eighty-seventh session).
#      Predicted: 0 errors.
#   bash bench/ab/pending_s87.sh "$OUT" n|m
#   (On an H200 first: bash bench/ab/pending_s76.sh "$OUT" h, issue #16.)
set -uo pipefail
OUT=${1:?"usage: pending_s87.sh OUTDIR n|m"}
export OUT PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
echo "card: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
case "${2:?n|m}" in
  n)
    rep="$OUT/ncu_epi"
    timeout -k 5 240 ncu --nvtx --nvtx-include "prof/" --clock-control none \
      --section SpeedOfLight --section MemoryWorkloadAnalysis \
      --section MemoryWorkloadAnalysis_Tables --section WarpStateStats \
      --section LaunchStats --section InstructionStats --section SourceCounters \
      --import-source no -f -o "$rep" python3 bench/ab/wg_ncu.py --arms epi > "$rep.log" 2>&1
    echo "ncu rc $?"
    ncu -i "$rep.ncu-rep" > "$rep.txt" 2>&1
    grep -E "profiled next" "$rep.log"
    grep -E "^  [a-zA-Z_].*\(|Duration|Memory Throughput|DRAM Throughput|L2 Hit|Mem Busy|Max Bandwidth|Executed Ipc|Warp Cycles Per Issued|No Eligible|Store|Sectors" \
      "$rep.txt" | cut -c1-160 | head -120
    timeout -k 5 150 python3 bench/ab/epi_cost.py --kinds dgrad --epi 1 2 --rounds 5 \
      > "$OUT/epi_dgrad.log" 2>&1
    echo "epi dgrad rc $?"; grep -v -i -E "warn|^round" "$OUT/epi_dgrad.log"
    ;;
  m)
    timeout -k 5 470 compute-sanitizer --tool memcheck --report-api-errors no \
      --error-exitcode 3 python3 bench/sanitize.py linear_act_wgmma:bfloat16 \
      > "$OUT/memcheck_wgmma.log" 2>&1
    echo "memcheck wgmma rc $?"; tail -2 "$OUT/memcheck_wgmma.log"
    ;;
  *) echo "n or m" >&2; exit 2 ;;
esac
