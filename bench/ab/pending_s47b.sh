#!/usr/bin/env bash
# Forty-seventh session, after pending_s47.sh: v40 (every thread of the flagged dW / dB
# kernel polled its own rows' flags) read 1-6.5 us slower than v39 at every 16-bit
# cell (LayerNorm fp16 4096 113.3 -> 119.7), and sanitize.py had not parsed. v40b:
# only warp 0 of each dW / dB block polls (5 loads a sweep: lane tx reads flags tx +
# 32 k, a ballot into shared memory), every flag on its own 128-byte line; the rest of
# the block waits at a barrier. Hypothesis: v40's ~250k threads polling a few L2
# lines slowed the row kernel's last blocks, which share that L2.
# Calls (t about 3 min, a about 4):
# t: the candidate's GPU tests (-k dwdb_flags), memcheck and racecheck of
#    layer_norm_flags (fp16; its first run: the script did not parse before).
# a: A/B/C/C/B/A, LayerNorm and RMSNorm, fp16 / bf16, N = 1024 / 2048 / 4096:
#    {} (v39), fl (v40b), and bwd_grid 128 (no tuning change: 16384 / 32768 / 65536
#    rows in blocks of 2 / 4 / 8 rows divide into 128 blocks evenly, 64 steps each,
#    where 132 leaves 8 blocks a 63rd step while 124 idle; 4 SMs idle instead).
#    Predicted: fl within 1 us of {} (the tail is ~1.8 us; the loads it saves are one
#    L2 round), bwd_grid 128 +1-3 us (3% fewer bytes in flight) unless the tail is
#    dearer than the lost SMs. Then RMSNorm without w (105.1 us against LayerNorm's
#    101.4 without w and b; pending_s47 t: bwd_red_direct False 99.4, bwd_blocks_per_sm
#    2 100.6): affine_share at 16384 x 4096 and 8192 x 8192, default and
#    bwd_red_direct False, both dtypes, in one machine start, to see which rows the
#    shuffled step is faster on.
#   bash bench/ab/pending_s47b.sh "$OUT" t|a
set -uo pipefail
OUT=${1:?usage: pending_s47b.sh OUTDIR t|a}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
case "${2:?t or a}" in
  t)
    timeout -k 10 200 python3 -m pytest -q -p no:cacheprovider -n 8 --timeout 150 \
      tests/test_layer_norm.py -k "dwdb_flags" > "$OUT/tests_fl.log" 2>&1
    echo "tests rc $?: $(tail -1 "$OUT/tests_fl.log")"
    bash bench/ab/san_pair.sh "$OUT" layer_norm_flags:float16 fl
    ;;
  a)
    fl='{"dwdb_flags": true}'
    g='{"bwd_grid": 128}'
    for op in ln rms; do
      timeout -k 10 160 python3 bench/tune_layer_norm.py --out "$OUT/flb_$op" --reps 50 \
        --op "$op" --ns 1024,2048,4096 --dtypes float16,bfloat16 \
        --tunes '{}' "$fl" "$g" "$g" "$fl" '{}' > "$OUT/flb_$op.log" 2>&1
      echo "flb_$op rc $?"
    done
    for shape in 16384x4096 8192x8192; do
      for t in '{}' '{"bwd_red_direct": false}'; do
        timeout -k 10 120 python3 bench/ab/affine_share.py --shape "$shape" --tune "$t" \
          > "$OUT/as_$shape.log" 2>&1
        echo "affine_share $shape $t rc $?"; grep '^| [lr]' "$OUT/as_$shape.log"
      done
    done
    ;;
  *) echo "t or a" >&2; exit 2 ;;
esac
