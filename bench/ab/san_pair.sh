#!/usr/bin/env bash
# memcheck and racecheck (or the tools in $SAN_TOOLS) of one bench/sanitize.py workload,
# side by side, each under a 150 s limit (or $SAN_LIMIT); logs $OUT/${PREFIX}_<tool>.log,
# then one summary line a tool.
#   [SAN_TOOLS="memcheck racecheck initcheck"] [SAN_LIMIT=200] \
#     bash bench/ab/san_pair.sh OUT WORKLOAD[:DTYPE] PREFIX
set -uo pipefail
OUT=${1:?usage: san_pair.sh OUT WORKLOAD PREFIX}
WORKLOAD=${2:?usage: san_pair.sh OUT WORKLOAD PREFIX}
PREFIX=${3:?usage: san_pair.sh OUT WORKLOAD PREFIX}
TOOLS=${SAN_TOOLS:-memcheck racecheck}
for tool in $TOOLS; do
  timeout -k 5 "${SAN_LIMIT:-150}" compute-sanitizer --tool "$tool" --error-exitcode 9 \
    --report-api-errors no python3 bench/sanitize.py "$WORKLOAD" \
    > "$OUT/${PREFIX}_$tool.log" 2>&1 &
done
wait
for tool in $TOOLS; do
  echo "$tool: $(grep -h -E '(ERROR|RACECHECK) SUMMARY' "$OUT/${PREFIX}_$tool.log" | tail -1)"
done
