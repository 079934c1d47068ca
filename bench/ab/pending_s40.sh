#!/usr/bin/env bash
# Fortieth session, H200. a: does the 16-bit gelu forward's time follow its instruction
# count at a fixed plan (bench/ab/gelu_cost.py)? v11 took 8 of 223 instructions an 8
# elements away and moved nothing; gelu_tanh (181 at unroll 2) runs 74 us against
# gelu's 85. Predicted, if the count sets the time past the memory floor: deg3 (207)
# ~81 us, deg1 (191) ~77, tanh1 (174) ~74-75, none1 (113) ~71-72; if it does not, deg3
# and deg1 within 1 us of deg5 and tanh1's gain comes from something else. Two passes,
# variants alternating.
# b: v17 (the 16-bit vector forward's gelu takes the dropout scale in its exponential,
#    223 -> 215 SASS instructions per 8 elements, and 16-byte rows addressed by one
#    64-bit multiply: 215 -> 213 for gelu, 'none' fwd 237 -> 233 per 2 rows, the 16-bit
#    backward kernels 4-8 fewer) against the head before it (ab_old/, `git archive`).
#    Predicted from a's slope: gelu fwd 85.2 -> 83.2 us; 'none' fwd and the backward
#    0-1 us faster.
# c: the warp-specialised gelu forward prototype (bench/ab/ws_gelu.py: one producer
#    lane streams rows by cp.async.bulk into a 4-slot ring, 8 consumer warps compute;
#    219 instructions a row piece). Predicted, if the coupling of loads and issue costs
#    the ~13 us above the floor: 72-77 us; if not, about 85.
# d: v17 as shipped: the GPU tests of test_dropout and test_nonfinite (v17's addressing
#    is the backward's too), memcheck of the dropout workload at fp16 and bf16; and Estrin's
#    order for v17's gelu polynomial (bench/ab/gelu_cost.py estrin: 222 instructions,
#    40 registers, three dependent steps after the reciprocal instead of six) against
#    v17 (deg5), alternating. Predicted: even or slower if the count sets the time
#    (+9 instructions, 6 blocks an SM); faster if the FFMA chain's latency does (a's
#    degrees cut the chain and the count together).
# e: d's memcheck again (d passed SAN_OPS comma-separated; the harness splits on spaces).
# f: v17's gelu forward across N (numba and eager, fp16 / bf16, M x N = 2^26), as the
#    thirty-ninth session's v15 sweep (RESULTS.md). Predicted: 0.5-1 us under v15's
#    83.3-86.0 at every N.
# g: the 16-bit LayerNorm backward at 16384 x 4096 on 3 blocks an SM: the row kernel
#    without the next row's prefetch under launch bounds for 3 blocks of 256 (80
#    registers, no spills, ptxas 13.0; shipped: 128 with the prefetch, 2 blocks), the
#    lever the thirty-fifth session's ncu pointed at (38% of the row kernel's cycles at
#    the row's barrier, nothing else to issue). tune_layer_norm A/B, shipped first and
#    last. Predicted: the row kernel 1-3 us faster, the dW / dB reduction ~1 us slower
#    (396 partial rows against 264): between -2 and +2 us; the knob alone
#    (prefetch off, 2 blocks) slower.
# h: the dW / dB reduction's block shape, never timed on the H200 (reduce_block (32, 32):
#    256 blocks of 1024 threads, each thread 8-9 of the 264 partial rows in rounds of
#    4): (16, 32) and (8, 32) spread the columns over 2x / 4x the blocks, (32, 16)
#    halves the row slices; dwdb_unroll 8 (one round of 8). fp16 LayerNorm bwd at
#    16384 x 4096, shipped first and last. Predicted: within 1 us either way (the
#    reduction is ~5 us of the backward's 115 and mostly L2 latency rounds).
#   bash bench/ab/pending_s40.sh "$OUT" a|b|c|d|e|f|g|h
set -uo pipefail
OUT=${1:?usage: pending_s40.sh OUTDIR a}
PART=${2:?usage: pending_s40.sh OUTDIR a}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
case "$PART" in
a)
  for pass in 1 2; do
    for v in deg5 deg3 deg1 tanh1 none1; do
      timeout -k 5 120 python3 bench/ab/gelu_cost.py "$v" >> "$OUT/a_cost.log" 2>&1
      echo "pass $pass $v rc $?" >> "$OUT/a_cost.log"
    done
  done
  grep -E "gpu_us|rc [^0]|Error" "$OUT/a_cost.log"
  ;;
