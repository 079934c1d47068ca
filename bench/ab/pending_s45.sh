#!/usr/bin/env bash
# For the next session's device time (H200), after the forty-fourth session revised
# v38's default (w in registers for 16-bit backward rows of two or more groups a
# thread, LayerNorm and RMSNorm; off at one group a thread and at float32) and wrote
# the bwd_row_bar candidate. On the GPU that session ran the revised default's w_regs
# tests (15 passed) and memcheck / racecheck of the forced workload at bfloat16, not
# the rest of the LayerNorm file: two of its tests (bwd_rms_sum1's name checks) were
# fixed on the CPU after that call. Four calls, in this order (c first: its candidate
# decides whether s should wait for a new default):
# c: (1) what the dW / dB partials cost the 16-bit backward at 16384 x 4096
#    (ab/affine_share.py: with w and b, w, b, neither). The fortieth session's
#    ab/ln_dwdb_bound.py put the reduction kernel's work at 4.5 us (115.6 -> 110.8
#    with it a no-op); neither w nor b also drops the row kernel's 8.65 MB of
#    partial-row stores. Predicted: LayerNorm without w and b 106-110, w only within
#    1 us of RMSNorm's 112. (2) memcheck / racecheck of the bwd_row_bar workload, then
#    the GPU tests of row_bar, sum1 and w_regs (the named barriers run only here; the
#    simulator runs the block barrier in their place). (3) fewer partial rows:
#    bwd_block 512 puts rows of 256 threads (N = 4096) two a block and rows of 128
#    (2048) four, one 512-thread block an SM at 128 registers (the same 16 warps),
#    132 partial rows instead of 264 / 528; the price is the multi-row kernel (no
#    one-row uniform row index, no direct cross-warp sums, a barrier over the block's
#    16 warps), which bwd_row_bar (candidate: a named barrier a row) takes back to a
#    barrier over the row's 8 warps. Predicted, us, 16-bit LayerNorm 4096: bwd_block
#    512 alone -2 to +3 (the reduction's 4.5 about halved against the row kernel's
#    loss); with bwd_row_bar 1-2 under that (112-115); N = 2048 the same; N = 1024
#    (64 x 2 already, a barrier over 4 warps -> 2) bwd_row_bar 0-1 faster. RMSNorm the
#    same less ~1 us (half the partial rows to save).
# s: the norms sweep at the revised default, for RESULTS.md's table and plots from one
#    run (the last whole sweep is the thirty-seventh session's, v37). Carry `.whl`
#    (Liger; see norms_sweep.sh). Predicted: 16-bit RMSNorm backward 1-1.5 us faster at
#    N = 1024 / 8192 than at v37, LayerNorm backward 1-2 us faster at N = 512 / 2048 /
#    5120 / 8192 (v38), the rest within the start-to-start drift (~1 us); 30 of 120
#    cells behind at most.
# a: GPU suite part 4 (tests/test_layer_norm.py but the same-bits tests) at the
#    revised default (part 5's same-bits tests that the revision touches run in c).
# c2: the four sanitizers on the LayerNorm workloads at the revised default.
# After c (forty-fifth session: bwd_block 512 with bwd_row_bar won at 16-bit N = 2048 /
# 4096, v39 made them the default), two more modes:
# t: GPU suite part 4 at v39, the four sanitizers on the LayerNorm workloads running
#    beside it (one call).
# b: part 5's backward same-bits tests at v39 (the forward's are untouched).
#   bash bench/ab/pending_s45.sh "$OUT" c|s|a|c2|t|b
set -uo pipefail
OUT=${1:?usage: pending_s45.sh OUTDIR c|s|a|c2|t|b}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
case "${2:?c, s, a, c2, t or b}" in
  c)
    timeout -k 10 120 python3 bench/ab/affine_share.py > "$OUT/affine_share.log" 2>&1
    echo "affine_share rc $?"; cat "$OUT/affine_share.log"
    bash bench/ab/san_pair.sh "$OUT" layer_norm_row_bar:float16 rb
    timeout -k 10 200 python3 -m pytest -q -p no:cacheprovider -n 8 --timeout 150 \
      tests/test_layer_norm.py -k "row_bar or sum1 or w_regs" > "$OUT/tests_c.log" 2>&1
    echo "tests rc $?: $(tail -1 "$OUT/tests_c.log")"
    b5='{"bwd_block": 512}'; rb='{"bwd_row_bar": true}'
    b5rb='{"bwd_block": 512, "bwd_row_bar": true}'
    for op in ln rms; do
      timeout -k 10 150 python3 bench/tune_layer_norm.py --out "$OUT/rows_$op" --reps 50 \
        --op "$op" --ns 1024,2048,4096 --dtypes float16,bfloat16 \
        --tunes '{}' "$b5" "$b5rb" "$rb" "$rb" "$b5rb" "$b5" '{}' > "$OUT/rows_$op.log" 2>&1
      echo "rows_$op rc $?"; grep '^| [0-9]' "$OUT/rows_$op.log"
    done
    ;;
  s) bash bench/ab/norms_sweep.sh "$OUT" h200_s45_v38 ;;
  a) bash bench/ab/full_suite.sh "$OUT" 4 ;;
  c2)
    SAN_TOOLS="memcheck racecheck synccheck initcheck" \
      SAN_OPS="layer_norm:float16 layer_norm:bfloat16" SAN_TIMEOUT=400 \
      timeout -k 10 420 bash bench/gpu_harness.sh "$OUT/san" --stages sanitize
    cat "$OUT/san/summary.md"
    ;;
  t)
    ( SAN_TOOLS="memcheck racecheck synccheck initcheck" \
      SAN_OPS="layer_norm:float16 layer_norm:bfloat16" SAN_TIMEOUT=500 \
      timeout -k 10 540 bash bench/gpu_harness.sh "$OUT/san" --stages sanitize \
      > "$OUT/san.log" 2>&1 ) &
    TESTS=tests/test_layer_norm.py timeout -k 10 550 bash bench/gpu_harness.sh \
      "$OUT/part4" --stages tests --workers 12 -k "not same_bits"
    tail -3 "$OUT/part4/pytest.log"
    wait
    cat "$OUT/san/summary.md"
    ;;
  b)
    TESTS=tests/test_layer_norm.py timeout -k 10 560 bash bench/gpu_harness.sh \
      "$OUT/part5" --stages tests --workers 14 -k "same_bits and not forward"
    tail -3 "$OUT/part5/pytest.log"
    ;;
  *) echo "c, s, a, c2, t or b" >&2; exit 2 ;;
esac
