#!/usr/bin/env bash
# For the eighty-first session (pending_s80.sh d is the opt-ins' default-path run).
#   f: (any card, ~3-4 min) where our Llama-7B MLP training step loses to torch's
#      (pair_train_ab.py --profile: GPU time per kernel, pairs on, against torch's
#      cuBLAS step), then the decode tilings sweep (skinny_ab.py, every tiling at
#      M = 1 / 16, unsplit and the split rule's choice).
#   s: (any card, ~5 min, at most 440 s) the few-row forward (make_skinny_kernel): its tests
#      (linear_act -k skinny, the decode shapes against torch among them), memcheck
#      of sanitize.py linear_skinny, then skinny_ab.py at M = 1 / 16 / 32: the tiled
#      kernel unsplit and split against the few-row layouts, and the gated forward
#      with it. Predicted: all pass, 0 errors; down projection (90 MB) ~63-70 us ->
#      32-38 us, gate+up (180 MB) ~104 -> 60-66 us (cuBLAS 37 / 67; 2.5-2.8 TB/s).
#   d: (any card, ~8 min) pending_s80.sh d with the few-row kernel's rule on too
#      (NUMBA_FUSED_TEST_ON=split,pairs,skinny): every GEMM suite and the torch / CuPy
#      front ends' plan, graph and no-sync tests with the three opt-ins as defaults,
#      then racecheck of the split kernel alone.
#   g: (any card, ~3 min) generation: bench/decode_step.py (a 4-layer Llama-7B-wide
#      model, bf16, batch 1, one token a step with its KV cache), stock against ours
#      per kernel choice (tiled / split / skinny / default). Predicted: ours (skinny)
#      the fastest of ours and within ~5% of stock (the MLPs' GEMMs at cuBLAS's speed,
#      our norms; attention stock on both sides).
#   m: (any card, at most ~300 s) s cut to its core for a nearly spent budget: the
#      tests, memcheck, and three layouts at M = 1 / 16.
#   q: (any card, at most ~170 s) the last resort: the GPU tests of the few-row kernel
#      and the default layout against the tiled kernel and cuBLAS at M = 1 / 16.
#   bash bench/ab/pending_s81.sh "$OUT" f|s|m|q|d|g
set -uo pipefail
OUT=${1:?"usage: pending_s81.sh OUTDIR f|s|m|q|d|g"}
export OUT PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "card: $card"
case "${2:?f|s|m|q|d|g}" in
  f)
    timeout -k 10 150 python3 bench/ab/pair_train_ab.py --reps 10 --profile 5 \
      --json "$OUT/pair_train_prof.json" > "$OUT/pair_train_prof.log" 2>&1
    echo "profile rc $?"; grep -v -i warn "$OUT/pair_train_prof.log"
    timeout -k 10 150 python3 bench/ab/skinny_ab.py --ms 1 16 --reps 20 --splits 1 0 \
      > "$OUT/skinny_tilings.log" 2>&1
    echo "tilings rc $?"; grep -v -i warn "$OUT/skinny_tilings.log"
    ;;
  s)
    timeout -k 10 150 python3 -m pytest -q -p no:cacheprovider -n 12 tests/test_linear_act.py \
      -k "skinny" > "$OUT/tests_s.log" 2>&1
    echo "tests rc $?"; tail -4 "$OUT/tests_s.log"
    timeout -k 10 80 compute-sanitizer --tool memcheck --report-api-errors no \
      --error-exitcode 3 python3 bench/sanitize.py linear_skinny:bfloat16 \
      > "$OUT/memcheck_skinny.log" 2>&1
    echo "memcheck rc $?"; tail -3 "$OUT/memcheck_skinny.log"
    timeout -k 10 200 python3 bench/ab/skinny_ab.py --ms 1 16 32 --reps 20 --tilings default \
      --splits 1 0 --skinny g1w8u2 g1w8u4 g1w16u2 g2w8u2 g1w8u2p g1w8u2:none \
      > "$OUT/skinny_sweep.log" 2>&1
    echo "sweep rc $?"; grep -v -i warn "$OUT/skinny_sweep.log"
    ;;
  m)
    timeout -k 10 120 python3 -m pytest -q -p no:cacheprovider -n 12 tests/test_linear_act.py \
      -k "skinny" > "$OUT/tests_s.log" 2>&1
    echo "tests rc $?"; tail -4 "$OUT/tests_s.log"
    timeout -k 10 60 compute-sanitizer --tool memcheck --report-api-errors no \
      --error-exitcode 3 python3 bench/sanitize.py linear_skinny:bfloat16 \
      > "$OUT/memcheck_skinny.log" 2>&1
    echo "memcheck rc $?"; tail -3 "$OUT/memcheck_skinny.log"
    timeout -k 10 110 python3 bench/ab/skinny_ab.py --ms 1 16 --reps 20 --tilings default \
      --splits 1 0 --skinny g1w8u2 g1w8u4 g1w16u2 > "$OUT/skinny_sweep.log" 2>&1
    echo "sweep rc $?"; grep -v -i warn "$OUT/skinny_sweep.log"
    ;;
  q)
    timeout -k 5 90 python3 -m pytest -q -p no:cacheprovider -n 12 tests/test_linear_act.py \
      -k "skinny" > "$OUT/tests_s.log" 2>&1
    echo "tests rc $?"; tail -4 "$OUT/tests_s.log"
    timeout -k 5 70 python3 bench/ab/skinny_ab.py --ms 1 16 --reps 20 --tilings default \
      --splits 1 --skinny g1w8u2 g1w16u2 --no-gated > "$OUT/skinny_sweep.log" 2>&1
    echo "sweep rc $?"; grep -v -i warn "$OUT/skinny_sweep.log"
    ;;
  d)
    NUMBA_FUSED_TEST_ON=split,pairs,skinny timeout -k 10 420 python3 -m pytest -q \
      -p no:cacheprovider -n 12 tests/test_linear_act.py tests/test_gated_linear.py \
      tests/test_wgmma.py tests/test_patch.py tests/test_fast_path.py tests/test_no_sync.py \
      tests/test_cupy_fast.py tests/test_kernel_cache.py > "$OUT/tests_d.log" 2>&1
    echo "tests rc $?"; tail -4 "$OUT/tests_d.log"
    timeout -k 10 120 compute-sanitizer --tool racecheck --report-api-errors no \
      --error-exitcode 3 python3 bench/sanitize.py linear_split_k:float16 \
      > "$OUT/racecheck_split.log" 2>&1
    echo "racecheck rc $?"; tail -3 "$OUT/racecheck_split.log"
    ;;
  g)
    timeout -k 10 240 python3 -m bench.decode_step --out "$OUT" > "$OUT/decode_step.log" 2>&1
    echo "decode rc $?"; grep -v -i warn "$OUT/decode_step.log" | tail -12
    ;;
  *) echo "f, s, m, q, d or g" >&2; exit 2 ;;
esac
