#!/usr/bin/env bash
# ncu on the LayerNorm forward, ours against torch.compile's, fp16 16384 x 4096 (the
# 2 us gap of bench/notes_layer_norm.md, "The forward's last 1-3%"): speed of light,
# warp states, instruction counts, source counters (SASS hot spots).
#   bash bench/ab/ncu_ln_fwd.sh "$OUT"      (about 2 minutes)
set -uo pipefail
OUT=${1:?usage: ncu_ln_fwd.sh OUTDIR}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
NCU=(ncu --nvtx --nvtx-include "prof/" --clock-control none --section SpeedOfLight
     --section Occupancy --section WarpStateStats --section LaunchStats
     --section MemoryWorkloadAnalysis --section SchedulerStats --section InstructionStats
     --section SourceCounters)
for prov in numba compile; do
  timeout -k 5 150 "${NCU[@]}" python3 bench/profile_op.py ln_fwd --provider "$prov" \
    > "$OUT/ncu_ln_fwd_$prov.txt" 2>&1
  echo "ncu ln_fwd $prov rc $?"
done
