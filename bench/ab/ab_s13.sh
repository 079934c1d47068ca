#!/usr/bin/env bash
# Thirteenth session's first GPU call (bench/NOTES.md, "Thirteenth session"):
#  1. GPU tests of this session's and the test-trimming helper's changes;
#  2. dropout backward's bias-grad tail: final_step (partial rows a thread loads per
#     round of the last block's sum) against rows per block, fp16 16384 x 4096;
#  3. the LayerNorm forward's back-to-back timeline, ours against inductor and eager
#     (bench/ab/ln_timeline.py);
#  4. ncu, fp16 8192 x 8192 LayerNorm backward, ours against Liger's (the sweep's 0.89).
#   bash bench/ab/ab_s13.sh "$OUT"     (about 8 minutes on an H100; carry .whl)
set -uo pipefail
OUT=${1:?usage: ab_s13.sh OUTDIR}
. bench/ab/liger_env.sh || echo "liger wheel not installed"
nvidia-smi -L
timeout -k 5 240 python3 -m pytest -q -p no:cacheprovider -x tests/test_wgmma.py \
  "tests/test_dropout.py::test_bias_grad_last_block_reduction" \
  "tests/test_dropout.py::test_bad_launch_config" \
  tests/test_layer_norm.py -k "wgmma or last_block_reduction or bad_launch_config or row_slots or streaming_backward_accumulators or wide_backward" \
  > "$OUT/tests.log" 2>&1
echo "tests rc $?"; tail -3 "$OUT/tests.log"
timeout -k 5 180 python3 bench/tune_dropout.py --out "$OUT/dr" --reps 30 --dtype float16 \
  --configs "shipped,step=1,step=4,rows=512,rows=512 step=4,rows=256 step=4,shipped" \
  > "$OUT/dropout_ab.log" 2>&1
echo "dropout rc $?"
timeout -k 5 200 python3 bench/ab/ln_timeline.py --out "$OUT/tl" > "$OUT/timeline.log" 2>&1
echo "timeline rc $?"
NCU=(ncu --nvtx --nvtx-include "prof/" --clock-control none --section SpeedOfLight
     --section Occupancy --section WarpStateStats --section LaunchStats
     --section MemoryWorkloadAnalysis --section SchedulerStats)
for prov in numba liger; do
  timeout -k 5 100 "${NCU[@]}" python3 bench/profile_op.py ln_bwd --shape 8192x8192 \
    --provider "$prov" > "$OUT/ncu_ln_bwd_$prov.txt" 2>&1
  echo "ncu ln_bwd $prov rc $?"
done
rm -f "$OUT"/dr/*.md
grep -v "^ *$" "$OUT/dropout_ab.log" | tail -45
tail -20 "$OUT/timeline.log"
