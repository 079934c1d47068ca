#!/usr/bin/env bash
# For the eighty-fourth session (bench/NOTES.md, "Next (eighty-fourth session)").
#   t: (any Hopper card, at most ~560 s) v6, the wgmma forward whose producer fills
#      the ring by TMA (WG_LARGE_WS_TMA), first GPU run: its tests (test_wgmma -k tma
#      and test_tma), memcheck of the wgmma tilings with it, then the forward A/B
#      against v4 (ws_hb: the same tiling, cp.async producer), the shipped default
#      and cuBLAS at 8192x4096->16384 and Llama-7B's gate+up (4096x4096->22016).
#      Predicted: tests pass, 0 errors; v6 faster than ws_hb by 10-25% (the producer's
#      ~940 instructions a k-tile gone, the consumers' per-tile proxy fence gone),
#      at or near cuBLAS's 650-730 TF/s.
#   d: (any card, ~5 min) v6p, the gated forward's pair GEMM with the TMA producer
#      (tma_pair_ab.py, 4096 x 4096 -> 2 x 11008 bf16 silu: v4 against v6p, A/B/B/A,
#      bit-equal), predicted 10-25% faster than v4 as the plain form (v4 pair 1229 us
#      in the training step, cuBLAS's two GEMMs ~1130); the Llama-7B MLP training step
#      (pair_train_ab.py, 4096 tokens) with the long-K forwards on v4 and on v6 / v6p
#      through the torch front end's plans (predicted: 5.73 ms -> ~5.5, the forwards'
#      ~1810 us of GEMM -> ~1550).
#   e: (any card, ~4 min) the dropout backward plan's counters from its stand-in
#      (ff76822, the anchor gone): test_fast_path and test_dropout, predicted all pass;
#      then ncu of the few-row down projection against cuBLAS's kernel at M = 1 / 16,
#      gate+up beside it (skinny_ncu.py: SpeedOfLight, Occupancy, WarpStateStats,
#      MemoryWorkloadAnalysis). Hypothesis: the down projection's 256 blocks (about 2
#      an SM) hold half the warps and bytes in flight of gate+up's 4 blocks an SM, so
#      its DRAM throughput is ~70% of peak against ~85%; cuBLAS's kernel holds more.
#   k: (any card, at most ~200 s) the few-row kernel with its k-chunks split over two
#      or three blocks (g1w8u2k2 / k3: 512 / 768 blocks for the down projection,
#      ~4 / SM at 64 registers for one token tile): the GPU tests (-k skinny), then
#      skinny_ab.py at M = 1 / 16, A/B/A against g1w8u2. Predicted (ncu: gate+up at
#      ~4 blocks an SM reads at 78% of DRAM peak, down at ~2 at 70%): down M = 1 39.5
#      -> ~35-36 us, M = 16 42.4 -> ~38-40 (three blocks an SM there, 78 registers);
#      gate+up even or slower (already 4 an SM).
#   bash bench/ab/pending_s84.sh "$OUT" t|d|e|k
set -uo pipefail
OUT=${1:?"usage: pending_s84.sh OUTDIR t|d|e|k"}
export OUT PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
echo "card: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
case "${2:?t|d|e|k}" in
  t)
    timeout -k 10 200 python3 -m pytest -q -p no:cacheprovider -n 8 tests/test_tma.py \
      tests/test_wgmma.py tests/test_gated_linear.py -k "tma or ws or swizzled_wgmma" \
      > "$OUT/tests_tma.log" 2>&1
    echo "tests rc $?"; grep -E "passed|failed|FAILED" "$OUT/tests_tma.log" | tail -6
    timeout -k 10 150 compute-sanitizer --tool memcheck --report-api-errors no \
      --error-exitcode 3 python3 bench/sanitize.py linear_act_wgmma:float16 \
      > "$OUT/memcheck_wgmma.log" 2>&1
    echo "memcheck rc $?"; tail -3 "$OUT/memcheck_wgmma.log"
    timeout -k 10 180 python3 bench/linear_act.py --shapes 8192x4096x16384 4096x4096x22016 \
      --dtypes float16,bfloat16 --activation gelu_tanh --passes fwd --reps 30 \
      --providers numba_fused,numba_wgmma_ws_hb,numba_wgmma_ws_tma,torch \
      --json "$OUT/wg_tma.json" > "$OUT/wg_tma.log" 2>&1
    echo "bench rc $?"; grep -v -i warn "$OUT/wg_tma.log" | tail -20
    ;;
  d)
    timeout -k 10 120 python3 bench/ab/tma_pair_ab.py > "$OUT/tma_pair_ab.log" 2>&1
    echo "pair A/B rc $?"; grep -v -i warn "$OUT/tma_pair_ab.log"
    for t in WG_LARGE_WS_HB WG_LARGE_WS_TMA; do
      timeout -k 10 150 python3 bench/ab/pair_train_ab.py --reps 10 --profile 5 \
        --fwd-long-k $t --json "$OUT/train_$t.json" > "$OUT/train_$t.log" 2>&1
      echo "train $t rc $?"; grep -v -i warn "$OUT/train_$t.log" | grep -E "us |total|train step|fwd_long"
    done
    ;;
  e)
    timeout -k 10 240 python3 -m pytest -q -p no:cacheprovider -n 8 tests/test_fast_path.py \
      tests/test_dropout.py > "$OUT/tests_dropout.log" 2>&1
    echo "tests rc $?"; grep -E "passed|failed|FAILED" "$OUT/tests_dropout.log" | tail -6
    timeout -k 10 200 ncu --nvtx --nvtx-include "prof/" --clock-control none \
      --section SpeedOfLight --section Occupancy --section WarpStateStats \
      --section MemoryWorkloadAnalysis --section LaunchStats \
      python3 bench/ab/skinny_ncu.py > "$OUT/skinny_ncu.txt" 2>&1
    echo "ncu rc $?"
    grep -E "profiled next|^  [a-zA-Z_].*\(|DRAM Throughput|Memory Throughput|Duration|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit|Waves Per SM|Grid Size|Mem Busy|Max Bandwidth" \
      "$OUT/skinny_ncu.txt" | head -150
    ;;
  k)
    timeout -k 5 80 python3 -m pytest -q -p no:cacheprovider -n 12 tests/test_linear_act.py \
      -k "skinny" > "$OUT/tests_k.log" 2>&1
    echo "tests rc $?"; tail -2 "$OUT/tests_k.log"
    timeout -k 5 110 python3 bench/ab/skinny_ab.py --ms 1 16 --reps 20 --tilings --no-gated \
      --skinny g1w8u2 g1w8u2k2 g1w8u2k3 g1w8u2 g1w8u2k2 > "$OUT/skinny_k.log" 2>&1
    echo "ab rc $?"; grep -v -i warn "$OUT/skinny_k.log"
    ;;
  *) echo "t, d, e or k" >&2; exit 2 ;;
esac
