#!/usr/bin/env bash
# Written in the fifty-sixth session for the next (an H200; bench/NOTES.md, fifty-sixth
# session): the one question of that session the device did not answer (three starts
# refused). Does inductor's layout at 16-bit N = 512 / 1024, two rows a warp side by
# side (XBLOCK 2, num_warps 1), beat the shipped plain forward? ab/bulk_norm.py's
# variants (store_rowsablock_loop_warpsanSM): at N = 1024 the per-row math and bits are
# the shipped kernel's (checked), two rows a warp put 8 words a thread in flight
# against 4 (ptxas 13.0: 80 registers with bounds for 24 warps an SM, 4 bytes of spill
# for the register store; 96 at 20; 128 at 16); at N = 512 (two words a row, 64
# registers) the layout is not the shipped one (16 lanes, four words, two rows a warp),
# so its bits differ. Two short calls' worth (~60 s after compiles).
#   bash bench/ab/pending_s57.sh "$OUT"
set -uo pipefail
OUT=${1:?"usage: pending_s57.sh OUTDIR"}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
timeout -k 5 120 python3 bench/ab/bulk_norm.py --n 1024 --passes 3 \
  --variants reg_1_1,reg_1_2_24,bulk_1_2_24,reg_1_2_20,reg_1_2_16 > "$OUT/rpt_1024.log" 2>&1
echo "1024 rc $?"
timeout -k 5 120 python3 bench/ab/bulk_norm.py --n 512 --passes 3 \
  --variants reg_1_1,reg_1_2,bulk_1_2,reg_2_2,reg_4_2,reg_1_2_24 > "$OUT/rpt_512.log" 2>&1
echo "512 rc $?"
grep -v -i warn "$OUT"/rpt_*.log
