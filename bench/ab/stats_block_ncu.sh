#!/usr/bin/env bash
# DRAM and L2 sectors of the norms forward with and without its statistics, and with
# them stored a block's rows at a time (v62 candidate, sixty-fifth session;
# bench/ab/stats_block.py says why). Per cell: the launcher's own kernel with the
# statistics (st) and without (ns), then the plain kernel at LAYOUT (words, rows a
# block) row by row (L), without (L_ns) and a block's rows at a time (L_sb).
# Expected sectors of statistics: LayerNorm 2 M / 8, RMSNorm M / 8. Hypothesis: st
# writes (or reads) several times that many more sectors than ns; L_sb does not.
#   bash bench/ab/stats_block_ncu.sh OUT OP DTYPE SHAPE WORDS,RPB
#   e.g. bash bench/ab/stats_block_ncu.sh "$OUT" ln_fwd float32 131072x512 4,8
set -uo pipefail
OUT=$1 OP=$2 DT=$3 SHAPE=$4 LAY=$5
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
M=gpu__time_duration.sum,dram__sectors_read.sum,dram__sectors_write.sum
# (Only metrics earlier sessions' ncu runs returned: an unknown name fails the run.)
M=$M,lts__t_sectors_op_write.sum,lts__t_sectors_op_read.sum
M=$M,l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum
M=$M,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active
PL="\"fwd_plain\": true, \"fwd_plain_layout\": [$LAY]"
run() {  # run LABEL TUNING_JSON [--no-stats]
  local f="$OUT/ncu_${OP}_${DT}_${SHAPE}_$1.txt"
  timeout -k 5 150 ncu --nvtx --nvtx-include "prof/" --clock-control none --metrics "$M" \
    python3 bench/profile_op.py "$OP" --dtype "$DT" --shape "$SHAPE" --tuning "$2" \
    "${@:3}" > "$f" 2>&1
  echo "== $OP $DT $SHAPE $1 rc $?"
  grep -E "^\s+(gpu__|dram__|lts__|sm__|l1tex__)|norm_fwd" "$f"
}
run st "{}"
run ns "{}" --no-stats
run L "{$PL}"
run L_ns "{$PL}" --no-stats
run L_sb "{$PL, \"fwd_plain_stats_block\": true}"
