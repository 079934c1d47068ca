#!/usr/bin/env bash
# Forty-sixth session, after pending_s46.sh d: the dW / dB reduction at v39 costs 3.7 us
# (fp16) / 3.2 (bf16) of the 16-bit LayerNorm backward at 16384 x 4096 (the no-op
# bound: 113.4 -> 109.7), and ncu reads the reduction kernel at 4.7 us (the row kernel
# 109.0). At v39's 132 partial rows the shipped reduction block (32 columns x 32 row
# slices, 4 loads a thread a round) takes a second dependent L2 round for the 4 slices
# that own row 128 + ty. Call r: the reduction's shape at 132 rows, LayerNorm fp16 /
# bf16, N = 2048 / 4096 (both 132 partial rows), A/B/C/D/A:
#   {}: shipped (32, 32), dwdb_unroll 4;  u8: (32, 32), unroll 8 (one round of <= 5);
#   r22: (32, 22), unroll 8 (6 rows a thread, one round);  c16: (16, 32), unroll 8.
# Predicted: u8 / r22 / c16 0.3-0.5 us faster (one L2 round trip less), within 0.5 of
# each other. Then issue #16's interop.torch table at v39 (interop_s27.sh).
#   bash bench/ab/pending_s46b.sh "$OUT" r
set -uo pipefail
OUT=${1:?usage: pending_s46b.sh OUTDIR r}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
case "${2:?r}" in
  r)
    u8='{"dwdb_unroll": 8}'
    r22='{"reduce_block": [32, 22], "dwdb_unroll": 8}'
    c16='{"reduce_block": [16, 32], "dwdb_unroll": 8}'
    timeout -k 10 170 python3 bench/tune_layer_norm.py --out "$OUT/dwdb_ln" --reps 50 \
      --op ln --ns 2048,4096 --dtypes float16,bfloat16 \
      --tunes '{}' "$u8" "$r22" "$c16" '{}' > "$OUT/dwdb_ln.log" 2>&1
    echo "dwdb_ln rc $?"; grep '^| [0-9]' "$OUT/dwdb_ln.log"
    bash bench/ab/interop_s27.sh "$OUT"
    ;;
  *) echo "r" >&2; exit 2 ;;
esac
