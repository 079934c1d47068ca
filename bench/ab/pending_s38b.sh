#!/usr/bin/env bash
# Thirty-eighth session, H200: why v13's staged backward loses 8-12 us with a bias grad.
# pending_s38.sh a measured the ring (LaunchConfig.stages) at fp16 / bf16 16384 x 4096:
# forwards 0.5-3 us slower (refuted), but the backward without a bias grad 0.7-2 us
# faster than shipped ('none' 73.2 -> 72.2-72.5, gelu 107.5 -> 105.2-105.5 at stages
# 3-4) and with one 10 / 4 us slower ('none' 75 -> 85, gelu 110 -> 114). Shipped pays
# 2-3 us for the bias grad. The with-bias grid is one wave of the kernel's resident
# blocks (fill 1; 5 an SM at 48 registers against shipped's 2), without it two.
#   a: tune_dropout fp16 then bf16, configs shipped, stages=3 and its fill 2 / 3 / 0,
#      reduction kernel and step 4, stages=2 fill=2, shipped; acts none, gelu.
#      Prediction: if the one wave's tail is the cost, stages=3 fill=2 puts the 'none'
#      backward with its bias grad at 74-75 us and gelu's at 107-108 (nobias + 2-3).
#   b (after pending_s38c.sh a): 512-thread blocks for the staged backward, fp16 / bf16.
#      Prediction: one fence and one arrival per 16 warps (264 blocks in one wave, as
#      shipped) put the 'none' backward with its bias grad at 74-75 us, gelu's at ~107.
#   c: the backward without a bias grad (where the ring won: fp16 'none' 73.5 -> 71.1,
#      gelu 107.8 -> 103.5 at stages=3 fill=3) across the sweep's other row lengths,
#      fp16, against shipped and shipped at fill 3. Prediction: 1-4 us faster at every
#      N, the most where rows are long enough for whole strips (N >= 1024).
#   bash bench/ab/pending_s38b.sh "$OUT" a|b|c
set -uo pipefail
OUT=${1:?usage: pending_s38b.sh OUTDIR a|b|c}
PART=${2:?usage: pending_s38b.sh OUTDIR a|b|c}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
case "$PART" in
a)
  for dt in float16 bfloat16; do
    cfgs="shipped,stages=3,stages=3 fill=2,stages=3 fill=3,stages=3 fill=0"
    cfgs="$cfgs,stages=3 reduce kernel,stages=3 step=4,stages=2 fill=2,shipped"
    timeout -k 5 200 python3 bench/tune_dropout.py --out "$OUT/td_$dt" --reps 30 --dtype "$dt" \
      --configs "$cfgs" --acts none,gelu > "$OUT/td_$dt.log" 2>&1
    echo "tune $dt rc $?"; grep " call " "$OUT/td_$dt.log" | grep -v " p0 " | grep " bwd"
    grep "^registers" "$OUT/td_$dt/tune_dropout.md" | tr ';' '\n'
  done
  ;;
b)
  for dt in float16 bfloat16; do
    cfgs="shipped,stages=3,stages=3 threads=512,stages=2 threads=512"
    cfgs="$cfgs,stages=3 threads=512 fill=2,stages=3 threads=512 step=4,shipped"
    timeout -k 5 200 python3 bench/tune_dropout.py --out "$OUT/tdb_$dt" --reps 30 --dtype "$dt" \
      --configs "$cfgs" --acts none,gelu > "$OUT/tdb_$dt.log" 2>&1
    echo "tune $dt rc $?"; grep " call " "$OUT/tdb_$dt.log" | grep -v " p0 " | grep " bwd"
    grep "^registers" "$OUT/tdb_$dt/tune_dropout.md" | tr ';' '\n' | grep -v "^ *shipped"
  done
  ;;
c)
  for shape in 131072x512 87381x768 65536x1024 13107x5120 5461x12288 1024x65536 16384x4096; do
    cfgs="shipped,fill=3,stages=3 fill=2,stages=3 fill=3,stages=4 fill=3,shipped"
    timeout -k 5 200 python3 bench/tune_dropout.py --out "$OUT/tdc_$shape" --reps 30 \
      --dtype float16 --shape "$shape" --configs "$cfgs" --acts none,gelu \
      --cases "bwd nobias" > "$OUT/tdc_$shape.log" 2>&1
    echo "tune $shape rc $?"; grep " call " "$OUT/tdc_$shape.log" | grep " bwd"
  done
  ;;
*) echo "PART must be a, b or c" >&2; exit 2 ;;
esac
