#!/usr/bin/env bash
# Seventy-first session (no device: refused, then paused). What waits for the GPU:
#   c: the kernel cache (numba_fused/kernel_cache.py, NUMBA_FUSED_CACHE_DIR; built and
#      tested on the CPU only): tests/test_kernel_cache.py (its gpu test: a second
#      process loads every kernel the first stored, same bits as without the cache),
#      bench/first_call.py (first-call seconds per op: no cache / cold / warm;
#      predicted: warm well under a tenth of no cache), then a slice of the op tests
#      run twice over one cache directory (8 workers storing at once, then loading:
#      predicted the same passes both times, the second with no compile). ~6 min.
#   a: pending_s70.sh a (any card): test_layer_norm.py whole at the seventieth
#      session's fix, the sanitizers on layer_norm_stats_block. ~8 min.
#   o: pending_s70.sh o (an H200 only): v61's float32 RMSNorm A/B.
#   bash bench/ab/pending_s71.sh "$OUT" c|a|o
set -uo pipefail
OUT=${1:?"usage: pending_s71.sh OUTDIR c|a|o"}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
case "${2:?c|a|o}" in
  c)
    timeout -k 10 200 python3 -m pytest -q -p no:cacheprovider -rfEs tests/test_kernel_cache.py \
      > "$OUT/kernel_cache_tests.log" 2>&1
    echo "kernel_cache tests rc $?"; tail -3 "$OUT/kernel_cache_tests.log"
    timeout -k 10 200 python3 bench/first_call.py --json "$OUT/first_call.json" \
      > "$OUT/first_call.log" 2>&1
    echo "first_call rc $?"; cat "$OUT/first_call.log"
    CACHE=$(mktemp -d)
    for pass in 1 2; do
      NUMBA_FUSED_CACHE_DIR="$CACHE" timeout -k 10 150 python3 -m pytest -q -p no:cacheprovider \
        -n 8 -m "not ptx" -rfEs tests/test_layer_norm.py tests/test_dropout.py \
        -k "without_stats or v62 or bias_grad" > "$OUT/cached_tests_$pass.log" 2>&1
      echo "cached tests pass $pass rc $? ($(ls "$CACHE" | wc -l) entries)"
      tail -2 "$OUT/cached_tests_$pass.log"
    done
    ;;
  a|o)
    bash bench/ab/pending_s70.sh "$OUT" "$2"
    ;;
  *) echo "c, a or o" >&2; exit 2 ;;
esac
