#!/usr/bin/env bash
# Written in the forty-eighth session for the next (an H200). v42 (the L1 carveout:
# Kernel.resident_blocks no longer sets a kernel with up to 48 KB of dynamic shared
# memory to prefer all of the carveout as shared) took 5.6-7.2 us off the 16-bit norm
# backwards with w. Every backward tuning before it was measured with that penalty on
# the kernels that reserve shared memory (rows with w, blocks of several rows), so:
#   i: issue #16's interop.torch table at v42 (ab/interop_s27.sh: dropout, and the
#      norms at 16384 x 4096, 8192 x 8192, 65536 x 1024; ~5 minutes).
#   b: bwd_block again (v39's 512-thread blocks of several rows against 128, the old
#      default, and 256): affine_share (both norms, fp16 / bf16, A/B/B/A in a process)
#      at 65536 x 1024, 32768 x 2048, 16384 x 4096, 8192 x 8192 (~5 minutes).
#   k: the other knobs on rows with w at 16384 x 4096: bwd_red_direct off, bwd_w_regs
#      off, bwd_min_blocks 3, bwd_stages 2 (~3 minutes).
#   w: candidate v43 (bench/ab/ln_v43_wr_noshared.patch): one-row kernels with w in
#      registers reserve no shared floats (they use none: 32 KB at 16-bit N = 8192,
#      16 KB at 4096 under bwd_block 256). Predicted: even to -1 us (the shared
#      configuration drops from 64 / 32 KB to 8 KB; the L1 already has ~160+ KB).
#      A/B by process, HEAD / v43 / HEAD / v43 (~3 minutes).
#   bash bench/ab/pending_s49.sh "$OUT" {i|b|k|w}
set -uo pipefail
OUT=${1:?"usage: pending_s49.sh OUTDIR i|b|k|w"}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
ab() {  # ab TAG SHAPE TUNE
  timeout -k 5 120 python3 bench/ab/affine_share.py --shape "$2" --tune "$3" \
    > "$OUT/s49_$1.txt" 2>&1
  echo "== $1 $2 $3 rc $?"; grep -E "^\| (ln|rms)" "$OUT/s49_$1.txt"
}
case "${2:?i, b, k or w}" in
  i) bash bench/ab/interop_s27.sh "$OUT" ;;
  b)
    for shape in 65536x1024 32768x2048 16384x4096 8192x8192; do
      for blk in default 128 256; do
        tune='{}'
        [ "$blk" = default ] || tune="{\"bwd_block\": $blk}"
        ab "b_${shape}_$blk" "$shape" "$tune"
      done
    done
    ;;
  k)
    i=0
    for tune in '{}' '{"bwd_red_direct": false}' '{"bwd_w_regs": false}' \
        '{"bwd_min_blocks": 3}' '{"bwd_stages": 2}' '{}'; do
      i=$((i + 1))
      ab "k$i" 16384x4096 "$tune"
    done
    ;;
  w)
    SRC=$PWD
    rm -rf /tmp/v43 && mkdir -p /tmp/v43 && cp -r numba_fused interop bench /tmp/v43/ \
      && (cd /tmp/v43 && patch -p1 -s < "$SRC/bench/ab/ln_v43_wr_noshared.patch") || exit 1
    i=0
    for tree in "$SRC" /tmp/v43 "$SRC" /tmp/v43; do
      i=$((i + 1))
      for case in "8192x8192 {}" '16384x4096 {"bwd_block": 256}'; do
        read -r shape tune <<< "$case"
        (cd "$tree" && PYTHONPATH="$tree" timeout -k 5 120 python3 bench/ab/affine_share.py \
          --shape "$shape" --tune "$tune") > "$OUT/s49_w${i}_${shape}.txt" 2>&1
        echo "== w$i $tree $shape $tune rc $?"; grep -E "^\| (ln|rms)" "$OUT/s49_w${i}_${shape}.txt"
      done
    done
    ;;
  *) echo "i, b, k or w" >&2; exit 2 ;;
esac
