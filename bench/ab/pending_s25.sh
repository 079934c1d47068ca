#!/usr/bin/env bash
# Written in the twenty-fourth session for the next: the whole norms sweep at v28's
# defaults (the plain kernel at _PLAIN_V28's rows), for RESULTS.md's table and plots.
# Carry .whl (Liger's wheel). About 5 minutes on an H100.
#   bash bench/ab/pending_s25.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: pending_s25.sh OUTDIR}
bash bench/ab/norms_sweep.sh "$OUT" h100_s25
