#!/usr/bin/env bash
# Twenty-fifth session, last call (H200): v29 (_PLAIN_V29, s25_a / s25_b's fastest
# plain-kernel layouts) as the default. First the whole norms sweep (issue #16's
# table and plots from one run; carry .whl), then the forward picks' GPU tests and
# memcheck / racecheck of bench/sanitize.py's layer_norm_plain workload (every v28 /
# v29 layout at 29 rows) at float16 and float32. Predicted: the sweep's 34 forward
# cells behind shrink to the float32 ones within 1-4 us of inductor and 16-bit
# LayerNorm N = 512 within 1 us. About 7 minutes.
#   bash bench/ab/s25_c.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: s25_c.sh OUTDIR}
bash bench/ab/norms_sweep.sh "$OUT" h200_s25_v29
. bench/ab/tl.sh
ab_verify s25_c 200 "plain_kernel or wave_and_rms_caps" \
  "layer_norm_plain:float16 layer_norm_plain:float32"
