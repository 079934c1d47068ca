#!/usr/bin/env bash
# Eighteenth session, last call (about 9 minutes on an H100): (1) the 16-bit
# LayerNorm forward at 1024 x 65536, which the sweep (norms_sweep_h100_s18) put at
# 0.126 ms median with p20 0.118 (the seventeenth session's median), shipped three
# times over (is it noise?); (2) memcheck and racecheck on bench/sanitize.py's
# layer_norm workloads, every dtype (the fwd_evict hint modes included).
#   bash bench/ab/pending_s18c.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: pending_s18c.sh OUTDIR}
. bench/ab/tl.sh
tl ln64k 100 --reps 50 --ns 65536 --dtypes float16,bfloat16 --tunes '{}' '{}' '{}'
TESTS="tests/test_layer_norm.py" SAN_OPS="layer_norm" SAN_TOOLS="memcheck racecheck" \
  SAN_TIMEOUT=330 timeout -k 10 420 bash bench/gpu_harness.sh "$TL_DIR/verify" \
  --stages sanitize --workers 14 > "$TL_DIR/harness.out" 2>&1
echo "harness rc $?"
cat "$TL_DIR/verify/summary.md"
tar czf "$OUT/pending_s18c.tgz" -C "$TL_DIR" .
