#!/usr/bin/env bash
# For the next session's device time (H200), after the forty-fourth session revised
# v38's default (w in registers for 16-bit backward rows of two or more groups a
# thread, LayerNorm and RMSNorm; off at one group a thread and at float32). On the GPU
# that session ran the revised default's w_regs tests (15 passed) and memcheck /
# racecheck of the forced workload at bfloat16, not the rest of the LayerNorm file:
# two of its tests (bwd_rms_sum1's name checks) were fixed on the CPU after that call.
# Four calls:
# s: the norms sweep at the revised default, for RESULTS.md's table and plots from one
#    run (the last whole sweep is the thirty-seventh session's, v37). Carry `.whl`
#    (Liger; see norms_sweep.sh). Predicted: 16-bit RMSNorm backward 1-1.5 us faster at
#    N = 1024 / 8192 than at v37 (the forty-fourth session's A/B), LayerNorm backward
#    2-3 us faster at N = 512 / 1024 / 2048 / 5120 / 8192 (v38), the rest unchanged
#    within the start-to-start drift (~1 us); 30 of 120 cells behind at most.
# a, a5: GPU suite parts 4 and 5 (tests/test_layer_norm.py) at the revised default.
# c: the four sanitizers on the LayerNorm workloads at the revised default (RMSNorm's
#    row kernels now keep w in registers by default); first, on the idle GPU, what the
#    dW / dB partials cost the 16-bit backward at 16384 x 4096 (ab/affine_share.py: with
#    w and b, w, b, neither). The fortieth session's ab/ln_dwdb_bound.py put the
#    reduction kernel's work at 4.5 us (115.6 -> 110.8 with it a no-op); neither w nor b
#    also drops the row kernel's 8.65 MB of partial-row stores and its accumulators.
#    Predicted: LayerNorm without w and b 106-110 (RMSNorm's 112 -> 106-109), w only
#    within 1 us of RMSNorm's. Under 106 would say the row kernel's own partial rows
#    (its end: all blocks store at once) cost more than their bytes. Then fewer
#    partial rows by a pure tuning, never timed at these rows: bwd_block 512, so rows of
#    256 threads (N = 4096) go two a block and rows of 128 (2048) four, one 512-thread
#    block an SM at 128 registers (the same 16 warps), 132 partial rows instead of 264
#    / 528 (4.3 MB / 2.2 MB instead of 8.65). The price: the multi-row kernel (no
#    one-row uniform row index, no direct cross-warp sums: the barrier spans 16 warps).
#    Predicted: -2 to +3 us at 4096 (the reduction's 4.5 us about halved against the
#    row kernel's loss), the same at 2048.
#   bash bench/ab/pending_s45.sh "$OUT" s|a|a5|c
set -uo pipefail
OUT=${1:?usage: pending_s45.sh OUTDIR s|a|a5|c}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
case "${2:?s, a, a5 or c}" in
  s) bash bench/ab/norms_sweep.sh "$OUT" h200_s45_v38 ;;
  a) bash bench/ab/full_suite.sh "$OUT" 4 ;;
  a5) bash bench/ab/full_suite.sh "$OUT" 5 ;;
  c)
    timeout -k 10 150 python3 bench/ab/affine_share.py > "$OUT/affine_share.log" 2>&1
    echo "affine_share rc $?"; cat "$OUT/affine_share.log"
    b5='{"bwd_block": 512}'
    for op in ln rms; do
      timeout -k 10 200 python3 bench/tune_layer_norm.py --out "$OUT/rows_$op" --reps 50 \
        --op "$op" --ns 2048,4096 --dtypes float16,bfloat16 --tunes '{}' "$b5" "$b5" '{}' \
        > "$OUT/rows_$op.log" 2>&1
      echo "rows_$op rc $?"; grep '^| [0-9]' "$OUT/rows_$op.log"
    done
    SAN_TOOLS="memcheck racecheck synccheck initcheck" \
      SAN_OPS="layer_norm:float16 layer_norm:bfloat16" SAN_TIMEOUT=400 \
      timeout -k 10 420 bash bench/gpu_harness.sh "$OUT/san" --stages sanitize
    cat "$OUT/san/summary.md"
    ;;
  *) echo "s, a, a5 or c" >&2; exit 2 ;;
esac
