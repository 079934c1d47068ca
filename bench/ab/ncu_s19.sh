#!/usr/bin/env bash
# Nineteenth session: ncu on the LayerNorm forward at one wave (512 rows), ours
# against torch.compile's, where ours is 1-1.5 us behind (bench/ab/fixed_cost_s19.sh:
# fp16 512 x 1024 6.66 against 5.18 us). Caches as the previous launches left them,
# clocks free. Prints each kernel's duration, geometry, registers, occupancy and its
# warp stall breakdown (where a warp's latency goes).
#   bash bench/ab/ncu_s19.sh "$OUT"      (about 2 minutes)
set -uo pipefail
OUT=${1:?usage: ncu_s19.sh OUTDIR}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
NCU=(ncu --nvtx --nvtx-include "prof/" --clock-control none --cache-control none
     --section SpeedOfLight --section Occupancy --section WarpStateStats
     --section LaunchStats --section SchedulerStats)
. bench/ab/ncu_ln.sh
ncu_ln_fwd "$OUT" ncu19 24 "^  [a-z_]+.*\(|Duration|Registers Per|Block Size|Grid Size|Achieved Occupancy|Warp Cycles Per Issued|Issued Warp Per|No Eligible|Stall|Waves Per SM" \
  "float16 512x1024" "float16 512x8192" "float32 512x1024"
