#!/usr/bin/env bash
# For the eighty-fifth session (bench/NOTES.md, "Next (eighty-fifth session)").
#   n: (any Hopper card, ~4 min) ncu of the gated forward's pair GEMM on v4 and v6p
#      against cuBLAS's two GEMMs (wg_ncu.py, 4096 x 4096 -> 2 x 11008 bf16), with
#      per-instruction SASS counters: where v4's consumer warps wait (the full-barrier
#      wait between k-tiles, wgmma_wait, the epilogue) and the tensor pipe's
#      utilisation against cuBLAS's. Sizes the persistent ping-pong design.
#   f: (any card, ~3 min) the few-row layouts never timed: the prefetch form
#      (g1w8u2p, g1w8u1p: the next turn's loads issued before this turn's MMAs),
#      g1w16u2 and the k-split beside the shipped g1w8u2, M = 1 / 16 (skinny_ab.py),
#      A/B/A. Question: does keeping loads in flight during the MMAs lift the down
#      projection's 70% of DRAM peak (ncu: 80% of warp cycles waiting on L1TEX)?
#   s: (any card, ~4 min) the sanitizer gaps the eighty-third and eighty-fourth sessions
#      left: memcheck and racecheck of sanitize.py linear_skinny (now with the k-split
#      layouts: workspace, counters, the last block's sum), memcheck of test_tma.py
#      (the TMA probe, the map writer, the graph-captured map) and of the tiled
#      loader's per-chunk swizzle tests. Predicted: 0 errors, 0 hazards.
#   bash bench/ab/pending_s85.sh "$OUT" n|f|s
set -uo pipefail
OUT=${1:?"usage: pending_s85.sh OUTDIR n|f|s"}
export OUT PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
echo "card: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
case "${2:?n|f|s}" in
  n)
    rep="$OUT/ncu_wg_pair"
    timeout -k 5 240 ncu --nvtx --nvtx-include "prof/" --clock-control none \
      --section SpeedOfLight --section Occupancy --section WarpStateStats \
      --section LaunchStats --section SchedulerStats --section InstructionStats \
      --section SourceCounters --section ComputeWorkloadAnalysis \
      --import-source no -f -o "$rep" python3 bench/ab/wg_ncu.py > "$rep.log" 2>&1
    echo "ncu rc $?"
    ncu -i "$rep.ncu-rep" > "$rep.txt" 2>&1
    ncu -i "$rep.ncu-rep" --page source --csv --print-source sass > "$rep.sass.csv" 2>&1
    echo "sass rc $? $(wc -l < "$rep.sass.csv") lines"
    grep -E "profiled next" "$rep.log"
    grep -E "^  [a-zA-Z_].*\(|Duration|Compute \(SM\) Throughput|Executed Ipc|Issue Slots Busy|Warp Cycles Per Issued|No Eligible" \
      "$rep.txt" | cut -c1-160 | head -60
    ;;
  f)
    timeout -k 5 200 python3 bench/ab/skinny_ab.py --ms 1 16 --reps 20 --tilings --no-gated \
      --skinny g1w8u2 g1w8u2p g1w8u1p g1w16u2 g1w8u2k2 g1w8u2 > "$OUT/skinny_f.log" 2>&1
    echo "ab rc $?"; grep -v -i warn "$OUT/skinny_f.log"
    ;;
  s)
    for tool in memcheck racecheck; do
      timeout -k 5 120 compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 3 \
        python3 bench/sanitize.py linear_skinny:bfloat16 > "$OUT/${tool}_skinny.log" 2>&1
      echo "$tool skinny rc $?"; tail -2 "$OUT/${tool}_skinny.log"
    done
    timeout -k 5 120 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 3 \
      python3 -m pytest -q -p no:cacheprovider tests/test_tma.py \
      > "$OUT/memcheck_tma.log" 2>&1
    echo "memcheck tma rc $?"; grep -E "passed|failed|ERROR SUMMARY" "$OUT/memcheck_tma.log" | tail -3
    timeout -k 5 150 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 3 \
      python3 -m pytest -q -p no:cacheprovider tests/test_linear_act.py \
      -k "loader_rows_step_below" > "$OUT/memcheck_loader.log" 2>&1
    echo "memcheck loader rc $?"; grep -E "passed|failed|ERROR SUMMARY" "$OUT/memcheck_loader.log" | tail -3
    ;;
  *) echo "n, f or s" >&2; exit 2 ;;
esac
