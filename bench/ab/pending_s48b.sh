#!/usr/bin/env bash
# Forty-eighth session, diagnostic (nothing here ships): what each per-element piece
# of the 16-bit LayerNorm backward row kernel with w and b costs at 16384 x 4096.
# Each variant is a copy of the tree with one line of the row kernel's first pass
# removed (its dW or dB is then wrong: timing only), timed by affine_share.py (fp16,
# A/B/B/A within the process); the base runs first and last.
#   base: HEAD. noaw: no `aw += g * hx`. noab: no `ab += g * act`.
#   nowmul: `wd = g` (no w multiply; w's per-row unpack goes with it).
#   noacc: neither accumulator.
#   bash bench/ab/pending_s48b.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: pending_s48b.sh OUTDIR}
SRC=$PWD
K=numba_fused/layer_norm.py
run() {
  local tag=$1 dir=/tmp/diag_$1
  rm -rf "$dir" && mkdir -p "$dir" && cp -r "$SRC/numba_fused" "$SRC/interop" "$SRC/bench" "$dir/"
  case "$tag" in
    noaw) sed -i 's/aw\[o + e\] += g \* hx/pass/' "$dir/$K" ;;
    noab) sed -i 's/ab\[o + e\] += g \* act/pass/' "$dir/$K" ;;
    nowmul) sed -i 's/wd = g \* wv\[e\]/wd = g/' "$dir/$K" ;;
    noacc) sed -i 's/aw\[o + e\] += g \* hx/pass/; s/ab\[o + e\] += g \* act/pass/' "$dir/$K" ;;
  esac
  (cd "$dir" && diff -u "$SRC/$K" "$K" | grep '^[-+] ' ; \
   PYTHONPATH="$dir" timeout -k 5 150 python3 bench/ab/affine_share.py --dtypes float16 --ops ln) \
    > "$OUT/s48b_$2_$tag.txt" 2>&1
  echo "== $tag rc $?"; grep -E "^\| ln|^\| rms|^[-+] " "$OUT/s48b_$2_$tag.txt"
}
i=0
for v in base noaw noab nowmul noacc base; do i=$((i + 1)); run "$v" "$i"; done
