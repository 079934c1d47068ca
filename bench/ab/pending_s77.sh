#!/usr/bin/env bash
# Seventy-seventh session.
#   a: (any card, <= 9 min) on an H200: pending_s76.sh h (v65, v61, v66 A/Bs there).
#      On any other card: the LayerNorm forward half of issue #16's sweep with every
#      provider (numba_infer held to torch.compile, both y alone), one run at today's
#      code, so the forward's standing on this card is known at v66.
#   r: (any card, ~6 min) the RMSNorm forward half, likewise.
#   c: (any card, ~5 min) the CuPy front ends' plans: tests/test_cupy_fast.py, then
#      bench/launch_cost.py (host us a call; predicted for the CuPy rows: each plan
#      path within ~1.5x of interop.torch's no-grad call, the LayerNorm backward ~4x
#      under its array-level call).
#   o: (any card, ~8 min) every other test that goes through interop.cupy (-k cupy).
#   bash bench/ab/pending_s77.sh "$OUT" a|r|c|o
set -uo pipefail
OUT=${1:?"usage: pending_s77.sh OUTDIR a|r|c|o"}
export OUT PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "card: $card"
. bench/ab/norms_sweep_fn.sh
case "${2:?a|r|c|o}" in
  a)
    case "$card" in
      *H200*) bash bench/ab/pending_s76.sh "$OUT" h ;;
      *) norms_sweep layer_norm ln_fwd fwd 500 ;;
    esac
    ;;
  r) norms_sweep rms_norm rms_fwd fwd 500 ;;
  c)
    timeout -k 10 380 python3 -m pytest -q -p no:cacheprovider -x tests/test_cupy_fast.py tests/test_cupy_fast_logic.py \
      > "$OUT/cupy_fast.log" 2>&1
    echo "cupy_fast rc $?"; tail -15 "$OUT/cupy_fast.log"
    timeout -k 10 190 python3 bench/launch_cost.py --calls 2000 --json "$OUT/launch_cost.json" \
      > "$OUT/launch_cost.log" 2>&1
    echo "launch_cost rc $?"; cat "$OUT/launch_cost.log"
    ;;
  o)
    timeout -k 10 500 python3 -m pytest -q -p no:cacheprovider -k cupy tests/test_interop.py \
      tests/test_layer_norm.py tests/test_dropout.py tests/test_attention.py \
      tests/test_linear_act.py tests/test_gated_linear.py tests/test_multi_gpu.py \
      tests/test_bench_examples.py > "$OUT/cupy_ops.log" 2>&1
    echo "cupy_ops rc $?"; tail -15 "$OUT/cupy_ops.log"
    ;;
  *) echo "a, r, c or o" >&2; exit 2 ;;
esac
