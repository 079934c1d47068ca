#!/usr/bin/env bash
# Written in the sixty-first session for the next (bench/NOTES.md, sixty-first
# session, "The mimic"): is the float32 norms' gap to torch.compile in how the binary
# is assembled (driver JIT of sm_90 PTX against Triton's offline sm_90a ptxas)?
#   m: bench/ab/cubin_ab.py -- the mimic kernel loaded four ways through CuPy (driver
#      JIT, toolkit ptxas sm_90 / sm_90a, Triton's ptxas sm_90a), the numba dispatcher,
#      ours and torch.compile, five alternating passes, each cubin also with the
#      shared-memory carveout at 7 %; cuobjdump -sass of each cubin
#      and of inductor's kernel into $OUT/cubin. ~2 min.
#   bash bench/ab/pending_s62.sh "$OUT" m
set -uo pipefail
OUT=${1:?"usage: pending_s62.sh OUTDIR m"}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
case "${2:?m}" in
  m)
    mkdir -p "$OUT/cubin"
    timeout -k 10 300 python3 bench/ab/cubin_ab.py --out "$OUT/cubin" > "$OUT/cubin_ab.log" 2>&1
    echo "cubin_ab rc $?"; grep -E "^\||ptxas" "$OUT/cubin_ab.log"; ls "$OUT/cubin"
    ;;
  *) echo "m" >&2; exit 2 ;;
esac
