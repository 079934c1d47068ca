#!/usr/bin/env bash
# For the eighty-eighth session (bench/NOTES.md, "Next (eighty-eighth session)").
#   a: (any Hopper card, ~8 min) v10 (epi 4: v9's register epilogue with each quad's
#      words transposed by shuffles, every store a 16-byte chunk of a row; built in
#      the eighty-seventh session, untimed) against the shipped v7b (epi 2) and v9
#      (epi 3): epi_cost.py --epi 2 3 4, three alternating rounds; then v10's GPU tests
#      and memcheck of the register epilogues (sanitize.py linear_act_wgmma_reg).
#      Predicted: if v9 lost by its half-sector stores, v10 3-8% under epi 2 on the
#      forwards (the C tile's round trip and barriers gone, 16-byte stores kept); if
#      not, v10 near v9 and the ncu run (n) says why.
#   n: (any Hopper card, ~6 min) why v9 (epi 3) lost to v7b (epi 2): ncu of the plain
#      forward 8192 x 4096 -> 16384 (bias, none) and the pair forward keeping the
#      pairs (silu), each at epi 2, 3 and 4 on v4 (wg_ncu.py --arms epi), with the
#      memory tables. Predicted: epi 3's L2 store requests about twice epi 2's for the
#      same bytes (its 32-bit stores fill half a sector), epi 4's as epi 2's; if
#      instead issue stalls or instruction-cache misses (No Instruction) lead, the
#      code size is the cause. Then the dgrad at epi 1 against epi 2 (the one role
#      where epi 1 led, within the noise), 5 alternating rounds.
#   m: (any Hopper card, ~8 min) memcheck of sanitize.py linear_act_wgmma at bfloat16
#      (15 tilings, epi 0-4; it did not finish in 120 s in the eighty-seventh session).
#      Predicted: 0 errors.
#   bash bench/ab/pending_s87.sh "$OUT" a|n|m
#   (On an H200 first: bash bench/ab/pending_s76.sh "$OUT" h, issue #16.)
set -uo pipefail
OUT=${1:?"usage: pending_s87.sh OUTDIR a|n|m"}
export OUT PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
echo "card: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
case "${2:?a|n|m}" in
  a)
    timeout -k 5 ${EPI_S:-300} python3 bench/ab/epi_cost.py --epi 2 3 4 --rounds 3 \
      > "$OUT/epi_cost.log" 2>&1
    echo "epi_cost rc $?"; grep -v -i -E "warn|^round" "$OUT/epi_cost.log"
    timeout -k 5 ${TEST_S:-150} python3 -m pytest -q -p no:cacheprovider -n 8 \
      tests/test_wgmma.py tests/test_gated_linear.py tests/test_linear_act.py \
      -k "epi4 or EPI4 or fast_forms or register_epilogue or quad" > "$OUT/tests_v10.log" 2>&1
    echo "tests rc $?"; tail -2 "$OUT/tests_v10.log"
    timeout -k 5 ${SAN_S:-150} compute-sanitizer --tool memcheck --report-api-errors no \
      --error-exitcode 3 python3 bench/sanitize.py linear_act_wgmma_reg:bfloat16 \
      > "$OUT/memcheck_reg.log" 2>&1
    echo "memcheck reg rc $?"; tail -2 "$OUT/memcheck_reg.log"
    ;;
  n)
    rep="$OUT/ncu_epi"
    timeout -k 5 300 ncu --nvtx --nvtx-include "prof/" --clock-control none \
      --section SpeedOfLight --section MemoryWorkloadAnalysis \
      --section MemoryWorkloadAnalysis_Tables --section WarpStateStats \
      --section LaunchStats --section InstructionStats --section SourceCounters \
      --import-source no -f -o "$rep" python3 bench/ab/wg_ncu.py --arms epi > "$rep.log" 2>&1
    echo "ncu rc $?"
    ncu -i "$rep.ncu-rep" > "$rep.txt" 2>&1
    grep -E "profiled next" "$rep.log"
    grep -E "^  [a-zA-Z_].*\(|Duration|Memory Throughput|DRAM Throughput|L2 Hit|Mem Busy|Max Bandwidth|Executed Ipc|Warp Cycles Per Issued|No Eligible|Store|Sectors" \
      "$rep.txt" | cut -c1-160 | head -150
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
  *) echo "a, n or m" >&2; exit 2 ;;
esac
