#!/usr/bin/env bash
# Written in the twenty-fifth session for the next (an H200 if lent; on an H100 the
# numbers are a guide only). What v29's H200 sweep left (bench/NOTES.md, twenty-fifth
# session), in three parts of 2-4 minutes:
#   a: ncu (clocks free) on the forwards still 2-6 us behind inductor, ours against
#      torch.compile's kernels: float32 RMSNorm and LayerNorm 16384 x 4096, fp16
#      LayerNorm 131072 x 512; and the fp16 LayerNorm backward at 16384 x 4096 (0.120
#      ms, 79% of copy, the issue's target 0.111). Reads: DRAM throughput, achieved
#      occupancy, the stall reasons, to tell bytes in flight from issue.
#   b: the backward's knobs on the H200 (all tuned on H100s): resident blocks (fewer
#      dW / dB partial rows), rows a block, the prefetches, threads a row, the
#      streaming kernel's grid, at fp16 LayerNorm N = 4096, float32 LayerNorm N = 8192
#      / 65536 and float32 RMSNorm N = 512 / 1024, the cells behind or off target.
#   c: the dropout backward at 16384 x 4096 fp16 / bf16 ('none' 80.5 us against its
#      bias-grad-free 73.8 and the target 74.3; unroll=4 read 77.6 once): unroll 4
#      with the bias-grad epilogue's geometry (rows a block, final step, v4's kernel:
#      the epilogues all run at the end of the one wave, memory idle; smaller row
#      blocks give more waves, so early epilogues overlap later blocks' streaming);
#      and the gelu forward (88 us, issue-bound: Philox + gelu) at one row a batch.
#   bash bench/ab/pending_s26.sh "$OUT" a|b|c
set -uo pipefail
OUT=${1:?usage: pending_s26.sh OUTDIR a|b|c}
PART=${2:?usage: pending_s26.sh OUTDIR a|b|c}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
case "$PART" in
a)
  . bench/ab/ncu_ln.sh
  ncu_norm_setup
  for c in "rms_fwd float32 16384x4096" "ln_fwd float32 16384x4096" \
           "ln_fwd float16 131072x512" "ln_bwd float16 16384x4096"; do
    read -r op dt shape <<< "$c"
    for prov in numba compile; do
      ncu_norm "$OUT/ncu26_${op}_${dt}_${shape}_$prov.txt" 40 "$PAT" "$op" \
        --dtype "$dt" --shape "$shape" --provider "$prov"
    done
  done
  ;;
b)
  . bench/ab/tl.sh
  # The row kernels' grid is SMs x resident blocks (bwd_blocks_per_sm caps it; each
  # block writes a dW / dB partial row: fp16 N = 4096 at 2 blocks of 256 an SM, 264
  # rows, 8.6 MB written and read again, 2% of the bytes); bwd_threads_per_sm sizes
  # only the streaming kernel's grid (float32 N = 65536).
  T16=('{}' '{"bwd_blocks_per_sm": 1}' '{"prefetch": false}' '{"max_tpr": 128}'
       '{"bwd_wide": true}' '{"dwdb_unroll": 8}')
  T32L=('{}' '{"bwd_threads_per_sm": 512}' '{"bwd_threads_per_sm": 2048}'
        '{"bwd_blocks_per_sm": 1}' '{"bwd_lean_prefetch": false}' '{"sacc_bytes": 0}')
  T32R=('{}' '{"bwd_block": 64}' '{"bwd_block": 256}' '{"bwd_blocks_per_sm": 2}'
        '{"prefetch": false}')
  tl b_ln16_4096 90 --reps 30 --op ln --ns 4096 --dtypes float16 --tunes "${T16[@]}" "${T16[@]}"
  tl b_ln32 120 --reps 30 --op ln --ns 8192,65536 --dtypes float32 \
    --tunes "${T32L[@]}" "${T32L[@]}"
  tl b_rms32 90 --reps 30 --op rms --ns 512,1024 --dtypes float32 \
    --tunes "${T32R[@]}" "${T32R[@]}"
  tar czf "$OUT/pending_s26_b.tgz" -C "$TL_DIR" .
  ;;
c)
  C="shipped,unroll=1,unroll=4,unroll=4 rows=128,unroll=4 rows=256,unroll=4 rows=512"
  C="$C,unroll=4 step=4"
  C="$C,unroll=4 v4 reduce kernel,shipped,unroll=1,unroll=4"
  for dt in float16 bfloat16; do
    mkdir -p "$OUT/td_$dt"
    timeout -k 5 150 python3 bench/tune_dropout.py --out "$OUT/td_$dt" --reps 30 \
      --dtype "$dt" --configs "$C" > "$OUT/td_$dt/log.txt" 2>&1
    echo "tune_dropout $dt rc $?"
    grep -E "^\| .* (bwd|fwd) " "$OUT/td_$dt/log.txt" | grep -v " p0 " | head -40
  done
  ;;
*) echo "PART must be a, b or c" >&2; exit 2 ;;
esac
