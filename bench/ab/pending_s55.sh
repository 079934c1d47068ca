#!/usr/bin/env bash
# Written in the fifty-fourth session for the next (an H200; bench/NOTES.md, "Next").
#   b: the bisect of the 0.8 us between ab/bulk_fwd.py's register-store gelu loop and
#      the shipped forward (~40 s): each of the shipped kernel's run-time features (g,
#      b, e, d), no launch bounds, and the output allocated each call (a).
#   w: the dropout sweep at v22 (pending_sweep.sh, all three dtypes, ~220 s; carry
#      nothing: Liger has no dropout), for RESULTS.md's tables from one run.
#   bash bench/ab/pending_s55.sh "$OUT" {b|w}
set -uo pipefail
OUT=${1:?"usage: pending_s55.sh OUTDIR b|w"}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
case "${2:?b or w}" in
  b)
    for dt in float16 bfloat16; do
      echo "== $dt"
      timeout -k 5 150 python3 bench/ab/bulk_fwd.py --passes 3 --dtype "$dt" --variants \
        gelu_reg_8_0,gelu_reg_8_0_a,gelu_reg_8_0_g,gelu_reg_8_0_b,gelu_reg_8_0_e,gelu_reg_8_0_d,gelu_reg_0_0_gbed,gelu_reg_0_0_gbeda \
        2>&1 | grep -v Warning
    done | tee "$OUT/bisect.log"
    ;;
  w) bash bench/ab/pending_sweep.sh "$OUT" float16,bfloat16,float32 ;;
  *) echo "b or w" >&2; exit 2 ;;
esac
