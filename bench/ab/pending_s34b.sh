#!/usr/bin/env bash
# LayerNorm v36 on an H200 (thirty-fourth session): the row sums' split-warp shuffles
# (_row_sum2, _row_sum2_direct: warp_sum_halves / warp_sum2), which keep every bit and
# take the 16-bit backward row kernel at N = 4096 from 10 SHFL and 7 STS to 5 and 6
# (SASS, CPU). v35 is this checkout with bench/ab/v36_split.patch reversed, in /tmp.
#   d: the GPU tests of the sums and of the kernels built on them, memcheck / racecheck
#      of the forward and backward, and both trees' output digests at every sweep row
#      length and dtype (bits_dump.py), compared: any differing bit fails v36.
#   e: the A/B, v35 / v36 twice over (a process each): LayerNorm N = 1024 / 4096 /
#      8192 at every dtype, RMSNorm N = 512 / 4096 at fp16 and float32; forward and
#      backward columns. Prediction: backward 1-3 us faster at 16 bits (the MIO-bound
#      row kernel: ~20 -> ~14 MIO instructions a warp and row), float32 and the
#      forwards within 0.5 us.
#   bash bench/ab/pending_s34b.sh "$OUT" d|e
set -uo pipefail
OUT=${1:?usage: pending_s34b.sh OUTDIR d|e}
PART=${2:?usage: pending_s34b.sh OUTDIR d|e}
NEW=$PWD
OLD=/tmp/v35_tree
if [ ! -d "$OLD" ]; then
  mkdir -p "$OLD" && cp -a "$NEW"/. "$OLD"/ && rm -rf "$OLD/.git" \
    && (cd "$OLD" && patch -R -p1 --quiet < bench/ab/v36_split.patch) \
    || { echo "could not build the v35 tree" >&2; exit 3; }
fi
case "$PART" in
d)
  . bench/ab/tl.sh
  timeout -k 5 120 python3 -m pytest -q -p no:cacheprovider tests/test_helpers.py \
    -k "warp_pair or warp_reduc" > "$OUT/d_helpers.log" 2>&1
  echo "helpers rc $?"; tail -2 "$OUT/d_helpers.log"
  ab_verify v36_verify 330 "row_sum2 or direct_cross_warp or vs_float64 or one_row or \
lean_backward or subwarp or within_2x or lean_forward_matches or deterministic_is_bit" \
    "layer_norm:float16 layer_norm:float32 layer_norm_bwd:float16 layer_norm_bwd:float32"
  timeout -k 5 150 python3 bench/ab/bits_dump.py --out "$OUT/bits_v36.json" \
    > "$OUT/bits_v36.log" 2>&1
  echo "v36 dump rc $?"
  (cd "$OLD" && PYTHONPATH="$OLD" timeout -k 5 150 python3 bench/ab/bits_dump.py \
    --out "$OUT/bits_v35.json" > "$OUT/bits_v35.log" 2>&1)
  echo "v35 dump rc $?"
  python3 bench/ab/bits_dump.py --compare "$OUT/bits_v35.json" "$OUT/bits_v36.json"
  echo "compare rc $?"
  ;;
e)
  for pass in 1 2; do
    for tree in "$OLD" "$NEW"; do
      tag=$([ "$tree" = "$OLD" ] && echo v35 || echo v36)_$pass
      (cd "$tree" && PYTHONPATH= TL_DIR="$OUT/tl_$tag" && mkdir -p "$TL_DIR" \
        && export TL_DIR && . bench/ab/tl.sh > /dev/null \
        && tl ln 100 --reps 30 --op ln --ns 1024,4096,8192 \
          --dtypes float16,bfloat16,float32 --tunes '{}' \
        && tl rms 50 --reps 30 --op rms --ns 512,4096 --dtypes float16,float32 --tunes '{}')
    done
  done
  ;;
*) echo "PART must be d or e" >&2; exit 2 ;;
esac
