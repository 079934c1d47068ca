#!/usr/bin/env bash
# Written in the twenty-ninth session for the next (an H200). Each part fits one call:
#   a: the norms sweep at v32 (LayerNorm's 16-bit one-row backward kernels of 8 / 16
#      warps sum across warps from shared memory; the retired candidates change no
#      default), carry .whl for Liger: ~8 minutes. Then the tables / plots on the CPU:
#      python3 bench/layer_norm.py --from-json FILE --plot bench/results
#      Predicted against v31 (bench/RESULTS.md): 16-bit LayerNorm / RMSNorm bwd 0.5-2
#      us faster at N = 4096 / 8192, nothing else moves.
#   b, c, d: the whole GPU suite at this commit (bench/ab/full_suite.sh parts 1-3),
#      each under 10 minutes; the last full run predates v28-v32.
#   e: the dropout backward's timed loop under torch.profiler at 2 waves with the bias
#      grad (fill=2) against v10's one wave, to see whether the ~4 us that the
#      bias-grad kernel loses back to back (bench/NOTES.md, twenty-ninth session) is the
#      one wave's tail: set DROPOUT_FILL=2 for the second run.
#   f: memcheck and racecheck of bench/sanitize.py's long layer_norm workload, one
#      process a dtype and tool, concurrently, under 540 s each (this session's 150 s /
#      90 s gave no verdict; earlier sessions needed up to ~330 s a dtype).
#   bash bench/ab/pending_s30.sh "$OUT" a|b|c|d|e|f
set -uo pipefail
OUT=${1:?usage: pending_s30.sh OUTDIR a|b|c|d|e|f}
PART=${2:?usage: pending_s30.sh OUTDIR a|b|c|d|e|f}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
case "$PART" in
a) bash bench/ab/norms_sweep.sh "$OUT" h200_s30_v32 | tail -5 ;;
b) bash bench/ab/full_suite.sh "$OUT" 1 ;;
c) bash bench/ab/full_suite.sh "$OUT" 2 ;;
d) bash bench/ab/full_suite.sh "$OUT" 3 ;;
e)
  timeout -k 5 120 python3 bench/ab/dropout_bwd_trace.py > "$OUT/trace_fill1.txt" 2>&1
  DROPOUT_FILL=2 timeout -k 5 120 python3 bench/ab/dropout_bwd_trace.py \
    > "$OUT/trace_fill2.txt" 2>&1
  grep events "$OUT"/trace_fill*.txt
  ;;
f)
  SAN_OPS="layer_norm:float16 layer_norm:bfloat16 layer_norm:float32" \
    SAN_TOOLS="memcheck racecheck" SAN_TIMEOUT=540 timeout -k 10 570 \
    bash bench/gpu_harness.sh "$OUT/san" --stages sanitize | tail -3
  ;;
*) echo "PART must be a, b, c, d, e or f" >&2; exit 2 ;;
esac
