#!/usr/bin/env bash
# Nineteenth session, the forward gap (about 2 minutes on an H100). The lean forward
# loads a thread's w and b groups in its write pass, each after the previous group's
# y store; a plain ld.global may not pass an st.global that might alias it, so ptxas
# issues them one group at a time: four L2 round trips a row at four groups (SASS,
# sm_90). fwd_evict "nc" loads w and b through ld.global.nc (read-only): ptxas then
# issues all eight 16-byte loads together, some ahead of the second reduction's
# barrier (same 64 registers, fp16 LayerNorm N = 8192). The gap it would explain: 1-3
# us a call behind inductor at every N below 65536 (bench/ab/fixed_cost_s19.sh: also
# 0.5-1.5 us at one wave). Predicted: 1-2% faster wherever the lean kernel runs.
#   bash bench/ab/pending_s19e.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: pending_s19e.sh OUTDIR}
. bench/ab/tl.sh
for op in ln rms; do
  tl "${op}nc" 200 --reps 30 --op "$op" --ns 512,1024,4096,8192,16384 \
    --dtypes float16,float32 --tunes '{}' '{"fwd_evict": "nc"}' '{}' '{"fwd_evict": "nc"}'
done
tar czf "$OUT/pending_s19e.tgz" -C "$TL_DIR" .
