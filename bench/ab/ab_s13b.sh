#!/usr/bin/env bash
# Thirteenth session's second GPU call (bench/NOTES.md, "Thirteenth session"):
#  1. the LayerNorm forward's back-to-back timeline (bench/ab/ln_timeline.py);
#  2. ncu, fp16 LayerNorm backward at 8192 x 8192 and 16384 x 4096, ours against Liger's;
#  3. ncu, fp16 16384 x 4096 dropout backward of 'none' with and without grad_bias:
#     where the warps wait (source counters) and DRAM throughput over time (PM sampling),
#     for the ~8 us that grad_bias costs.
#   bash bench/ab/ab_s13b.sh "$OUT"     (about 6 minutes on an H100; carry .whl)
set -uo pipefail
OUT=${1:?usage: ab_s13b.sh OUTDIR}
. bench/ab/liger_env.sh || echo "liger wheel not installed"
nvidia-smi -L
timeout -k 5 240 python3 bench/ab/ln_timeline.py --out "$OUT/tl" > "$OUT/timeline.log" 2>&1
echo "timeline rc $?"
NCU=(ncu --nvtx --nvtx-include "prof/" --clock-control none --section SpeedOfLight
     --section Occupancy --section WarpStateStats --section LaunchStats
     --section MemoryWorkloadAnalysis --section SchedulerStats)
for shape in 8192x8192 16384x4096; do
  for prov in numba liger; do
    timeout -k 5 100 "${NCU[@]}" python3 bench/profile_op.py ln_bwd --shape $shape \
      --provider "$prov" > "$OUT/ncu_ln_bwd_${prov}_$shape.txt" 2>&1
    echo "ncu ln_bwd $prov $shape rc $?"
  done
done
for nbg in "" "--no-bias-grad"; do
  tag=${nbg:-bias}
  timeout -k 5 100 "${NCU[@]}" --section SourceCounters --section PmSampling \
    --import-source no python3 bench/profile_op.py dropout_bwd --shape 16384x4096 $nbg \
    > "$OUT/ncu_dropout_bwd_$tag.txt" 2>&1
  echo "ncu dropout_bwd $tag rc $?"
done
timeout -k 5 100 ncu --nvtx --nvtx-include "prof/" --clock-control none \
  --section SourceCounters --page source --print-source sass --csv \
  python3 bench/profile_op.py dropout_bwd --shape 16384x4096 > "$OUT/ncu_dropout_bwd_sass.csv" 2>&1
echo "ncu dropout_bwd sass rc $?"
tail -12 "$OUT/timeline.log"
