#!/usr/bin/env bash
# Written in the sixty-first session (an H200; bench/NOTES.md, sixty-first session).
#   a: the reload kernel's GPU tests (same bits as the kernel holding x, hints in the
#      PTX), then bench/ab/infer_picks.py's cells *x at float32 RMSNorm 2048-8192
#      (inductor's two-loop shape: fwd_plain_reload). ~5 min.
#   b: the rest of the cells *x (float32 RMSNorm 12288 / 16384, LayerNorm 4096, 16-bit
#      RMSNorm 8192). ~4 min.
#   k: fwd_plain_const_n / fwd_plain_tree's GPU tests, then infer_picks.py's cells *k
#      (n compiled in, lanes by masks; the warps' partials pairwise). ~4 min.
#   bash bench/ab/pending_s61.sh "$OUT" {a|b|k}
set -uo pipefail
OUT=${1:?"usage: pending_s61.sh OUTDIR a|b"}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
picks() {
  timeout -k 10 "$1" python3 bench/ab/infer_picks.py --cells "$2" > "$OUT/picks_$3.log" 2>&1
  echo "picks rc $?"
  grep -E "FAIL|error|median|check" "$OUT/picks_$3.log"
}
case "${2:?a, b or k}" in
  a)
    nvidia-smi -L
    timeout -k 5 200 python3 -m pytest -q -p no:cacheprovider -n 8 tests/test_layer_norm.py \
      tests/test_tensor_core.py -k "reload or evict or prefetch_sizes" > "$OUT/tests_a.log" 2>&1
    echo "tests rc $?"; tail -3 "$OUT/tests_a.log"
    picks 330 f32_rms_2048x,f32_rms_4096x,f32_rms_5120x,f32_rms_8192x a
    ;;
  b)
    picks 400 f32_rms_12288x,f32_rms_16384x,f32_ln_4096x,f16_rms_8192x,bf16_rms_8192x b
    ;;
  k)
    timeout -k 5 200 python3 -m pytest -q -p no:cacheprovider -n 8 tests/test_layer_norm.py \
      -k "plain_knob or reload_hints or const_n_tree" > "$OUT/tests_k.log" 2>&1
    echo "tests rc $?"; tail -3 "$OUT/tests_k.log"
    timeout -k 10 400 python3 bench/ab/infer_picks.py --suffix k > "$OUT/picks_k.log" 2>&1
    echo "picks rc $?"
    grep -E "FAIL|error|median|check" "$OUT/picks_k.log"
    ;;
  *) echo "a, b or k" >&2; exit 2 ;;
esac
