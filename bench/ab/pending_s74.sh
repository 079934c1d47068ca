#!/usr/bin/env bash
# Seventy-fourth session: pending_s73.sh k passed on an H100 (every key the same in
# both processes, first_call 11 of 11 hits, the cache tests 14 passed), so the cache
# is on by default now (1f5ffcc: ~/.cache/numba_fused). What waits for the GPU:
#   x: (any card, ~9 min) on an H200 first v61's float32 RMSNorm A/B with statistics
#      (offgrid_plain.py --stats, lean against the plain kernel at two words; the H100
#      had plain 1.6-3.0 us faster); then, on any card, part 3 of the GPU suite (the
#      cache tests, with test_cache_serves_a_second_process[default], and the front
#      ends) and part 1 (dropout) with the cache at its default, nothing set:
#      predicted all pass, the default directory filled once by 14 workers.
#      (Ran on an H100: parts 3 and 1 passed, 342 and 806; the default directory held
#      622 entries, 319 MB, so 3d35ead compresses entries and bounds the directory.)
#   c: (any card, ~6 min) at 3d35ead: tests/test_kernel_cache.py, bench/first_call.py
#      (predicted: 11 of 11 hits, warm first calls within ~10 ms of before: a
#      decompress is ~1 ms), then part 2 of the suite (attention, linear, wgmma,
#      gated) with the cache at its default; entries' count and bytes after each.
#      (Ran on an H100: 17 passed, 11 of 11 hits; then parts 4, 5, 3 and 1: the whole
#      suite passed with the cache at its default.)
#   h: (an H200 only; on any other card it stops before any work, ~9 min) v61's
#      float32 RMSNorm A/B with statistics (as x), then the norms sweep's forwards for
#      RMSNorm (every dtype, every provider) where the H200 gaps are (float32 RMSNorm
#      2048-16384, 16-bit RMSNorm 8192): are they still there at today's code?
#   bash bench/ab/pending_s74.sh "$OUT" x|c|h
set -uo pipefail
OUT=${1:?"usage: pending_s74.sh OUTDIR x|c|h"}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
case "${2:?x|c|h}" in
  x)
    card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
    echo "card: $card"
    unset NUMBA_FUSED_CACHE_DIR NUMBA_FUSED_DISABLE_CACHE
    if [[ "$card" == *H200* ]]; then
      timeout -k 10 200 python3 bench/ab/offgrid_plain.py --stats \
        --cells f32-rms-1536,f32-rms-2304,f32-rms-2560,f32-rms-3072,f32-rms-3584 \
        > "$OUT/offgrid_stats.log" 2>&1
      echo "stats rc $?"; grep -v kernels "$OUT/offgrid_stats.log"
    fi
    bash bench/ab/full_suite.sh "$OUT" 3
    python3 -c "from numba_fused import kernel_cache as kc; print('default cache', kc.cache_dir(), kc.entries())"
    bash bench/ab/full_suite.sh "$OUT" 1
    python3 -c "from numba_fused import kernel_cache as kc; print('default cache', kc.cache_dir(), kc.entries())"
    ;;
  c)
    unset NUMBA_FUSED_CACHE_DIR NUMBA_FUSED_DISABLE_CACHE
    entries() {
      python3 -c "from numba_fused import kernel_cache as kc; print('default cache', kc.cache_dir(), kc.entries())"
    }
    timeout -k 10 200 python3 -m pytest -q -p no:cacheprovider -rfEs tests/test_kernel_cache.py \
      > "$OUT/kernel_cache_tests.log" 2>&1
    echo "kernel_cache tests rc $?"; tail -3 "$OUT/kernel_cache_tests.log"
    timeout -k 10 200 python3 bench/first_call.py --json "$OUT/first_call.json" \
      > "$OUT/first_call.log" 2>&1
    echo "first_call rc $?"; cat "$OUT/first_call.log"
    entries
    bash bench/ab/full_suite.sh "$OUT" 2
    entries
    ;;
  h)
    card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
    echo "card: $card"
    case "$card" in *H200*) ;; *) echo "not an H200" >&2; exit 3 ;; esac
    timeout -k 10 200 python3 bench/ab/offgrid_plain.py --stats \
      --cells f32-rms-1536,f32-rms-2304,f32-rms-2560,f32-rms-3072,f32-rms-3584 \
      > "$OUT/offgrid_stats.log" 2>&1
    echo "stats rc $?"; grep -v kernels "$OUT/offgrid_stats.log"
    . bench/ab/norms_sweep_fn.sh
    norms_sweep rms_norm rms_fwd fwd 330
    ;;
  *) echo "x, c or h" >&2; exit 2 ;;
esac
