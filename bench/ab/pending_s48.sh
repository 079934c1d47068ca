#!/usr/bin/env bash
# Written in the forty-seventh session for the next (an H200), for the 16-bit LayerNorm
# backward's last 1-1.7 us (113.1-113.7 us at 16384 x 4096 against 0.112). At v41,
# affine_share reads (fp16, us): w and b 113.1, w 111.9, b 106.0, neither 99.7, so w and
# b cost 13.4 us over neither: ~3.7 in the dW / dB reduction (forty-sixth session's
# no-op bound), the rest in the row kernel, whose layout differs with w (512-thread
# blocks of two rows at named barriers, w in registers, 128 registers, one block an SM)
# from neither's (one-row 256-thread blocks, shuffled step, 94 registers, two an SM).
# Every way to shorten the reduction's wait has lost (v40, v40b, bwd_grid 128, its
# block shapes), so the next place to look is the row kernel's ~9.7 us.
#   p: ncu (--set full, source counters, SASS page) of the backward at 16384 x 4096
#      fp16: with w and b (both kernels: the row kernel and the dependent dW / dB
#      kernel), without w and b, and with w and b in neither's layout (bwd_block 256:
#      one row a block, the direct step) to split the layout's share from the
#      accumulators'. Per kernel: duration, DRAM throughput, registers, occupancy,
#      issue, top stalls, and the SASS lines with the most stall samples. ~4 minutes.
#   bash bench/ab/pending_s48.sh "$OUT" p
set -uo pipefail
OUT=${1:?usage: pending_s48.sh OUTDIR p}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
case "${2:?p}" in
  p)
    for case in "wb {}" "none {}" 'wb {"bwd_block": 256}'; do
      read -r affine tune <<< "$case"
      tag="ln_bwd_fp16_${affine}$([ "$tune" = "{}" ] || echo _b256)"
      rep="$OUT/ncu48_$tag"
      timeout -k 5 150 ncu --nvtx --nvtx-include "prof/" --clock-control none \
        --set full --import-source yes -o "$rep" -f \
        python3 bench/profile_op.py ln_bwd --dtype float16 --shape 16384x4096 \
        --affine "$affine" --tuning "$tune" > "$rep.log" 2>&1
      echo "ncu $tag rc $?"
      timeout -k 5 60 ncu -i "$rep.ncu-rep" --page details > "$rep.txt" 2>&1
      timeout -k 5 60 ncu -i "$rep.ncu-rep" --page source --csv --print-source sass \
        > "$rep.sass.csv" 2>&1
      echo "pages rc $?"
      grep -E "^  [a-z_]+.*\(|Duration|DRAM Throughput|Registers Per|Achieved Occupancy|Issued Warp Per|No Eligible" \
        "$rep.txt" | head -24
      rm -f "$rep.ncu-rep"
    done
    ;;
  *) echo "p" >&2; exit 2 ;;
esac
