#!/usr/bin/env bash
# For the eighty-first session (pending_s80.sh d is the opt-ins' default-path run).
#   f: (any card, ~3-4 min) where our Llama-7B MLP training step loses to torch's
#      (pair_train_ab.py --profile: GPU time per kernel, pairs on, against torch's
#      cuBLAS step), then the decode tilings sweep (skinny_ab.py, every tiling at
#      M = 1 / 16, unsplit and the split rule's choice).
#   bash bench/ab/pending_s81.sh "$OUT" f
set -uo pipefail
OUT=${1:?"usage: pending_s81.sh OUTDIR f"}
export OUT PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "card: $card"
case "${2:?f}" in
  f)
    timeout -k 10 150 python3 bench/ab/pair_train_ab.py --reps 10 --profile 5 \
      --json "$OUT/pair_train_prof.json" > "$OUT/pair_train_prof.log" 2>&1
    echo "profile rc $?"; grep -v -i warn "$OUT/pair_train_prof.log"
    timeout -k 10 150 python3 bench/ab/skinny_ab.py --ms 1 16 --reps 20 --splits 1 0 \
      > "$OUT/skinny_tilings.log" 2>&1
    echo "tilings rc $?"; grep -v -i warn "$OUT/skinny_tilings.log"
    ;;
  *) echo "f" >&2; exit 2 ;;
esac
