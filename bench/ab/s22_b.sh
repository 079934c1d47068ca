#!/usr/bin/env bash
# Twenty-second session: the lean forward compiled without its grid-stride loop on
# a grid of a block per row slot pass (tuning fwd_once: ptxas 48 -> 48, 63 -> 56, 62
# -> 46, float32 56 -> 42 registers), alone and with fwd_early (w / b loaded with the
# row, statistics before y), which s22_a.sh found 0.4-0.9 us faster where it fit the
# registers (16-bit RMSNorm N = 1024-4096) and far slower where it spilled; with
# fwd_once it fits 48 registers at 16-bit LayerNorm N = 512-2048 and RMSNorm N =
# 8192 / 16384. fp16 and float32, M x N = 2^26, two default passes bracket each
# cell. About 3 minutes.
#   bash bench/ab/s22_b.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: s22_b.sh OUTDIR}
. bench/ab/tl.sh
ONCE='{"fwd_once": true}'
BOTH='{"fwd_early": true, "fwd_once": true}'
tl ln16_k2 120 --reps 50 --op ln --ns 512,1024,2048 --dtypes float16 \
  --tunes '{}' "$ONCE" "$BOTH" '{}'
tl ln16_k4 120 --reps 50 --op ln --ns 768,4096,8192,16384 --dtypes float16 \
  --tunes '{}' "$ONCE" '{}'
tl rms16 200 --reps 50 --op rms --ns 512,768,1024,2048,4096,5120,8192,12288,16384 \
  --dtypes float16 --tunes '{}' "$BOTH" "$ONCE" '{}'
for op in ln rms; do
  tl "${op}32" 120 --reps 50 --op "$op" --ns 512,1024,4096,8192 --dtypes float32 \
    --tunes '{}' "$ONCE" '{}'
done
tar czf "$OUT/s22_b.tgz" -C "$TL_DIR" .
