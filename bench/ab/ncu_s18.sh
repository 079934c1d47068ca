#!/usr/bin/env bash
# Eighteenth session: ncu on the LayerNorm forwards still behind inductor, ours
# against torch.compile's, with L2 left as the previous launches left it
# (--cache-control none: the back-to-back condition under which inductor's kernel
# wins; the twelfth session's ncu flushed the caches and had ours 12% faster).
# float32 4096 x 16384 (0.92x) and fp16 8192 x 8192 (0.98x). Prints each kernel's
# duration, DRAM traffic and throughput, L2 hit rate, occupancy and warp stalls.
#   bash bench/ab/ncu_s18.sh "$OUT"      (about 3 minutes)
set -uo pipefail
OUT=${1:?usage: ncu_s18.sh OUTDIR}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
NCU=(ncu --nvtx --nvtx-include "prof/" --clock-control none --cache-control none
     --section SpeedOfLight --section Occupancy --section WarpStateStats
     --section LaunchStats --section MemoryWorkloadAnalysis
     --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum,smsp__average_warp_latency_issue_stalled_long_scoreboard.ratio,smsp__average_warp_latency_issue_stalled_barrier.ratio)
. bench/ab/ncu_ln.sh
ncu_ln_fwd "$OUT" ncu 30 "^  [a-z_]+.*\(|Duration|DRAM Throughput|dram__bytes|lts__t_sector|Achieved Occupancy|Registers Per|Block Size|Grid Size|Warp Cycles Per Issued|long_scoreboard|stalled_barrier|L2 Hit Rate|Mem Busy|Max Bandwidth" \
  "float32 4096x16384" "float16 8192x8192"
