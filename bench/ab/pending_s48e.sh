#!/usr/bin/env bash
# Forty-eighth session: the L1 / shared carveout. Kernel.resident_blocks set every
# kernel it was asked about with any dynamic shared memory to prefer the whole
# carveout as shared (ncu: the 16-bit LayerNorm backward with w and b at 16384 x 4096
# ran under a 233 KB shared configuration, ~23 KB of L1; without w and b, no dynamic
# shared memory, 8 KB). Now only requests over the 48 KB default do that.
# A/B by process (fix / old / fix / old): affine_share (LayerNorm and RMSNorm, fp16
# and bf16, A/B/B/A inside), "old" being this tree with the old resident_blocks; then
# ncu's launch statistics of the fixed backward with w and b.
#   bash bench/ab/pending_s48e.sh "$OUT" [ab|ncu|all]
set -uo pipefail
OUT=${1:?usage: pending_s48e.sh OUTDIR [ab|ncu|all]}
WHAT=${2:-all}
SRC=$PWD
export PYTHONUNBUFFERED=1
mk() {
  local dir=/tmp/carve_$1
  rm -rf "$dir" && mkdir -p "$dir" && cp -r "$SRC/numba_fused" "$SRC/interop" "$SRC/bench" "$dir/"
  if [ "$1" = old ]; then
    python3 - "$dir/numba_fused/launch.py" <<'PY'
import sys
p = sys.argv[1]
s = open(p).read()
new = ("            if shared and shared > self._dynamic_cap(device):\n"
       "                self._ensure_smem(int(shared), device)\n")
assert s.count(new) == 1
open(p, "w").write(s.replace(new, "            self._ensure_smem(int(shared), device)\n"))
PY
  fi
}
if [ "$WHAT" != ncu ]; then
  mk fix; mk old
  i=0
  for tag in fix old fix old; do
    i=$((i + 1))
    (cd /tmp/carve_$tag && PYTHONPATH=/tmp/carve_$tag timeout -k 5 200 python3 \
      bench/ab/affine_share.py) > "$OUT/s48e_${i}_$tag.txt" 2>&1
    echo "== $i $tag rc $?"; grep -E "^\| (ln|rms)" "$OUT/s48e_${i}_$tag.txt"
  done
fi
if [ "$WHAT" != ab ]; then
  rep="$OUT/ncu48e_wb"
  PYTHONPATH="$SRC" timeout -k 5 150 ncu --nvtx --nvtx-include "prof/" --clock-control none \
    --section LaunchStats --section Occupancy --section SpeedOfLight -o "$rep" -f \
    python3 bench/profile_op.py ln_bwd --dtype float16 --shape 16384x4096 --affine wb \
    > "$rep.log" 2>&1
  echo "ncu rc $?"
  timeout -k 5 60 ncu -i "$rep.ncu-rep" --page details > "$rep.txt" 2>&1
  grep -E "^  [a-z_]+|Duration|DRAM Throughput|Shared Memory Configuration|Dynamic Shared|Achieved Occupancy" "$rep.txt" | cut -c1-120
  rm -f "$rep.ncu-rep"
fi
