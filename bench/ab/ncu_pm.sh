#!/usr/bin/env bash
# ncu's PM sampling (DRAM / SM throughput over the kernel's duration) of one norm pass,
# ours against torch.compile's (sixty-first session: same DRAM work, ours with more
# idle DRAM time; where in time?). Writes the reports and every text page ncu gives.
#   bash bench/ab/ncu_pm.sh OUT OP DTYPE SHAPE
set -uo pipefail
OUT=$1 OP=$2 DT=$3 SHAPE=$4
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
for prov in numba compile; do
  rep="$OUT/pm_${OP}_${DT}_$prov"
  timeout -k 5 150 ncu --nvtx --nvtx-include "prof/" --clock-control none \
    --section PmSampling --section SpeedOfLight -f -o "$rep" \
    python3 bench/profile_op.py "$OP" --dtype "$DT" --shape "$SHAPE" --provider "$prov" \
    > "$rep.log" 2>&1
  echo "== $prov rc $?"; tail -3 "$rep.log"
  ncu -i "$rep.ncu-rep" --print-details all > "$rep.txt" 2>&1
  ncu -i "$rep.ncu-rep" --page raw --csv > "$rep.raw.csv" 2>&1
  ncu -i "$rep.ncu-rep" --page details --print-metric-instances values --csv \
    > "$rep.values.csv" 2>&1
  wc -c "$rep.txt" "$rep.raw.csv" "$rep.values.csv"
  grep -iE "pmsampling|sampl" "$rep.txt" | head -10
done
