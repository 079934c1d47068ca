#!/usr/bin/env bash
# Thirteenth session's fourth GPU call:
#  1. GPU tests of this session's changes and the test-trimming helper's commits
#     (wgmma, LayerNorm row slots / streaming accumulators / wide backward, dropout
#     final_step, profile_op), four workers;
#  2. the LayerNorm forward's back-to-back timeline with the benchmark's own callables;
#  3. LayerNorm backward, 16-bit N = 8192 (0.89 of Liger in the sweep; ncu: the same
#     132 x 512 geometry and 128 registers as Liger's kernel, 189.5 against 162.8 us):
#     without the prefetch (Liger has none) and v10's one group a thread.
#   bash bench/ab/ab_s13d.sh "$OUT"     (about 9 minutes on an H100)
set -uo pipefail
OUT=${1:?usage: ab_s13d.sh OUTDIR}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
nvidia-smi -L
timeout -k 5 290 python3 -m pytest -q -p no:cacheprovider -n 4 tests/test_wgmma.py \
  "tests/test_dropout.py::test_bias_grad_last_block_reduction" \
  "tests/test_dropout.py::test_bad_launch_config" \
  "tests/test_bench_examples.py::test_profile_op_builds_every_op" \
  tests/test_layer_norm.py -k "wgmma or last_block_reduction or bad_launch_config or profile_op or row_slots or streaming_backward_accumulators or wide_backward" \
  > "$OUT/tests.log" 2>&1
echo "tests rc $?"; tail -3 "$OUT/tests.log"
timeout -k 5 150 python3 bench/ab/ln_timeline.py --out "$OUT/tl" > "$OUT/timeline.log" 2>&1
echo "timeline rc $?"
timeout -k 5 110 python3 bench/tune_layer_norm.py --out "$OUT/ln" --reps 30 --ns 8192 \
  --dtypes float16 --tunes '{}' '{"prefetch": false}' '{"bwd_wide": true}' '{}' \
  > "$OUT/ln_ab.log" 2>&1
echo "ln rc $?"
rm -f "$OUT"/ln/*.md "$OUT"/tl/trace_*
tail -14 "$OUT/timeline.log"
tail -12 "$OUT/ln_ab.log"
