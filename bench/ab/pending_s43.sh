#!/usr/bin/env bash
# For the next session's device time (H200), five calls:
# a1, a2: every sanitizer on every op at this tree (gpu_harness.sh's sanitize stage:
#    dropout, layer_norm (a process per dtype), attention, linear_act, linear_act_wgmma,
#    one process each, all at once; a1 memcheck and racecheck, a2 synccheck and
#    initcheck: fourteen processes a call). Since the last run of all four
#    tools on the norms and dropout, their kernels gained the cp.async rings (dropout
#    v13, LayerNorm bwd_stages), programmatic dependent launches (LayerNorm v35, dropout
#    v14) and v36-v37 / v15-v17; those had memcheck and racecheck only, never synccheck
#    or initcheck.
# b: GPU suite part 1 (dropout, patch, fast path): the forty-second session's run of the
#    old part 1 stopped 1-3 tests short of its end (parts 2-4 ran whole).
# c: through interop.torch at dropout v17 / LayerNorm v37 (bench/ab/interop_s27.sh; the
#    last such run was at v10 / v31): issue #16 asks for the targets there too.
# d: the bwd_w_regs candidate (forty-second session, CPU): the backward row kernels keep
#    w in registers (raw words, unpacked as used) instead of reading it back from
#    shared memory as float32 every row. ptxas (sm_90): the 16-bit LayerNorm row kernel
#    at N = 4096 stays at 128 registers without spills; its row loop drops from 300 to
#    297 SASS instructions and from 8 LDS.128 to 4. The loop waits on MIO (ncu,
#    twenty-sixth session), and the thirty-fourth session's ring, which added two
#    shared-memory accesses a 16-byte group, cost 3.5-6.5 us there. Predicted: fp16 /
#    bf16 LayerNorm bwd at 16384 x 4096 1-3 us faster (115 -> 112-114), RMSNorm likewise
#    or less, N = 1024 / 8192 even or faster. First its GPU tests (same bits at the
#    default layouts) and memcheck / racecheck of the layer_norm_w_regs workload, then
#    tune_layer_norm A/B/B/A at N = 1024, 4096, 8192, fp16 and bf16, and RMSNorm at 4096.
# Order: d first (if it wins, the sanitizers and part 4 then run on the new default),
# then a1, a2, c, b.
#   bash bench/ab/pending_s43.sh "$OUT" a1|a2|b|c|d
set -uo pipefail
OUT=${1:?usage: pending_s43.sh OUTDIR a1|a2|b|c|d}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
# layer_norm one dtype a process: its racecheck took 238 s for float16 alone
# (thirty-second session), over the limit for all three in one process.
OPS="dropout layer_norm:float32 layer_norm:float16 layer_norm:bfloat16 attention linear_act"
OPS="$OPS linear_act_wgmma"
san() { SAN_TOOLS="$1" SAN_OPS="$OPS" SAN_TIMEOUT=540 timeout -k 10 580 \
          bash bench/gpu_harness.sh "$OUT/san" --stages sanitize; }
case "${2:?a1, a2, b, c or d}" in
  a1) san "memcheck racecheck" ;;
  a2) san "synccheck initcheck" ;;
  b) bash bench/ab/full_suite.sh "$OUT" 1 ;;
  c) bash bench/ab/interop_s27.sh "$OUT" ;;
  d)
    timeout -k 5 200 python3 -m pytest -q -p no:cacheprovider -m "not ptx" -n 8 \
      tests/test_layer_norm.py -k "w_regs" > "$OUT/d_tests.log" 2>&1
    echo "tests rc $?"; tail -3 "$OUT/d_tests.log"
    bash bench/ab/san_pair.sh "$OUT" layer_norm_w_regs:float16 d
    timeout -k 10 240 python3 bench/tune_layer_norm.py --out "$OUT/d_ln" --reps 50 \
      --ns 1024,4096,8192 --dtypes float16,bfloat16 --tunes '{}' '{"bwd_w_regs": true}' \
      '{"bwd_w_regs": true}' '{}' > "$OUT/d_ln.log" 2>&1
    echo "ln rc $?"; tail -28 "$OUT/d_ln.log"
    timeout -k 10 120 python3 bench/tune_layer_norm.py --op rms --out "$OUT/d_rms" --reps 50 \
      --ns 4096 --dtypes float16,bfloat16 --tunes '{}' '{"bwd_w_regs": true}' \
      '{"bwd_w_regs": true}' '{}' > "$OUT/d_rms.log" 2>&1
    echo "rms rc $?"; tail -12 "$OUT/d_rms.log"
    ;;
  *) echo "a1, a2, b, c or d" >&2; exit 2 ;;
esac
