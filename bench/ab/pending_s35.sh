#!/usr/bin/env bash
# Written in the thirty-fourth session for the next (an H200): what LayerNorm v36 (the
# row sums' split-warp shuffles, bench/NOTES.md) still lacks. v35 is this checkout with
# bench/ab/v36_split.patch reversed, built in /tmp.
#   a: the checks v36 has not had: memcheck / racecheck of sanitize.py's layer_norm
#      (forward) and layer_norm_bwd (fp16, float32; in the thirty-fourth session they
#      needed more than the ~130 s left to them), the GPU tests of the row sums (the
#      one-warp rows' fallback too). ~7 minutes.
#   d: both trees' output digests at every sweep row length and dtype (bits_dump.py),
#      compared: any differing bit fails v36. ~4 minutes.
#   b: the A/B v35 / v36 at the row lengths the thirty-fourth session did not time:
#      N = 512 (one-warp rows: v36 keeps v35's two warp_sums there, so even is the
#      prediction), 768, 2048, 5120 at fp16 and float32, LayerNorm and RMSNorm;
#      three alternating passes. ~7 minutes.
#   c: the norms sweep at v36 for RESULTS.md (~8 minutes; carry .whl).
#   e: ncu of the 16-bit LayerNorm backward at v36 (16384 x 4096, the 0.112 target
#      v36 did not move; 65536 x 1024, where it took 10 us off): stall reasons,
#      occupancy, DRAM throughput of the row kernel and of the dW / dB reduction.
#      The thirty-fourth session removed 6 of ~20 MIO instructions a warp and row
#      from the 4096 row kernel and gained nothing, so "MIO-bound" (twenty-sixth
#      session, before v32 / v35) needs a fresh reading. ~4 minutes.
#   bash bench/ab/pending_s35.sh "$OUT" a|b|c|d|e
# The v35 tree: v36_split.patch stopped reversing after 8fb4b3c's review, so d and b
# take v35's package from v35_pkg.tgz at the checkout's root when it is there (make it
# with `git archive 0dbfc41 numba_fused | gzip > v35_pkg.tgz`; leave it uncommitted:
# untracked files travel with the call).
set -uo pipefail
OUT=${1:?usage: pending_s35.sh OUTDIR a|b|c|d|e}
PART=${2:?usage: pending_s35.sh OUTDIR a|b|c|d|e}
NEW=$PWD
OLD=/tmp/v35_tree
old_tree() {
  [ -d "$OLD" ] && return 0
  mkdir -p "$OLD" && cp -a "$NEW"/. "$OLD"/ && rm -rf "$OLD/.git" \
    && if [ -f "$NEW/v35_pkg.tgz" ]; then rm -rf "$OLD/numba_fused" && tar -xzf "$NEW/v35_pkg.tgz" -C "$OLD"; \
       else (cd "$OLD" && patch -R -p1 --quiet < bench/ab/v36_split.patch); fi \
    || { echo "could not build the v35 tree" >&2; return 3; }
}
case "$PART" in
a)
  . bench/ab/tl.sh
  SAN_OPS="layer_norm:float16 layer_norm:float32 layer_norm_bwd:float16 layer_norm_bwd:float32" \
    SAN_TOOLS="memcheck racecheck" SAN_TIMEOUT=330 timeout -k 10 360 bash bench/gpu_harness.sh \
    "$OUT/san" --stages sanitize > "$OUT/san.out" 2>&1
  echo "sanitize rc $?"; cat "$OUT/san/summary.md"
  timeout -k 5 120 python3 -m pytest -q -p no:cacheprovider tests/test_helpers.py \
    tests/test_layer_norm.py -k "warp_pair or row_sum2 or direct_cross_warp" \
    > "$OUT/a_tests.log" 2>&1
  echo "tests rc $?"; tail -2 "$OUT/a_tests.log"
  ;;
d)
  old_tree || exit 3
  PYTHONPATH="$NEW" timeout -k 5 300 python3 bench/ab/bits_dump.py --out "$OUT/bits_v36.json" \
    > "$OUT/bits_v36.log" 2>&1
  echo "v36 dump rc $?"
  [ -f "$OUT/bits_v35.json" ] || (cd "$OLD" && PYTHONPATH="$OLD" timeout -k 5 300 python3 bench/ab/bits_dump.py \
    --out "$OUT/bits_v35.json" > "$OUT/bits_v35.log" 2>&1)
  echo "v35 dump rc $?"
  python3 bench/ab/bits_dump.py --compare "$OUT/bits_v35.json" "$OUT/bits_v36.json"
  echo "compare rc $?"
  ;;
b)
  old_tree || exit 3
  for pass in $(seq 1 "${PASSES:-3}"); do
    for tree in "$OLD" "$NEW"; do
      tag=$([ "$tree" = "$OLD" ] && echo v35 || echo v36)_$pass
      (cd "$tree" && PYTHONPATH= TL_DIR="$OUT/tl_$tag" && mkdir -p "$TL_DIR" \
        && export TL_DIR && . bench/ab/tl.sh > /dev/null \
        && tl ln 60 --reps 30 --op ln --ns 512,768,2048,5120 --dtypes float16,float32 \
          --tunes '{}' \
        && tl rms 60 --reps 30 --op rms --ns 512,768,2048,5120 --dtypes float16,float32 \
          --tunes '{}') | tee -a "$OUT/b_rows.log"
    done
  done
  ;;
c)
  bash bench/ab/norms_sweep.sh "$OUT" h200_s35_v36
  ;;
e)
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
  . bench/ab/ncu_ln.sh
  ncu_norm_setup
  for shape in 16384x4096 65536x1024; do
    ncu_norm "$OUT/ncu35_ln_bwd_float16_$shape.txt" 60 "$PAT" ln_bwd --dtype float16 \
      --shape "$shape" --provider numba
  done
  ;;
*) echo "PART must be a, b, c, d or e" >&2; exit 2 ;;
esac
