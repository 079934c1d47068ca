#!/usr/bin/env bash
# Forty-eighth session, diagnostic (nothing here ships), after pending_s48b/c: at
# 16384 x 4096 fp16 the per-element w / b work costs nothing in the shipped two-row
# layout, yet one-row layouts with w are slower than with b alone. Separate the
# layout's cost from w's: affine_share (LayerNorm variants, A/B/B/A) on
#   e1 HEAD; e2 HEAD with bwd_block 512 (every variant in two-row blocks);
#   e3 "bare" (no aw / ab accumulation and wd = g: the row loop of the variant
#      without w and b, plus the partial rows and the dW / dB kernel);
#   e4 bare in one-row blocks with shuffles (bwd_block 256, bwd_red_direct off);
#   e5 HEAD again.
#   bash bench/ab/pending_s48d.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: pending_s48d.sh OUTDIR}
SRC=$PWD
K=numba_fused/layer_norm.py
run() {
  local i=$1 tag=$2 tune=$3 dir=/tmp/diag_$2
  if [ ! -d "$dir" ]; then
    mkdir -p "$dir" && cp -r "$SRC/numba_fused" "$SRC/interop" "$SRC/bench" "$dir/"
    [ "$tag" = bare ] && sed -i 's/aw\[o + e\] += g \* hx/pass/; s/ab\[o + e\] += g \* act/pass/; s/wd = g \* wv\[e\]/wd = g/' "$dir/$K"
  fi
  (cd "$dir" && diff -u "$SRC/$K" "$K" | grep '^[-+] ' ; \
   PYTHONPATH="$dir" timeout -k 5 150 python3 bench/ab/affine_share.py --dtypes float16 \
     --ops ln --tune "$tune") > "$OUT/s48d_e${i}_$tag.txt" 2>&1
  echo "== e$i $tag $tune rc $?"; grep -E "^\| ln" "$OUT/s48d_e${i}_$tag.txt"
}
rm -rf /tmp/diag_base /tmp/diag_bare
run 1 base '{}'
run 2 base '{"bwd_block": 512}'
run 3 bare '{}'
run 4 bare '{"bwd_block": 256, "bwd_red_direct": false}'
run 5 base '{}'
