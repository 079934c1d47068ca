#!/usr/bin/env bash
# For the next session's device time (H200), after the forty-third session made v38
# (the backward row kernels keep w in registers, tuning bwd_w_regs) the default for
# 16-bit LayerNorm. Five calls (d first: a win there changes what a-c should run on):
# a, a5: GPU suite parts 4 and 5 (tests/test_layer_norm.py, its same-bits tests in
#    part 5) at the new default; the forty-third session ran only the w_regs tests on
#    the GPU (10 passed: same bits as the shared-memory kernels at seven layouts, N =
#    1024, 4096, 8192 among them). Two calls: part 4 alone took 502 s before.
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
# d: the cp.async ring on 3 blocks an SM (tuning bwd_stages 2 / 3 with bwd_min_blocks 3),
#    never timed together. The thirty-fifth session's ncu puts the 16-bit row kernel
#    at N = 4096 on a per-warp latency chain (10.5 cycles an instruction, 38% at the
#    row's barrier, 16 warps an SM, issue 0.37), so more rows an SM should pay; 3
#    blocks without any lookahead won back 7.5 of the prefetch's 13 us (fortieth
#    session: 121.6 against 129.3 at 2 blocks), and the ring is the lookahead that
#    leaves the registers (ptxas, sm_90, one row a block: LayerNorm 80 registers,
#    spills 16 / 8 bytes at 2 stages, 20 / 12 at 3; RMSNorm 80, none). Predicted:
#    fp16 / bf16 LayerNorm bwd 16384 x 4096 115 -> 112-116, RMSNorm 112 -> 109-113;
#    a loss if the ring's own cost (+3.5 us at 2 blocks) or the 396 dW / dB partial
#    rows eat the third block's gain. Beside it the bwd_acc_smem candidate (forty-third
#    session, CPU): dw / db accumulators in shared memory, so the register prefetch
#    itself fits 3 blocks (w in shared memory; ptxas: 80 registers, no spills, where
#    without it 144 bytes spill), for 16 more shared-memory accesses a row a thread
#    (v38 found 4 fewer worth nothing at 4096). Predicted: 115 -> 110-114, RMSNorm
#    112 -> 108-112 (its memcheck / racecheck first: layer_norm_acc_smem:float16).
#   bash bench/ab/pending_s44.sh "$OUT" a|a5|b|c|d
set -uo pipefail
OUT=${1:?usage: pending_s44.sh OUTDIR a|a5|b|c|d|e}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
tune() {  # label, extra args...
  local label=$1; shift
  timeout -k 10 280 python3 bench/tune_layer_norm.py --out "$OUT/$label" --reps 50 "$@" \
    > "$OUT/$label.log" 2>&1
  echo "$label rc $?"; grep '^| [0-9]' "$OUT/$label.log"
}
case "${2:?a, a5, b, c, d or e}" in
  a) bash bench/ab/full_suite.sh "$OUT" 4 ;;
  a5) bash bench/ab/full_suite.sh "$OUT" 5 ;;
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
  d)
    bash bench/ab/san_pair.sh "$OUT" layer_norm_acc_smem:float16 d
    r2='{"bwd_stages": 2, "bwd_min_blocks": 3}'; r3='{"bwd_stages": 3, "bwd_min_blocks": 3}'
    as3='{"bwd_acc_smem": true, "bwd_w_regs": false, "bwd_min_blocks": 3}'
    tune ring_ln --ns 4096 --dtypes float16,bfloat16 \
      --tunes '{}' "$r2" "$r3" "$as3" "$as3" "$r3" "$r2" '{}'
    tune ring_rms --op rms --ns 4096 --dtypes float16,bfloat16 \
      --tunes '{}' "$r2" "$r3" "$as3" "$as3" "$r3" "$r2" '{}'
    ;;
  e)
    # The default after b: w in registers for 16-bit rows of two or more groups a
    # thread, LayerNorm and RMSNorm; not at one group (N = 768: 125 against 116 us).
    off='{"bwd_w_regs": false}'; on='{"bwd_w_regs": true}'
    tune ln1g --ns 768,1600 --dtypes float16,bfloat16 --tunes '{}' "$on" "$on" '{}'
    tune rmsd --op rms --ns 1024,4096,8192 --dtypes float16,bfloat16 \
      --tunes "$off" '{}' '{}' "$off"
    timeout -k 10 200 python3 -m pytest -q -p no:cacheprovider -n 8 \
      tests/test_layer_norm.py -k "w_regs" > "$OUT/tests_w_regs.log" 2>&1
    echo "tests rc $?: $(tail -1 "$OUT/tests_w_regs.log")"
    bash bench/ab/san_pair.sh "$OUT" layer_norm:float16 e16 &
    bash bench/ab/san_pair.sh "$OUT" layer_norm:bfloat16 ebf &
    wait
    ;;
  *) echo "a, a5, b, c, d or e" >&2; exit 2 ;;
esac
