#!/usr/bin/env bash
# Twenty-fourth session, fifth call: s24_d.sh's racecheck of the whole layer_norm
# workload at float16 ran past its limit (the workload had run; no summary), so
# racecheck on the plain kernel's new layouts alone (bench/sanitize.py
# layer_norm_plain: _PLAIN_V28's and sub-warp rows) at float16 and bfloat16.
#   bash bench/ab/s24_e.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: s24_e.sh OUTDIR}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
for dt in float16 bfloat16; do
  timeout -k 5 110 compute-sanitizer --tool racecheck python3 bench/sanitize.py \
    "layer_norm_plain:$dt" > "$OUT/racecheck_$dt.log" 2>&1
  echo "racecheck $dt rc $?"; tail -2 "$OUT/racecheck_$dt.log"
done
