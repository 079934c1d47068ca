#!/usr/bin/env bash
# Written in the forty-ninth session for the next (an H200). LayerNorm v44 (float32 N =
# 7940-8192 backward on the wide2 kernel instead of the lean one) and v45 (the float32
# streaming backward with w takes the statistics pass) were measured in A/B under
# tuning and shipped, but the device time ran out before their defaults went through
# the GPU. In order:
#   t: the GPU tests that pick the new defaults (~1 minute), then suite part 4 (every
#      LayerNorm test but the same-bits ones, ~5 minutes) with the four sanitizers on
#      the float32 LayerNorm workload beside it (N = 8000 and 65536 reach v44 / v45).
#   s: the norms sweep at v45 (carry .whl), for RESULTS' table and plots.
#   a: v44 and v45 where they were not timed: float32 8000 (wide2 with idle lanes) and
#      2048 x 32768 (two chunks with w and b), default / old / default / old.
#   f: the float32 streaming backward at N = 12288 / 16384, 56-59% of copy in the v42
#      sweep (0.335 / 0.323 ms against a 0.190 floor: 12 bytes an element over 4.25
#      TB/s), the weakest backward cells: one 1024-thread block an SM with the row's
#      dW / dB in 96 / 128 KB of shared memory, the row read twice. Existing knobs
#      only, for more rows in flight an SM: 512-thread rows (two blocks an SM at
#      12288), the same with shared accumulators capped at 64 KB (two column chunks
#      of 48 / 64 KB, and v45's statistics pass with them), accumulators in global
#      memory (~4 min).
#   bash bench/ab/pending_s50.sh "$OUT" {t|s|a|f}
set -uo pipefail
OUT=${1:?"usage: pending_s50.sh OUTDIR t|s|a|f"}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
ab() {  # ab TAG SHAPE TUNE: affine_share at float32
  timeout -k 5 100 python3 bench/ab/affine_share.py --dtypes float32 --shape "$2" \
    --tune "$3" > "$OUT/s50_$1.txt" 2>&1
  echo "== $1 $2 $3 rc $?"; grep -E "^\| (ln|rms)" "$OUT/s50_$1.txt"
}
case "${2:?t, s, a or f}" in
  t)
    timeout -k 5 150 python3 -m pytest -q -p no:cacheprovider -n 14 tests/test_layer_norm.py \
      -k "given_statistics or lean_backward or wide_backward or one_row_backward_same_bits" \
      > "$OUT/v45_tests.log" 2>&1
    echo "v45 tests rc $?"; tail -3 "$OUT/v45_tests.log"
    ( SAN_TOOLS="memcheck racecheck synccheck initcheck" SAN_OPS="layer_norm:float32" \
      SAN_TIMEOUT=380 timeout -k 10 400 bash bench/gpu_harness.sh "$OUT/san" \
      --stages sanitize > "$OUT/san.log" 2>&1 ) &
    TESTS=tests/test_layer_norm.py timeout -k 10 400 bash bench/gpu_harness.sh \
      "$OUT/part4" --stages tests --workers 12 -k "not same_bits"
    tail -3 "$OUT/part4/pytest.log"
    wait
    cat "$OUT/san/summary.md"
    ;;
  s) bash bench/ab/norms_sweep.sh "$OUT" h200_s50_v45 ;;
  a)
    i=0
    for case in '7999x8000 {"bwd_lean_f32": true}' '2048x32768 {"bwd_stats_pass": false}'; do
      read -r shape old <<< "$case"
      for tune in '{}' "$old" '{}' "$old"; do
        i=$((i + 1))
        ab "a$i" "$shape" "$tune"
      done
    done
    ;;
  f)
    i=0
    for shape in 5461x12288 4096x16384; do
      for tune in '{}' '{"max_tpr": 512}' '{"max_tpr": 512, "sacc_bytes": 65536}' \
          '{"sacc_bytes": 0}' '{}'; do
        i=$((i + 1))
        ab "f$i" "$shape" "$tune"
      done
    done
    ;;
  *) echo "t, s, a or f" >&2; exit 2 ;;
esac
