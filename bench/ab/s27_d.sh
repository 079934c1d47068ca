#!/usr/bin/env bash
# Twenty-seventh session, H200, verification of dropout v10 (the backward's grid in
# whole waves of its kernel's resident blocks: one with a bias grad, two without;
# silu at two rows a batch) and v9 (silu's fast form), with the range test's
# conditioning fix: the whole dropout sweep (one run), test_dropout.py /
# test_nonfinite.py / the torch front end's dropout tests on the GPU, memcheck /
# racecheck of bench/sanitize.py's dropout workloads, then float32's fill against the
# nominal plan (fill=0) at 16384 x 4096, which v10 applies unmeasured.
# Predicted: 16-bit 'none' bwd N = 16384 0.083 -> <= 0.078 ms, gelu bwd 2-12 us
# faster at 16384 x 4096 / 4096 x 16384 / 1024 x 65536. About 7 minutes.
#   bash bench/ab/s27_d.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: s27_d.sh OUTDIR}
bash bench/ab/pending_sweep.sh "$OUT" float16,bfloat16,float32 | tail -60
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
V=$(mktemp -d)
TESTS="tests/test_dropout.py tests/test_nonfinite.py tests/test_torch_frontend.py" \
  SAN_OPS="dropout:float16 dropout:bfloat16 dropout:float32" SAN_TOOLS="memcheck racecheck" \
  SAN_TIMEOUT=150 timeout -k 10 330 bash bench/gpu_harness.sh "$V" --stages tests,sanitize \
  --workers 14 -k "dropout or silu or nonfinite" --timeout 150 > "$V/harness.out" 2>&1
echo "harness rc $?"
cat "$V/summary.md"
tar czf "$OUT/s27_d.tgz" -C "$V" .
mkdir -p "$OUT/td_fp32"
timeout -k 5 90 python3 bench/tune_dropout.py --out "$OUT/td_fp32" --reps 30 --dtype float32 \
  --configs "shipped,fill=0,shipped" > "$OUT/td_fp32/log.txt" 2>&1
echo "tune_dropout float32 rc $?"
grep " call " "$OUT/td_fp32/log.txt" | grep -v " p0 "
