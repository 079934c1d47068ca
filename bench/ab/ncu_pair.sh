#!/usr/bin/env bash
# ncu of one norm pass, ours (with tuning overrides) against torch.compile's, with
# per-instruction SASS counters (sixty-first session: float32 RMSNorm 16384 x 4096,
# inductor's resources at our kernel -- 512 threads, 28 registers, four blocks an SM
# -- still 3 us behind inductor's kernel; where do the warps wait?).
#   bash bench/ab/ncu_pair.sh OUT OP DTYPE SHAPE TUNING_JSON
set -uo pipefail
OUT=$1 OP=$2 DT=$3 SHAPE=$4 TUNE=${5:-"{}"}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
SEC=(--section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats
     --section SchedulerStats --section InstructionStats --section SourceCounters
     --section MemoryWorkloadAnalysis)
for prov in numba compile; do
  rep="$OUT/ncu_${OP}_${DT}_$prov"
  timeout -k 5 150 ncu --nvtx --nvtx-include "prof/" --clock-control none "${SEC[@]}" \
    --import-source no -f -o "$rep" python3 bench/profile_op.py "$OP" --dtype "$DT" \
    --shape "$SHAPE" --provider "$prov" --tuning "$TUNE" > "$rep.log" 2>&1
  echo "ncu $prov rc $?"
  ncu -i "$rep.ncu-rep" > "$rep.txt" 2>&1
  ncu -i "$rep.ncu-rep" --page source --csv --print-source sass > "$rep.sass.csv" 2>&1
  echo "sass rc $? $(wc -l < "$rep.sass.csv") lines"
  grep -E "Duration|Registers Per|Achieved Occupancy|Executed Instructions  |Issued Instructions  " \
    "$rep.txt" | head -8
done
