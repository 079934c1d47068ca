#!/usr/bin/env bash
# Seventy-eighth session.
#   l: (any card, ~9 min) the CuPy plans of linear_act_dgrad / linear_weight_grad /
#      activation_backward (tests/test_cupy_fast.py + its CPU logic test), then every
#      other test that goes through interop.cupy (-k cupy), which the second review's
#      mend (interop.dlpack.cupy_empty) has not yet met on a GPU.
#   bash bench/ab/pending_s78.sh "$OUT" l
set -uo pipefail
OUT=${1:?"usage: pending_s78.sh OUTDIR l"}
export OUT PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "card: $card"
case "${2:?l}" in
  l)
    timeout -k 10 200 python3 -m pytest -q -p no:cacheprovider tests/test_cupy_fast.py \
      tests/test_cupy_fast_logic.py > "$OUT/cupy_fast.log" 2>&1
    echo "cupy_fast rc $?"; tail -8 "$OUT/cupy_fast.log"
    timeout -k 10 330 python3 -m pytest -q -p no:cacheprovider -n 4 -k cupy tests/test_interop.py \
      tests/test_layer_norm.py tests/test_dropout.py tests/test_attention.py \
      tests/test_linear_act.py tests/test_gated_linear.py tests/test_multi_gpu.py \
      tests/test_bench_examples.py > "$OUT/cupy_ops.log" 2>&1
    echo "cupy_ops rc $?"; tail -8 "$OUT/cupy_ops.log"
    ;;
  *) echo "l" >&2; exit 2 ;;
esac
