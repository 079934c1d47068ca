#!/usr/bin/env bash
# Forty-seventh session, after v41 (the direct cross-warp step only on 16-bit one-row
# backward rows with w) and the removal of the refuted dwdb_flags candidate:
# v: the LayerNorm tests that pick or compare backward kernels (not the same-bits
#    ones), memcheck and racecheck of layer_norm_bwd and layer_norm_rms_sum1 (rows
#    with and without w, both schemes), and affine_share at the new default, 16384 x
#    4096 and 8192 x 8192, fp16 / bf16. Predicted: rows without w read as the
#    forty-seventh session's bwd_red_direct False runs (RMSNorm without w 16384 x 4096
#    ~99.8 us, LayerNorm neither ~100.1, b alone ~106.7), rows with w unchanged.
# s: part 5 of the GPU suite (the LayerNorm same-bits tests, v41's new variants
#    without w among them).
#   bash bench/ab/pending_s47c.sh "$OUT" v|s
set -uo pipefail
OUT=${1:?usage: pending_s47c.sh OUTDIR v|s}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
case "${2:?v or s}" in
  v)
    timeout -k 10 260 python3 -m pytest -q -p no:cacheprovider -n 14 --timeout 200 \
      tests/test_layer_norm.py tests/test_repo.py \
      -k "not same_bits and (direct or bwd_block or pdl or dwdb or scheme or rms_sum1 or repo or parses)" \
      > "$OUT/tests_v.log" 2>&1
    echo "tests rc $?: $(tail -1 "$OUT/tests_v.log")"
    bash bench/ab/san_pair.sh "$OUT" layer_norm_bwd:float16 bwd
    bash bench/ab/san_pair.sh "$OUT" layer_norm_rms_sum1:bfloat16 s1
    for shape in 16384x4096 8192x8192; do
      timeout -k 10 120 python3 bench/ab/affine_share.py --shape "$shape" \
        > "$OUT/as_$shape.log" 2>&1
      echo "affine_share $shape rc $?"; grep '^| [lr]' "$OUT/as_$shape.log"
    done
    ;;
  s)
    bash bench/ab/full_suite.sh "$OUT" 5
    ;;
  *) echo "v or s" >&2; exit 2 ;;
esac
