#!/usr/bin/env bash
# Sixteenth session, second GPU call (about 8 minutes on an H100):
#  1. the shipped defaults against their predecessors, run twice each: fwd_lean_regs
#     (float32 N = 1024 / 2048 / 4096, now two capped groups) against None; v13
#     (16-bit N = 12288) against bwd_lean False;
#  2. forward candidates for the cells behind inductor at long rows, tuning only:
#     the staged forward (row in shared memory) at N = 12288 / 16384, float32 and
#     fp16, at its own layout and at 8 groups a thread; the streaming forward made
#     persistent (1 or 2 blocks an SM) at float32 N = 65536, so its second and third
#     passes over a row find it in L2;
#  3. GPU tests of LayerNorm, the torch front end and the fast path; memcheck and
#     racecheck on the layer_norm workloads.
#   bash bench/ab/s16_b.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: s16_b.sh OUTDIR}
TL_DIR="$OUT"
. bench/ab/tl.sh
tl ship_regs 120 --reps 30 --ns 1024,2048,4096 --dtypes float32 \
  --tunes '{}' '{"fwd_lean_regs": null}' '{}' '{"fwd_lean_regs": null}'
tl ship_lean 90 --reps 30 --ns 12288 --dtypes float16 \
  --tunes '{}' '{"bwd_lean": false}' '{}'
ST='{"fwd_staged": true}'
ST8='{"fwd_staged": true, "fwd_words": 8}'
tl staged 150 --reps 30 --ns 12288,16384 --dtypes float32,float16 \
  --tunes '{}' "$ST" "$ST8" '{}'
tl stream 90 --reps 30 --ns 65536 --dtypes float32 \
  --tunes '{}' '{"fwd_blocks_per_sm": 1}' '{"fwd_blocks_per_sm": 2}' '{}'
TESTS="tests/test_layer_norm.py tests/test_torch_frontend.py tests/test_fast_path.py" \
  SAN_OPS="layer_norm:float16 layer_norm:bfloat16 layer_norm:float32" \
  SAN_TOOLS="memcheck racecheck" SAN_TIMEOUT=200 \
  timeout -k 10 330 bash bench/gpu_harness.sh "$OUT/verify" --stages tests,sanitize --workers 14
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/verify/pytest.log" | tail -15
