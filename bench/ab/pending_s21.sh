#!/usr/bin/env bash
# Written in the twentieth session for the next: v23 (16-bit RMSNorm N = 5120, fp16
# 8192 / 12288 at two groups under a register cap) shipped after the session's whole
# sweep and with only `-k rms` of the GPU test files run. Stage "tests": the three
# LayerNorm test files in full (about 7 minutes); stage "sweep": the whole norms
# sweep at the final defaults (about 4.5 minutes; carry .whl). One call each:
#   bash bench/ab/pending_s21.sh "$OUT" tests
#   bash bench/ab/pending_s21.sh "$OUT" sweep      (carry [".whl"])
# Predicted for the sweep: as the twentieth session's, but fp16 RMSNorm forwards at N =
# 5120 / 8192 / 12288 and bf16 at 5120 at 93.5-94.1 us (0.99-1.0x inductor).
set -uo pipefail
OUT=${1:?usage: pending_s21.sh OUTDIR tests|sweep}
case "${2:?usage: pending_s21.sh OUTDIR tests|sweep}" in
  tests) bash bench/ab/s17_verify.sh "$OUT" tests ;;
  sweep) bash bench/ab/norms_sweep.sh "$OUT" h100_s21 ;;
  *) echo "stage must be tests or sweep" >&2; exit 2 ;;
esac
