#!/usr/bin/env bash
# For the seventy-ninth session.
#   t: (any card, ~9 min) the GEMM suites in full on a GPU after the seventy-eighth
#      session's changes (the pair loader in every tensor-core kernel's source, the
#      wgmma row limit WG_MAX_SKINNY_ROWS) and this session's split-K forward:
#      test_linear_act, test_wgmma, test_gated_linear, test_patch (Llama on the gated
#      MLP), test_fast_path; then memcheck and racecheck of sanitize.py linear_split_k.
#      Predicted: all pass, 0 sanitizer errors.
#   s: (any card, ~6 min) skinny_ab.py at M = 1 / 16 / 64 for Llama-7B's gate+up and
#      down GEMMs: the default tiling at forced split-K 1, 2, 3, 4, 6, 8 ways and the
#      rule's (0), then 16-row tilings unsplit and at the rule's ways. Predicted: the
#      down projection (64 tiles on 132 SMs) from ~130 us unsplit to ~35-45 us at 4-6
#      ways (cuBLAS ~30 us); gate+up (344 tiles) unchanged by the rule (1 way). Then
#      the Llama-7B MLP under no_grad at M = 1 / 16 (bench/gated_linear.py): predicted
#      0.236 / 0.232 ms -> ~0.14-0.15 (torch 0.116 / 0.113).
#   c: (any card, <= 8 min; what one call holds when device time is short) the split
#      sweep of s (default tiling), the linear_act and gated tests, memcheck of the
#      split kernel, the gated MLP at M = 1 / 16, then two 16-row tilings at M = 1 / 16.
#   m: (any card, <= 5 min) c at its least: the split at 1 / 4 / the rule's ways, the
#      split, pair, tiling and ragged tests, memcheck, the gated MLP at M = 1 / 16.
#   v: (any card, ~3.5 min) the split tests and memcheck first, then the sweep of m.
#   g: (any card, ~1 min) m's gated MLP at M = 1 / 16 with the split rule on, alone.
#   bash bench/ab/pending_s79.sh "$OUT" t|s|c|m|v
set -uo pipefail
OUT=${1:?"usage: pending_s79.sh OUTDIR t|s"}
export OUT PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "card: $card"
# The gated MLP at M = 1 / 16 with the split rule on (SPLITK_BY_DEFAULT is off until
# verified).
gated_decode_split_on() {
  timeout -k 10 60 python3 -c "import runpy, sys
from numba_fused import linear_act as la
la.SPLITK_BY_DEFAULT = True
sys.argv = ['gated_linear.py'] + sys.argv[1:]
runpy.run_path('bench/gated_linear.py', run_name='__main__')" --shapes 1x4096x11008 \
    16x4096x11008 --dtypes bfloat16 --providers numba_torch torch --reps 20 \
    --json "$OUT/gated_decode.json" > "$OUT/gated_decode.log" 2>&1
  echo "gated bench rc $?"; grep "| fwd |" "$OUT/gated_decode.log"
}
case "${2:?t|s|c|m|v|g}" in
  t)
    timeout -k 10 420 python3 -m pytest -q -p no:cacheprovider -n 8 tests/test_linear_act.py \
      tests/test_wgmma.py tests/test_gated_linear.py tests/test_patch.py tests/test_fast_path.py \
      > "$OUT/tests_t.log" 2>&1
    echo "tests rc $?"; tail -4 "$OUT/tests_t.log"
    for tool in memcheck racecheck; do
      timeout -k 10 60 compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 3 \
        python3 bench/sanitize.py linear_split_k:float16 linear_split_k:bfloat16 \
        > "$OUT/${tool}_split.log" 2>&1
      echo "$tool rc $?"; tail -3 "$OUT/${tool}_split.log"
    done
    ;;
  s)
    timeout -k 10 250 python3 bench/ab/skinny_ab.py --ms 1 16 64 --reps 20 --tilings default \
      --splits 1 2 3 4 6 8 0 > "$OUT/skinny_split.log" 2>&1
    echo "split rc $?"; grep -v -i warn "$OUT/skinny_split.log"
    timeout -k 10 200 python3 bench/ab/skinny_ab.py --ms 1 16 64 --reps 20 --no-gated \
      --tilings 16x64x64_w16x16_s4 16x64x128_w16x16_s3 16x32x128_w16x16_s4 64x64x64_w32x32_s4 \
      --splits 1 0 > "$OUT/skinny_tilings.log" 2>&1
    echo "tilings rc $?"; grep -v -i warn "$OUT/skinny_tilings.log"
    timeout -k 10 90 python3 bench/gated_linear.py --shapes 1x4096x11008 16x4096x11008 \
      --dtypes bfloat16 --providers numba_torch torch --reps 20 --json "$OUT/gated_decode.json" \
      > "$OUT/gated_decode.log" 2>&1
    echo "gated bench rc $?"; grep "| fwd |" "$OUT/gated_decode.log"
    ;;
  c)
    timeout -k 10 110 python3 bench/ab/skinny_ab.py --ms 1 16 64 --reps 20 --tilings default \
      --splits 1 2 4 6 8 0 --no-gated > "$OUT/skinny_split.log" 2>&1
    echo "split rc $?"; grep -v -i warn "$OUT/skinny_split.log"
    timeout -k 10 150 python3 -m pytest -q -p no:cacheprovider -n 8 tests/test_linear_act.py \
      tests/test_gated_linear.py -k "not cupy" > "$OUT/tests_c.log" 2>&1
    echo "tests rc $?"; tail -4 "$OUT/tests_c.log"
    timeout -k 10 50 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 3 \
      python3 bench/sanitize.py linear_split_k:bfloat16 > "$OUT/memcheck_split.log" 2>&1
    echo "memcheck rc $?"; tail -3 "$OUT/memcheck_split.log"
    timeout -k 10 60 python3 bench/gated_linear.py --shapes 1x4096x11008 16x4096x11008 \
      --dtypes bfloat16 --providers numba_torch torch --reps 20 --json "$OUT/gated_decode.json" \
      > "$OUT/gated_decode.log" 2>&1
    echo "gated bench rc $?"; grep "| fwd |" "$OUT/gated_decode.log"
    timeout -k 10 60 python3 bench/ab/skinny_ab.py --ms 1 16 --reps 20 --no-gated \
      --tilings 16x64x64_w16x16_s4 16x64x128_w16x16_s3 --splits 1 0 \
      > "$OUT/skinny_tilings.log" 2>&1
    echo "tilings rc $?"; grep -v -i warn "$OUT/skinny_tilings.log"
    ;;
  m)
    timeout -k 10 60 python3 bench/ab/skinny_ab.py --ms 1 16 --reps 20 --tilings default \
      --splits 1 0 --no-gated > "$OUT/skinny_split.log" 2>&1
    echo "split rc $?"; grep -v -i warn "$OUT/skinny_split.log"
    timeout -k 10 100 python3 -m pytest -q -p no:cacheprovider -n 8 tests/test_linear_act.py \
      tests/test_gated_linear.py -k "split or pair or tilings or ragged" > "$OUT/tests_m.log" 2>&1
    echo "tests rc $?"; tail -4 "$OUT/tests_m.log"
    timeout -k 10 50 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 3 \
      python3 bench/sanitize.py linear_split_k:bfloat16 > "$OUT/memcheck_split.log" 2>&1
    echo "memcheck rc $?"; tail -3 "$OUT/memcheck_split.log"
    gated_decode_split_on
    ;;
  g)
    gated_decode_split_on
    ;;
  v)
    timeout -k 10 90 python3 -m pytest -q -p no:cacheprovider -n 8 tests/test_linear_act.py \
      -k "split" > "$OUT/tests_v.log" 2>&1
    echo "tests rc $?"; tail -4 "$OUT/tests_v.log"
    timeout -k 10 50 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 3 \
      python3 bench/sanitize.py linear_split_k:bfloat16 > "$OUT/memcheck_split.log" 2>&1
    echo "memcheck rc $?"; tail -3 "$OUT/memcheck_split.log"
    timeout -k 10 60 python3 bench/ab/skinny_ab.py --ms 1 16 --reps 20 --tilings default \
      --splits 1 0 --no-gated > "$OUT/skinny_split.log" 2>&1
    echo "split rc $?"; grep -v -i warn "$OUT/skinny_split.log"
    ;;
  *) echo "t, s, c, m, v or g" >&2; exit 2 ;;
esac
