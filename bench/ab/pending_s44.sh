#!/usr/bin/env bash
# For the next session's device time (H200), after the forty-third session made v38
# (the backward row kernels keep w in registers, tuning bwd_w_regs) the default for
# 16-bit LayerNorm. Four calls:
# a: GPU suite part 4 (tests/test_layer_norm.py) at the new default; the forty-third
#    session ran only the w_regs tests on the GPU (10 passed: same bits as the
#    shared-memory kernels at seven layouts, N = 1024, 4096, 8192 among them).
# b: v38 at the row lengths the forty-third session's A/B left out (it timed N = 1024,
#    4096, 8192): 16-bit LayerNorm at N = 512, 768, 2048, 5120, 12288, 16384, default
#    (w in registers) against bwd_w_regs=False, A/B/B/A; and float32 LayerNorm and
#    16-bit RMSNorm at 1024 / 4096 / 8192 with bwd_w_regs=True against the default
#    (off there), to see whether the default should reach them.
# c: the four sanitizers on the LayerNorm workloads at the new default (fp16, bf16:
#    the forty-third session's a1 / a2 ran the old default; memcheck / racecheck of the
#    forced w_regs workload at fp16 were clean), and racecheck of linear_act_wgmma one
#    dtype a process (all three in one process ran past 540 s with thirteen others
#    beside it and past 370 s alone, float32 and float16 done).
#   bash bench/ab/pending_s44.sh "$OUT" a|b|c
set -uo pipefail
OUT=${1:?usage: pending_s44.sh OUTDIR a|b|c}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
tune() {  # label, extra args...
  local label=$1; shift
  timeout -k 10 280 python3 bench/tune_layer_norm.py --out "$OUT/$label" --reps 50 "$@" \
    > "$OUT/$label.log" 2>&1
  echo "$label rc $?"; grep '^| [0-9]' "$OUT/$label.log"
}
case "${2:?a, b or c}" in
  a) bash bench/ab/full_suite.sh "$OUT" 4 ;;
  b)
    off='{"bwd_w_regs": false}'; on='{"bwd_w_regs": true}'
    tune ln16 --ns 512,768,2048,5120,12288,16384 --dtypes float16,bfloat16 \
      --tunes "$off" '{}' '{}' "$off"
    tune ln32 --ns 1024,4096,8192 --dtypes float32 --tunes '{}' "$on" "$on" '{}'
    tune rms16 --op rms --ns 1024,8192 --dtypes float16,bfloat16 \
      --tunes '{}' "$on" "$on" '{}'
    ;;
  c)
    SAN_TOOLS="memcheck racecheck synccheck initcheck" \
      SAN_OPS="layer_norm:float16 layer_norm:bfloat16" SAN_TIMEOUT=400 \
      timeout -k 10 420 bash bench/gpu_harness.sh "$OUT/san" --stages sanitize &
    for dt in float32 float16 bfloat16; do
      timeout -k 5 420 compute-sanitizer --tool racecheck --error-exitcode 9 \
        --report-api-errors no python3 bench/sanitize.py "linear_act_wgmma:$dt" \
        > "$OUT/wgmma_racecheck_$dt.log" 2>&1 &
    done
    wait
    cat "$OUT/san/summary.md"
    for dt in float32 float16 bfloat16; do
      echo "wgmma racecheck $dt: $(grep -h 'RACECHECK SUMMARY' "$OUT/wgmma_racecheck_$dt.log")"
    done
    ;;
  *) echo "a, b or c" >&2; exit 2 ;;
esac
