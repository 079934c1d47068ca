#!/usr/bin/env bash
# For the eighty-third session (bench/NOTES.md, "Next (eighty-third session)").
#   d: (any card, ~8 min) pending_s81.sh d: the default paths with split, pairs and
#      the few-row rule on; if green, flip the three defaults.
#   g: (any card, ~3 min) pending_s81.sh g: decode_step.py with the host and GPU-kernel
#      columns and stock timed again last.
#   x: (any card, at most ~150 s) the few-row layouts with more weight rows a block at
#      M = 1 / 16 (x read by fewer blocks). Predicted: g2 layouts 2-3 us faster than
#      g1w8u2 at M = 16 (down 42.5, gate+up 66.8 on the H100), even at M = 1.
#   bash bench/ab/pending_s82.sh "$OUT" d|g|x
set -uo pipefail
OUT=${1:?"usage: pending_s82.sh OUTDIR d|g|x"}
export OUT PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
here=$(dirname "$0")
case "${2:?d|g|x}" in
  d|g) bash "$here/pending_s81.sh" "$OUT" "$2" ;;
  x)
    echo "card: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
    timeout -k 10 140 python3 bench/ab/skinny_ab.py --ms 1 16 --reps 20 --tilings \
      --skinny g1w8u2 g2w8u2 g2w4u2 g4w8u2 g2w8u1 --no-gated > "$OUT/skinny_groups.log" 2>&1
    echo "sweep rc $?"; grep -v -i warn "$OUT/skinny_groups.log"
    ;;
  *) echo "d, g or x" >&2; exit 2 ;;
esac
