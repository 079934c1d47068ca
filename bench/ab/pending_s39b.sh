#!/usr/bin/env bash
# Thirty-ninth session, H200, after v14 (the dependent reduction kernel) was refuted
# (results: bench/notes_dropout.md v15; logs bench/results/s39_ab/):
#   f: the 16-bit gelu forward's grid as more, shorter waves. Its one-wave grid read
#      5 us slower than the nominal two (twenty-seventh session), and ncu (twenty-ninth)
#      saw 4.7 eligible warps a scheduler on average yet none in 26% of cycles: a
#      kernel that alternates between all-compute and all-wait. If blocks that start
#      together stay in phase, shorter blocks (rows=64 / 32, fill 3 / 4 / 8) desync
#      them: predicted 86 -> 80-84 us; if the phases are not the limit, even or slower
#      (each block's first load waits unhidden). 'none' alongside. fp16, then bf16.
#   b: the backward with a bias grad (74.8-77 against 74.3) on fewer, larger blocks
#      (512 threads at fill 1: one fence and arrival per 16 warps), smaller ones (128)
#      and narrower column strips (bx 16 / 8). Predicted: within 1 us of shipped
#      either way; a win under 74.3 at 'none' would meet the target.
#   s: the two leads of f and b across N (fp16, M x N = 2^26): the forward at fill 4 / rows
#      64 (gelu 86.0 -> 84.9 / 85.0 at 16384 x 4096, bf16 86.8-87.0 -> 85.8 / 85.9) and
#      the backward with a bias grad at 512 threads, fill 1 (gelu 109.3-109.9 -> 106.3,
#      bf16 -> 106.0; 'none' even). Predicted: gelu bwd 2-3 us faster at every N where
#      one block of 512 an SM holds its registers; the forward ~1 us at every N.
#   w: s's forward lead, fill 4, before it could become a default: fp16 at the other N
#      and every activation (1-2.7 us faster at N = 512-12288 in s, 1.7 slower at 65536),
#      bf16 at 4096 / 65536. Predicted: gelu 1-3 us faster at N <= 16384, the others
#      within 1 us (their 63-64 registers hold 4 blocks an SM: fill 4 is their nominal
#      plan, about).
#   bash bench/ab/pending_s39b.sh "$OUT" f|b|s|w
set -uo pipefail
OUT=${1:?usage: pending_s39b.sh OUTDIR f|b|s|w}
PART=${2:?usage: pending_s39b.sh OUTDIR f|b|s|w}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
case "$PART" in
f)
  cfgs="shipped,rows=64,rows=32,fill=2,fill=3,fill=4,fill=8,threads=128 rows=64,bx=16,shipped"
  for dt in float16 bfloat16; do
    timeout -k 5 200 python3 bench/tune_dropout.py --out "$OUT/f_$dt" --reps 30 --dtype "$dt" \
      --configs "$cfgs" --acts gelu,none --cases fwd > "$OUT/f_$dt.log" 2>&1
    echo "tune $dt rc $?"; grep " call " "$OUT/f_$dt.log" | grep -v " p0 "
  done
  ;;
b)
  cfgs="shipped,threads=512 fill=1,threads=128 fill=1,bx=16 fill=1,bx=16,bx=8,fill=1 step=4"
  cfgs="$cfgs,shipped"
  for dt in float16 bfloat16; do
    timeout -k 5 200 python3 bench/tune_dropout.py --out "$OUT/b_$dt" --reps 30 --dtype "$dt" \
      --configs "$cfgs" --acts none,gelu --cases bwd > "$OUT/b_$dt.log" 2>&1
    echo "tune $dt rc $?"; grep " call " "$OUT/b_$dt.log" | grep -v " p0 "
  done
  ;;
s)
  for shape in 131072x512 65536x1024 13107x5120 5461x12288 1024x65536; do
    timeout -k 5 100 python3 bench/tune_dropout.py --out "$OUT/sb_$shape" --reps 30 \
      --shape "$shape" --configs "shipped,threads=512 fill=1,shipped" --acts gelu,none \
      --cases bwd > "$OUT/sb_$shape.log" 2>&1
    echo "bwd $shape rc $?"; grep " call " "$OUT/sb_$shape.log" | grep -v " p0 "
    timeout -k 5 100 python3 bench/tune_dropout.py --out "$OUT/sf_$shape" --reps 30 \
      --shape "$shape" --configs "shipped,fill=4,rows=64,shipped" --acts gelu,none \
      --cases fwd > "$OUT/sf_$shape.log" 2>&1
    echo "fwd $shape rc $?"; grep " call " "$OUT/sf_$shape.log" | grep -v " p0 "
  done
  ;;
w)
  acts=none,relu,gelu,gelu_tanh,silu,squared_relu,leaky_relu
  for run in float16:87381x768 float16:32768x2048 float16:8192x8192 float16:4096x16384 \
      float16:16384x4096 bfloat16:16384x4096 bfloat16:1024x65536; do
    dt=${run%%:*}; shape=${run#*:}
    timeout -k 5 110 python3 bench/tune_dropout.py --out "$OUT/w_${dt}_$shape" --reps 30 \
      --dtype "$dt" --shape "$shape" --configs "shipped,fill=4,shipped" --acts "$acts" \
      --cases fwd > "$OUT/w_${dt}_$shape.log" 2>&1
    echo "fwd $dt $shape rc $?"; grep " call " "$OUT/w_${dt}_$shape.log" | grep -v " p0 " \
      | awk '{printf "%s %s %s | ", $1, $2, $(NF-7)} END {print ""}'
  done
  ;;
*) echo "PART must be f, b, s or w" >&2; exit 2 ;;
esac
