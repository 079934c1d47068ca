#!/usr/bin/env bash
# Forty-eighth session: after pending_s48b (the row kernel's per-element w / b work
# costs nothing at 16384 x 4096 fp16), which structural difference between the
# backward with w and b (512-thread blocks of two rows, named barriers, direct step
# off, 128 registers) and with b alone (one-row 256-thread blocks, shuffled step, 107
# registers, 2 blocks an SM: 106 us against 113) costs the ~7 us. affine_share (fp16,
# LayerNorm variants, A/B/B/A within each process) under each tuning:
#   t0 default; t1 bwd_block 256 (one-row, direct step, w in registers);
#   t2 t1 with shuffles; t3 t2 with w from shared memory; t4 bwd_pdl off.
#   bash bench/ab/pending_s48c.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: pending_s48c.sh OUTDIR}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
i=0
for tune in '{}' '{"bwd_block": 256}' '{"bwd_block": 256, "bwd_red_direct": false}' \
    '{"bwd_block": 256, "bwd_red_direct": false, "bwd_w_regs": false}' '{"bwd_pdl": false}' '{}'; do
  i=$((i + 1))
  timeout -k 5 150 python3 bench/ab/affine_share.py --dtypes float16 --ops ln --tune "$tune" \
    > "$OUT/s48c_t$i.txt" 2>&1
  echo "== t$i $tune rc $?"; grep -E "^\| ln" "$OUT/s48c_t$i.txt"
done
