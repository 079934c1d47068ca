#!/usr/bin/env bash
# Thirty-ninth session, H200: where the 16-bit gelu forward's cycles go, beside
# gelu_tanh's. SASS (ptxas sm_90) per 8 elements: gelu 223 instructions (FFMA 56, FMUL
# 32, FADD 16, MUFU 16, IMAD.WIDE 21), gelu_tanh 181 (FFMA 8, FMUL 40, MUFU 16, IMAD.WIDE
# 21); 86 against 75.5 us. ncu's full stall table (per issued instruction) and the
# pipes' utilisation, to tell an issue limit from a pipe or a latency one.
#   bash bench/ab/pending_s39d.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: pending_s39d.sh OUTDIR}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
M="regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio"
M="$M,regex:sm__pipe_.*_cycles_active\.avg\.pct_of_peak_sustained_active"
M="$M,regex:sm__inst_executed_pipe_.*\.avg\.pct_of_peak_sustained_active"
M="$M,gpu__time_duration.sum,smsp__issue_active.avg.pct_of_peak_sustained_active"
M="$M,dram__throughput.avg.pct_of_peak_sustained_elapsed"
for act in gelu gelu_tanh; do
  timeout -k 5 90 ncu --nvtx --nvtx-include "prof/" --clock-control none --cache-control none \
    --metrics "$M" python3 bench/profile_op.py dropout_fwd --shape 16384x4096 \
    --dtype float16 --activation "$act" > "$OUT/ncu39_fwd_$act.txt" 2>&1
  echo "== $act rc $?"
  grep -E "stalled|pipe|duration|issue_active|dram" "$OUT/ncu39_fwd_$act.txt" \
    | awk '$NF != "0" && $NF != "0.00"' | sed -E 's/ +/ /g' | head -70
done
