#!/usr/bin/env bash
# Written in the twenty-sixth session for the next (an H200; on an H100 the numbers
# are a guide only). Two candidates, about 3 minutes each:
#   a: dropout v8's 'none' backward at four rows a batch (93 registers: 2 blocks of
#      256 an SM) is planned for a nominal 8 blocks an SM: at 4096 x 16384 576
#      blocks = 2.2 waves (the sweep's cell went 77 -> 83 us), at 16384 x 4096 512 =
#      1.9 waves (78.3 us; target 74.3, grad_bias-free 73.0). LaunchConfig.fill
#      plans whole waves of the compiled kernel's real residency. Predicted: fill=1
#      at 4096 x 16384 back to <= 78 us; at 16384 x 4096 within 1 us either way.
#   b: the LayerNorm backward's dW / dB reduction under launch bounds for 2 blocks an
#      SM (tuning dwdb_min_blocks 2: 32 registers, no spills, against 36 at one
#      block). ncu (pending_s26 a, fp16 16384 x 4096): the reduction took 6.7 us in
#      1.94 waves of 1024-thread blocks next to the row kernel's 110.6; one wave
#      should take 2-3 us off the 0.1207 ms pass (target 0.1115). Also fp16 N = 8192
#      / 1024 and float32 N = 8192 (2.2 us behind Liger).
#   c: dropout v9, silu's fast form (sigmoid from exp(-|z|): one ex2, one rcp; SASS
#      of the 16-bit forward 37.6 -> 20.6 instructions an element, below gelu_tanh's
#      22.6 at 76 us), written and checked on the CPU only: first its GPU tests
#      (the range test, ours within twice torch's error) and memcheck, then
#      tune_dropout at 16384 x 4096 with silu's rows a batch re-checked (v8 picked 1
#      for the slow form). Predicted: silu fwd 102-105 -> 74-77 us, bwd 126 -> 105-110.
#   bash bench/ab/pending_s27.sh "$OUT" a|b|c
set -uo pipefail
OUT=${1:?usage: pending_s27.sh OUTDIR a|b|c}
PART=${2:?usage: pending_s27.sh OUTDIR a|b|c}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
case "$PART" in
a)
  C="shipped,fill=1,fill=2,fill=1 step=4,shipped"
  for shape in 16384x4096 4096x16384 1024x65536; do
    mkdir -p "$OUT/td_$shape"
    timeout -k 5 100 python3 bench/tune_dropout.py --out "$OUT/td_$shape" --reps 30 \
      --dtype float16 --shape "$shape" --configs "$C" > "$OUT/td_$shape/log.txt" 2>&1
    echo "tune_dropout fp16 $shape rc $?"
    grep " call " "$OUT/td_$shape/log.txt" | grep -v " p0 "
  done
  ;;
b)
  . bench/ab/tl.sh
  D='{"dwdb_min_blocks": 2}'
  tl b_ln16 120 --reps 30 --op ln --ns 1024,4096,8192 --dtypes float16,bfloat16 \
    --tunes '{}' "$D" '{}' "$D"
  tl b_ln32 90 --reps 30 --op ln --ns 4096,8192 --dtypes float32 --tunes '{}' "$D" '{}' "$D"
  tl b_rms16 60 --reps 30 --op rms --ns 4096 --dtypes float16 --tunes '{}' "$D" '{}' "$D"
  # The float32 forwards 2.5-6 us behind inductor: its kernel is a block a row of 512
  # threads, 28-32 registers, two loops over the row (ncu, pending_s26 a: 92%
  # occupancy, 4.18-4.27 TB/s). Ours streaming has that shape (fwd_stream; H100:
  # 57% slower at N = 4096, never profiled); here with bounds for 4 blocks of 512 an
  # SM (RMSNorm: 32 registers, no spills, ptxas) as inductor runs.
  S='{"fwd_stream": true}'
  S4='{"fwd_stream": true, "fwd_stream_tpr": 512, "fwd_stream_blocks": 4}'
  tl b_stream 120 --reps 30 --op rms --ns 4096,8192 --dtypes float32 --tunes '{}' "$S" "$S4" \
    '{}' "$S" "$S4"
  # LayerNorm's streaming kernel spills 16 bytes at 32 registers (ptxas): 3 blocks, 40.
  S3='{"fwd_stream": true, "fwd_stream_tpr": 512, "fwd_stream_blocks": 3}'
  tl b_stream_ln 90 --reps 30 --op ln --ns 4096 --dtypes float32 --tunes '{}' "$S" "$S3" \
    '{}' "$S" "$S3"
  tar czf "$OUT/pending_s27_b.tgz" -C "$TL_DIR" .
  ;;
c)
  V=$(mktemp -d)
  TESTS="tests/test_dropout.py tests/test_nonfinite.py" SAN_OPS="dropout" \
    SAN_TOOLS="memcheck" SAN_TIMEOUT=120 timeout -k 10 240 bash bench/gpu_harness.sh "$V" \
    --stages tests,sanitize --workers 14 -k "silu or twice_torch or match_reference" \
    --timeout 120 > "$V/harness.out" 2>&1
  echo "harness rc $?"
  cat "$V/summary.md"
  tar czf "$OUT/pending_s27_c.tgz" -C "$V" .
  for dt in float16 bfloat16; do
    mkdir -p "$OUT/td_$dt"
    timeout -k 5 120 python3 bench/tune_dropout.py --out "$OUT/td_$dt" --reps 30 --dtype "$dt" \
      --configs "shipped,unroll=2,unroll=4,shipped" --acts silu > "$OUT/td_$dt/log.txt" 2>&1
    echo "tune_dropout $dt rc $?"
    grep " call " "$OUT/td_$dt/log.txt" | grep -v " p0 "
  done
  ;;
*) echo "PART must be a, b or c" >&2; exit 2 ;;
esac
