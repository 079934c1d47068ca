#!/usr/bin/env bash
# For the seventy-ninth session (written at the end of the seventy-eighth, whose device
# time ran out).
#   t: (any card, ~9 min) the GEMM suites in full on a GPU after the seventy-eighth
#      session's changes (the pair loader in every tensor-core kernel's source, the
#      wgmma row limit WG_MAX_SKINNY_ROWS): test_linear_act, test_wgmma,
#      test_gated_linear, test_patch (Llama on the gated MLP), test_fast_path.
#      Predicted: all pass (the non-pair kernels compile to the same PTX as before; at
#      most 64 rows the GEMMs take mma.sync, tested at every small shape already).
#   s: (any card, ~5 min) pending_s78.sh s: skinny_ab.py, 16-row tilings at M = 1 / 16 /
#      64 against cuBLAS for Llama-7B's gate+up and down GEMMs.
#   bash bench/ab/pending_s79.sh "$OUT" t|s
set -uo pipefail
OUT=${1:?"usage: pending_s79.sh OUTDIR t|s"}
export OUT PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "card: $card"
case "${2:?t|s}" in
  t)
    timeout -k 10 540 python3 -m pytest -q -p no:cacheprovider -n 8 tests/test_linear_act.py \
      tests/test_wgmma.py tests/test_gated_linear.py tests/test_patch.py tests/test_fast_path.py \
      > "$OUT/tests_t.log" 2>&1
    echo "tests rc $?"; tail -4 "$OUT/tests_t.log"
    ;;
  s) bash bench/ab/pending_s78.sh "$OUT" s ;;
  *) echo "t or s" >&2; exit 2 ;;
esac
