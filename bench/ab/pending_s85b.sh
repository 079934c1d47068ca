#!/usr/bin/env bash
# Eighty-fifth session, after the ncu of the gated pair GEMM (pending_s85.sh n):
#   a: (any Hopper card, ~6 min) v7 (WgmmaConfig.epi 1: the epilogue's activations in
#      fast_act's branch-free forms, a chunk's 8 / 4 under one switch) against the
#      libdevice epilogue: bench/ab/epi_cost.py (pair / plain / short-K forward and
#      dgrad by activation, the arms alternating, 3 rounds), the GPU tests of the
#      epi variant, of the moved fast activations and of the CuPy plans on the TMA
#      tiling (never run on a GPU before), then the Llama MLP training step
#      (pair_train_ab.py) with every role's tiling at epi 0 (and torch) and at epi 1.
#      Predicted (first run, 16:29, blocks of arms: epi 0 silu / gelu 8-11% slower than
#      act none, epi 1 at none's time): silu and gelu within 2% of "none" with epi 1
#      on every kind, 5-11% faster than epi 0; "none" unchanged. epi 2 (v7b, built
#      after that run: unsigned shared indices, 64 STS.64 for 128 STS, ~1000 fewer
#      SASS instructions) a further 1-3% on every kind, "none" included.
#   bash bench/ab/pending_s85b.sh "$OUT" a
set -uo pipefail
OUT=${1:?"usage: pending_s85b.sh OUTDIR a"}
export OUT PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
echo "card: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
case "${2:?a}" in
  a)
    timeout -k 5 ${EPI_S:-200} python3 bench/ab/epi_cost.py ${EPI_ARGS:-} > "$OUT/epi_cost.log" 2>&1
    echo "epi_cost rc $?"; grep -v -i warn "$OUT/epi_cost.log"
    timeout -k 5 ${TEST_S:-240} python3 -m pytest -q -p no:cacheprovider -x ${TEST_N:-} tests/test_wgmma.py \
      tests/test_gated_linear.py tests/test_linear_act.py tests/test_cupy_fast.py \
      -k "(on_wgmma and epi) or fast_forms or fast_act_switch or swizzled or tma_tiling" \
      > "$OUT/tests_epi.log" 2>&1
    echo "tests rc $?"; tail -3 "$OUT/tests_epi.log"
    [ "${TRAIN_S:-100}" = 0 ] && exit 0
    for epi in 0 1 2; do
      arms="pair"; [ $epi = 0 ] && arms="pair torch"
      timeout -k 5 ${TRAIN_S:-100} python3 bench/ab/pair_train_ab.py --epi $epi --arms $arms \
        --reps 15 > "$OUT/train_epi$epi.log" 2>&1
      echo "train epi $epi rc $?"; grep -E "^\{|^epi" "$OUT/train_epi$epi.log" | cut -c1-200
    done
    ;;
  *) echo "a" >&2; exit 2 ;;
esac