b)
  for pass in 1 2; do
    for tree in old new; do
      pp="$PWD"; [ "$tree" = old ] && pp="$PWD/ab_old"
      PYTHONPATH="$pp" timeout -k 5 200 python3 "$pp/bench/tune_dropout.py" --out "$OUT/b_$tree$pass" \
        --reps 30 --configs shipped --acts gelu,none --cases fwd,bwd > "$OUT/b_${tree}${pass}.log" 2>&1
      echo "$tree pass $pass rc $?"; grep " gpu \| call " "$OUT/b_${tree}${pass}.log" | head -12
    done
  done
  for tree in old new; do
    pp="$PWD"; [ "$tree" = old ] && pp="$PWD/ab_old"
    PYTHONPATH="$pp" timeout -k 5 200 python3 "$pp/bench/tune_dropout.py" --out "$OUT/b_bf_$tree" \
      --reps 30 --dtype bfloat16 --configs shipped --acts gelu,none --cases fwd,bwd \
      > "$OUT/b_bf_${tree}.log" 2>&1
    echo "bf16 $tree rc $?"; grep " gpu \| call " "$OUT/b_bf_${tree}.log" | head -12
  done
  ;;
c)
  timeout -k 5 200 python3 bench/ab/ws_gelu.py --rows 36,18,72 > "$OUT/c_ws.log" 2>&1
  echo "ws rc $?"
  timeout -k 5 200 python3 bench/ab/ws_gelu.py --rows 36 --stages 2 >> "$OUT/c_ws.log" 2>&1
  echo "ws2 rc $?"
  timeout -k 5 200 python3 bench/ab/ws_gelu.py --rows 36,72 --dtype bfloat16 >> "$OUT/c_ws.log" 2>&1
  echo "ws bf16 rc $?"; cat "$OUT/c_ws.log" | tail -20
  ;;
d)
  for pass in 1 2; do
    for v in deg5 estrin; do
      timeout -k 5 120 python3 bench/ab/gelu_cost.py "$v" >> "$OUT/d_estrin.log" 2>&1
      echo "pass $pass $v rc $?" >> "$OUT/d_estrin.log"
    done
  done
  grep -E "gpu_us|rc [^0]|Error" "$OUT/d_estrin.log"
  timeout -k 5 420 python3 -m pytest -q -p no:cacheprovider -n 14 -m "not ptx" --timeout 150 \
    tests/test_dropout.py tests/test_nonfinite.py > "$OUT/d_tests.log" 2>&1
  echo "tests rc $?"; tail -2 "$OUT/d_tests.log"; grep -E "^FAILED" "$OUT/d_tests.log" | head
  SAN_OPS="dropout:float16 dropout:bfloat16" SAN_TOOLS="memcheck" SAN_TIMEOUT=100 \
    timeout -k 10 220 bash bench/gpu_harness.sh "$OUT/san" --stages sanitize > "$OUT/san.out" 2>&1
  echo "sanitize rc $?"; grep -E "memcheck" "$OUT/san/summary.md"
  ;;
e)
  SAN_OPS="dropout:float16 dropout:bfloat16" SAN_TOOLS="memcheck" SAN_TIMEOUT=100 \
    timeout -k 10 220 bash bench/gpu_harness.sh "$OUT/san" --stages sanitize > "$OUT/san.out" 2>&1
  echo "sanitize rc $?"; grep -E "memcheck" "$OUT/san/summary.md"
  ;;
f)
  SHAPES=131072x512,87381x768,65536x1024,32768x2048,16384x4096,13107x5120,8192x8192
  SHAPES=$SHAPES,5461x12288,4096x16384,1024x65536
  timeout -k 10 300 python3 bench/dropout.py --shapes "$SHAPES" --dtypes float16,bfloat16 \
    --activations gelu --directions fwd --providers numba,eager --reps 30 --warmup 5 \
    --no-host-overhead --no-memory --json "$OUT/gelu_fwd_sweep.json" > "$OUT/f_sweep.log" 2>&1
  echo "sweep rc $?"; tail -30 "$OUT/f_sweep.log"
  ;;
g)
  timeout -k 10 400 python3 bench/tune_layer_norm.py --out "$OUT/g" --reps 50 --ns 4096 \
    --dtypes float16,bfloat16 --tunes '{}' '{"prefetch": false, "bwd_min_blocks": 3}' \
    '{"prefetch": false}' '{}' > "$OUT/g_ln.log" 2>&1
  echo "tune rc $?"; tail -14 "$OUT/g_ln.log"
  ;;
h)
  timeout -k 10 400 python3 bench/tune_layer_norm.py --out "$OUT/h" --reps 50 --ns 4096 \
    --dtypes float16 --tunes '{}' '{"reduce_block": [16, 32]}' '{"reduce_block": [8, 32]}' \
    '{"reduce_block": [32, 16]}' '{"dwdb_unroll": 8}' '{}' > "$OUT/h_ln.log" 2>&1
  echo "tune rc $?"; tail -12 "$OUT/h_ln.log"
  ;;
*) echo "unknown part $PART"; exit 2 ;;
esac
