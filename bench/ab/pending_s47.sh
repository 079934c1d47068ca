#!/usr/bin/env bash
# For the next session's device time (H200), after the forty-sixth session wrote the
# v40 candidate, tuning(dwdb_flags=True): each backward row block raises a flag once its
# dW / dB partial rows are out, and the dW / dB kernel (a dependent launch, its blocks
# on the SMs the early row blocks leave) reads each partial row when its flag rises
# instead of waiting in griddepcontrol.wait for the whole row kernel. Why: at v39's
# 16-bit layouts (16384 x 4096, 32768 x 2048, 65536 x 1024 on 132 blocks) the rows do
# not divide evenly, so blocks 0-7 run a 63rd row a slot (~1.8 us) while the other 124
# are done; the reduction (3.2-3.7 us end to end, pending_s46 d) now starts only after
# them. Same bits (simulator); PTX: ld.acquire.gpu, 32 registers, no spills.
# Calls, in this order (t about 5 min, f about 4):
# t: the GPU tests of the candidate (-k dwdb_flags), memcheck and racecheck of
#    bench/sanitize.py layer_norm_flags (fp16), affine_share (below).
# f: the A/B, A/B/B/A twice, LayerNorm and RMSNorm, fp16 / bf16, N = 1024 / 2048 /
#    4096: {} (v39) against fl (dwdb_flags). (A reduction block of (32, 16), so that
#    all 256 reduction blocks fit on the 124 early SMs where (32, 32)'s 248 slots
#    leave 8 for the late ones, would need 9 partial rows a thread: past
#    DWDB_FLAG_ROWS, so the launcher would fall back to the plain kernels.)
#    Predicted: fl 1-2 us faster than {} at every 16-bit cell (LayerNorm fp16 4096
#    113.3 -> 111.5-112.3). If fl wins: make it the default for
#    the row kernels it applies to (partials scheme, <= DWDB_FLAG_ROWS x 32 partial
#    rows), add the flagged kernels to shipped_kernels, rerun GPU suite part 4 / 5 and
#    the four sanitizers, then the sweep.
#    In t: ab/affine_share.py at the forty-sixth session's final default, where
#    rows with b alone went back to 128-thread blocks (v39 had put them in 512-thread
#    blocks untimed; across two sessions' runs b alone read 107.8-107.9 at v38 and
#    111.7-112.3 at v39, w alone and neither unchanged). Predicted: b alone 107.5-108.5,
#    the rest as in the forty-sixth session's run. Then RMSNorm without w (4 us behind
#    LayerNorm without w and b since the forty-fifth session) under bwd_blocks_per_sm
#    2, bwd_rms_sum1 False and bwd_red_direct False. ptxas (sm_90, offline): the
#    16-bit one-row kernel at N = 4096 without w and b takes 80 registers for RMSNorm
#    (3 blocks of 256 an SM) and 92 for LayerNorm (2), so RMSNorm's persistent grid
#    holds 768 threads an SM against 512. Predicted: bwd_blocks_per_sm 2 takes RMSNorm
#    without w to ~101.5 (LayerNorm's) and leaves the rest within 0.5; the other two
#    within 1 us of the default.
#   bash bench/ab/pending_s47.sh "$OUT" t|f
set -uo pipefail
OUT=${1:?usage: pending_s47.sh OUTDIR t|f}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
case "${2:?t or f}" in
  t)
    timeout -k 10 200 python3 -m pytest -q -p no:cacheprovider -n 8 --timeout 150 \
      tests/test_layer_norm.py -k "dwdb_flags" > "$OUT/tests_f.log" 2>&1
    echo "tests rc $?: $(tail -1 "$OUT/tests_f.log")"
    bash bench/ab/san_pair.sh "$OUT" layer_norm_flags:float16 fl
    timeout -k 10 120 python3 bench/ab/affine_share.py > "$OUT/affine_share.log" 2>&1
    echo "affine_share rc $?"; cat "$OUT/affine_share.log"
    # RMSNorm without w runs 4 us slower than LayerNorm without w and b (105 / 101.4):
    # its one-row kernel's one-sum direct step (bwd_rms_sum1), or the direct step?
    for t in '{"bwd_blocks_per_sm": 2}' '{"bwd_rms_sum1": false}' '{"bwd_red_direct": false}'; do
      timeout -k 10 120 python3 bench/ab/affine_share.py --dtypes float16 --tune "$t" \
        > "$OUT/affine_share_t.log" 2>&1
      echo "affine_share $t rc $?"; grep "rms" "$OUT/affine_share_t.log"
    done
    ;;
  f)
    fl='{"dwdb_flags": true}'
    for op in ln rms; do
      timeout -k 10 160 python3 bench/tune_layer_norm.py --out "$OUT/flags_$op" --reps 50 \
        --op "$op" --ns 1024,2048,4096 --dtypes float16,bfloat16 \
        --tunes '{}' "$fl" "$fl" '{}' '{}' "$fl" "$fl" '{}' > "$OUT/flags_$op.log" 2>&1
      echo "flags_$op rc $?"; grep '^| [0-9]' "$OUT/flags_$op.log"
    done
    ;;
  *) echo "t or f" >&2; exit 2 ;;
esac
