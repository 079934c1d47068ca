#!/usr/bin/env bash
# Written in the sixtieth session (an H200; bench/NOTES.md, sixtieth session).
#   p: the L2 prefetch-size hint on the plain forward's x loads (tuning
#      fwd_plain_prefetch, ld.global.L2::<N>B): its GPU tests, then
#      bench/ab/infer_picks.py's cells *p (the launcher's layout with .L2::256B /
#      .L2::128B against without, with and without the statistics). ~3 min.
#   q: inductor's occupancy at 16 float32 values a thread (infer_picks.py's cells *q:
#      four words, w late, bounds for 64 warps an SM at 32 registers). ~3 min.
#   v: infer_picks.py's cells *h (q's shape at 16-bit RMSNorm 8192 / 12288), then v52
#      (float32 RMSNorm N = 12288 at four words, w late, bounds for two blocks) and the
#      prefetch knob's GPU tests with the plain kernel's others, then issue #16's
#      RMSNorm sweep (R below). ~6 min.
#   s: memcheck / racecheck / initcheck of sanitize.py's layer_norm_plain (every pick,
#      v52's too), then the LayerNorm sweep (L below). ~5 min.
#   L / R: the norms sweep as pending_s59.sh's L / R (every provider; carry .whl).
#   i: for the next session (issue #16's float32 forwards, the lead in NOTES' "Where
#      issue #16 stands (after the sixtieth session)"): inductor's generated Triton
#      source, grid, block and registers for float32 RMSNorm 2048 / 4096 / 12288 and
#      LayerNorm 4096 (bench/ab/inductor_ln_code.py), then ncu of float32 RMSNorm
#      16384 x 4096, ours against torch.compile's (speed of light, memory workload,
#      occupancy, warp states, source counters). ~3 min.
#   o: for the next session too: bench/ab/placement.py, ours (stats=False) against
#      torch.compile at float32 RMSNorm 4096 / 2048 / 12288 and LayerNorm 4096 with x
#      at six byte offsets into one buffer (does the gap follow placement?). ~4 min.
#   bash bench/ab/pending_s60.sh "$OUT" {p|q|v|s|L|R|i|o}
set -uo pipefail
OUT=${1:?"usage: pending_s60.sh OUTDIR p|q|v|s|L|R|i|o"}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
tests() {
  timeout -k 5 250 python3 -m pytest -q -p no:cacheprovider -n 8 tests/test_layer_norm.py \
    -k "plain_v52 or plain_prefetch or plain_v51 or plain_v50 or without_stats or forward_plain_kernel" \
    > "$OUT/tests_v.log" 2>&1
  echo "tests rc $?"; tail -3 "$OUT/tests_v.log"
}
case "${2:?p, q, v, s, L, R, i or o}" in
  p)
    nvidia-smi -L
    timeout -k 5 200 python3 -m pytest -q -p no:cacheprovider -n 4 tests/test_layer_norm.py \
      -k "plain_prefetch" > "$OUT/tests_p.log" 2>&1
    echo "tests rc $?"; tail -3 "$OUT/tests_p.log"
    timeout -k 10 400 python3 bench/ab/infer_picks.py --suffix p > "$OUT/picks_p.log" 2>&1
    echo "picks rc $?"
    grep -E "FAIL|error|median" "$OUT/picks_p.log"
    ;;
  q)
    timeout -k 10 400 python3 bench/ab/infer_picks.py --suffix q > "$OUT/picks_q.log" 2>&1
    echo "picks rc $?"
    grep -E "FAIL|error|median" "$OUT/picks_q.log"
    ;;
  v)
    timeout -k 10 150 python3 bench/ab/infer_picks.py --suffix h > "$OUT/picks_h.log" 2>&1
    echo "picks rc $?"
    grep -E "FAIL|error|median" "$OUT/picks_h.log"
    tests
    bash bench/ab/pending_s59.sh "$OUT" R
    ;;
  s)
    SAN_TOOLS="memcheck racecheck initcheck" SAN_LIMIT=200 \
      bash bench/ab/san_pair.sh "$OUT" layer_norm_plain san
    bash bench/ab/pending_s59.sh "$OUT" L
    ;;
  L|R) bash bench/ab/pending_s59.sh "$OUT" "$2" ;;
  o)
    timeout -k 10 400 python3 bench/ab/placement.py > "$OUT/placement.log" 2>&1
    echo "placement rc $?"; grep -E "FAIL|gap|Error" "$OUT/placement.log"
    ;;
  i)
    mkdir -p "$OUT/inductor"
    timeout -k 10 200 python3 bench/ab/inductor_ln_code.py --out "$OUT/inductor" --cases \
      rms_norm:float32:2048 rms_norm:float32:4096 rms_norm:float32:12288 \
      layer_norm:float32:4096 > "$OUT/inductor/kernels.log" 2>&1
    echo "inductor code rc $?"; cat "$OUT/inductor/kernels.log" | tail -12
    NCU=(ncu --nvtx --nvtx-include "prof/" --clock-control none --section SpeedOfLight
         --section Occupancy --section WarpStateStats --section LaunchStats
         --section MemoryWorkloadAnalysis --section SchedulerStats --section SourceCounters)
    for prov in numba compile; do
      timeout -k 5 150 "${NCU[@]}" python3 bench/profile_op.py rms_fwd --dtype float32 \
        --shape 16384x4096 --provider "$prov" > "$OUT/ncu_rms_fwd_f32_$prov.txt" 2>&1
      echo "ncu rms_fwd float32 $prov rc $?"
      grep -E "DRAM Throughput|Duration|Achieved Occupancy|Registers Per|Block Size|Grid Size" \
        "$OUT/ncu_rms_fwd_f32_$prov.txt" | head -8
    done
    ;;
  *) echo "p, q, v, s, L, R, i or o" >&2; exit 2 ;;
esac
