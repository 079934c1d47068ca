#!/usr/bin/env bash
# For the next session's device time (H200), after the forty-fifth session shipped
# LayerNorm v39 (16-bit backward rows of 64 / 128 / 256 threads with w or b in
# 512-thread blocks, a named barrier a row). On the GPU that session ran v39's A/B, the
# sweep, parts 4 and 5 of the LayerNorm file and the four sanitizers; after the device
# time it restricted the 512-thread blocks to rows with w or b (rows without keep 128:
# 96 registers, not timed) and listed the `_nb` kernels in shipped_kernels. Calls, in
# this order:
# a4 / a5: GPU suite parts 4 and 5 (tests/test_layer_norm.py) at the final v39 tree.
# d: where the 16-bit LayerNorm backward's last 1-2 us at 16384 x 4096 are (target
#    0.112; v39 113.1-114.0): ab/ln_dwdb_bound.py (the dW / dB reduction a no-op: what
#    132 partial rows cost now; 4.8 us at v38's 264), ab/affine_share.py at v39, and
#    ncu of the row kernel (fp16, 16384 x 4096 and 32768 x 2048). Predicted: the
#    reduction 2-3 us (half v38's reads, the same launch and wait), the row kernel's
#    barrier stall share under the thirty-fifth session's 38% (a barrier over 8 warps
#    of a 16-warp SM, the other row's warps issuing meanwhile). If the reduction is
#    still >= 2 us, the next candidate is a cluster's DSMEM sum of the partial rows
#    (clusters of 2 or 4 blocks, 66 / 33 partial rows).
# i: issue #16's "through interop.torch" table at v39 (ab/interop_s27.sh: dropout and
#    the norms at 16384 x 4096, 8192 x 8192, 65536 x 1024).
#   bash bench/ab/pending_s46.sh "$OUT" a4|a5|d|i
set -uo pipefail
OUT=${1:?usage: pending_s46.sh OUTDIR a4|a5|d|i}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
case "${2:?a4, a5, d or i}" in
  a4) bash bench/ab/full_suite.sh "$OUT" 4 ;;
  a5) bash bench/ab/full_suite.sh "$OUT" 5 ;;
  d)
    timeout -k 10 150 python3 bench/ab/ln_dwdb_bound.py > "$OUT/dwdb_bound.log" 2>&1
    echo "dwdb_bound rc $?"; grep '^|' "$OUT/dwdb_bound.log"
    timeout -k 10 120 python3 bench/ab/affine_share.py > "$OUT/affine_share.log" 2>&1
    echo "affine_share rc $?"; cat "$OUT/affine_share.log"
    . bench/ab/ncu_ln.sh
    ncu_norm_setup
    for shape in 16384x4096 32768x2048; do
      ncu_norm "$OUT/ncu46_ln_bwd_float16_$shape.txt" 60 "$PAT" ln_bwd --dtype float16 \
        --shape "$shape" --provider numba
    done
    ;;
  i) bash bench/ab/interop_s27.sh "$OUT" ;;
  *) echo "a4, a5, d or i" >&2; exit 2 ;;
esac
