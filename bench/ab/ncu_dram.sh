#!/usr/bin/env bash
# DRAM- and L2-level counters of one norm pass, ours against torch.compile's
# (sixty-first session: the float32 forwards' gap is in neither the instruction
# stream nor the layout; does the memory system see the two kernels differently --
# sectors, per-channel balance (min / max over the DRAM and L2 instances), L2 misses?).
#   bash bench/ab/ncu_dram.sh OUT OP DTYPE SHAPE
set -uo pipefail
OUT=$1 OP=$2 DT=$3 SHAPE=$4
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
M=gpu__time_duration.sum,dram__sectors_read.sum,dram__sectors_write.sum
M=$M,dram__sectors_read.min,dram__sectors_read.max,dram__sectors_write.min,dram__sectors_write.max
M=$M,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__cycles_active.avg
M=$M,lts__t_sectors_op_read.sum,lts__t_sectors_op_write.sum,lts__t_sector_op_read_hit_rate.pct
M=$M,lts__t_sectors_op_read.min,lts__t_sectors_op_read.max,lts__d_sectors_fill_sysmem.sum
M=$M,lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum,lts__average_gcomp_input_sector_success_rate.pct
M=$M,sm__cycles_active.avg,sm__cycles_active.min,sm__cycles_active.max,sm__warps_active.avg.pct_of_peak_sustained_active
M=$M,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum
for prov in numba compile; do
  timeout -k 5 150 ncu --nvtx --nvtx-include "prof/" --clock-control none --metrics "$M" \
    python3 bench/profile_op.py "$OP" --dtype "$DT" --shape "$SHAPE" --provider "$prov" \
    > "$OUT/dram_${OP}_${DT}_$prov.txt" 2>&1
  echo "== $prov rc $?"
  grep -E "^\s+(gpu__|dram__|lts__|sm__|l1tex__)" "$OUT/dram_${OP}_${DT}_$prov.txt"
done
