#!/usr/bin/env bash
# Written in the sixty-fifth session (no device was lent) for the next, in place of
# pending_s65.sh, whose stages v and o it keeps (bench/NOTES.md, sixty-fifth session):
#   s: v62's candidate (tuning fwd_plain_stats_block): its GPU tests with v60's, then
#      bench/ab/stats_block.py at its eleven cells (the statistics' cost, stored row
#      by row against a block's rows at a time). ~5 min.
#   z: the sanitizer (memcheck, racecheck, initcheck) on layer_norm_stats_block (every
#      dtype) and layer_norm_plain_knobs at 16 bits (v60's _rl2 there). ~6 min.
#   n: ncu's DRAM / L2 sectors behind s's comparison (stats_block_ncu.sh) at float32
#      LayerNorm 512 (4 words, 8 rows a block) and fp16 LayerNorm 512 (4, 16). ~4 min.
#   v: v60's row table (tuning fwd_plain_reload_rows) against compile at the
#      launcher's own carveouts (pending_s65.sh's v without the tests and sanitizer,
#      which s and z cover); if the rows hold their gains, set the default True and
#      run the norms sweep (norms_sweep_fn.sh). ~4 min.
#   o: pending_s65.sh's o: offgrid_plain.py --stats at float32 RMSNorm 1536-3584, then
#      --rl2 at 16-bit LayerNorm 2560-10240 and float32 LayerNorm 3072 / 6144. ~4 min.
#   w: (sixty-sixth session, no device either) N = 896, off the sweep, where the training
#      forward runs 1-4 us behind compile: stats_block.py there (is it the statistics?),
#      then offgrid_plain.py --compile (y alone, every plain layout, beside compile). ~6 min.
#   c: (sixty-sixth session) v63's candidate, tuning fwd_plain_checked: the plain kernel
#      at widths no exact layout splits (16-bit LayerNorm 1152 / 1600 / 4544 / 6656,
#      float32 1600 / 4544; 16-bit RMSNorm 1600 / 6656, where the rule keeps the lean
#      kernel, for the forced layouts): offgrid_plain.py --checked --compile (y alone:
#      default, the rule's pick, every checked layout, compile), then --stats at 16
#      bits. ~8 min.
#      (s runs v63's GPU tests too.)
#   k: the sanitizer (memcheck, racecheck, initcheck) on v63's workload,
#      layer_norm_checked, at fp16 and float32. ~4 min.
#   q: (sixty-seventh session, the device refused) one call's worth of s, c and k for a
#      session that may get only one start: v63's and v62's GPU tests, v63's A/B at
#      four 16-bit / float32 LayerNorm cells, the sanitizer on layer_norm_checked at
#      fp16. Under 600 s by its timeouts (150 + 300 + 120 + slack).
#   bash bench/ab/pending_s66.sh "$OUT" {s|z|n|v|o|w|c|k|q}
set -uo pipefail
# v63's cells: models' widths no exact plain layout splits.
CHECKED_CELLS=f16-ln-1152,f16-ln-1600,f16-ln-4544,f16-ln-6656,f16-ln-8768,f32-ln-1600,f32-ln-4544,f32-rms-1600,f32-rms-4544,f16-rms-1600,f16-rms-6656
# stats_block.py's cells of the sweep (its 896 ones run in stage w).
SWEEP_CELLS=f32-ln-512,f32-rms-512,f32-ln-768,f32-ln-1024,f16-ln-512,f16-rms-512,f16-ln-768,f16-ln-1024,f16-rms-8192,bf16-rms-8192,f32-rms-1024
STAGES="s|z|n|v|o|w|c|k|q"
OUT=${1:?"usage: pending_s66.sh OUTDIR $STAGES"}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
# memcheck, racecheck and initcheck on v63's workload at dtype $1.
san_checked() {
  SAN_TOOLS="memcheck racecheck initcheck" SAN_LIMIT=${SAN_LIMIT:-150} \
    bash bench/ab/san_pair.sh "$OUT" "layer_norm_checked:$1" "san_chk_$1"
}
case "${2:?"one of $STAGES"}" in
  s)
    timeout -k 10 170 python3 -m pytest -q -p no:cacheprovider -n 8 -m "not ptx" \
      tests/test_layer_norm.py -k "v62 or stats_block or v60 or knob_bits or reload or checked" \
      > "$OUT/tests_v62.log" 2>&1
    echo "tests rc $?"; tail -2 "$OUT/tests_v62.log"
    timeout -k 10 300 python3 bench/ab/stats_block.py --passes 3 --cells "$SWEEP_CELLS" \
      > "$OUT/stats_block.log" 2>&1
    echo "stats_block rc $?"; grep -v kernels "$OUT/stats_block.log"
    ;;
  z)
    for dt in float32 float16 bfloat16; do
      SAN_TOOLS="memcheck racecheck initcheck" SAN_LIMIT=${SAN_LIMIT:-150} \
        bash bench/ab/san_pair.sh "$OUT" "layer_norm_stats_block:$dt" "san_sb_$dt"
    done
    SAN_TOOLS="memcheck racecheck initcheck" SAN_LIMIT=${SAN_LIMIT:-150} \
      bash bench/ab/san_pair.sh "$OUT" "layer_norm_plain_knobs:float16" san_knobs_float16
    ;;
  n)
    bash bench/ab/stats_block_ncu.sh "$OUT" ln_fwd float32 131072x512 4,8
    bash bench/ab/stats_block_ncu.sh "$OUT" ln_fwd float16 131072x512 4,16
    ;;
  v)
    timeout -k 10 300 python3 bench/ab/carveout_ab.py --passes 5 --carveouts=ship \
      --cells f32-rms-2048,f32-rms-4096,f32-rms-16384,f32-ln-2048,f32-ln-4096,f16-ln-2048,bf16-ln-5120,f32-rms-8192,f16-ln-4096 \
      --tunes '{"base": {}, "rows": {"fwd_plain_reload_rows": true}}' > "$OUT/v60_rows.log" 2>&1
    echo "carveout_ab rc $?"; grep -E "@c|FAIL|Error" "$OUT/v60_rows.log"
    ;;
  o)
    bash bench/ab/pending_s65.sh "$OUT" o
    ;;
  w)
    timeout -k 10 200 python3 bench/ab/stats_block.py --passes 3 \
      --cells f16-ln-896,bf16-ln-896,f32-ln-896,f32-rms-896 > "$OUT/stats_block_896.log" 2>&1
    echo "stats_block rc $?"; grep -v kernels "$OUT/stats_block_896.log"
    timeout -k 10 300 python3 bench/ab/offgrid_plain.py --compile --passes 3 \
      --cells f16-ln-896,f16-rms-896,f32-ln-896,f32-rms-896 > "$OUT/offgrid_896.log" 2>&1
    echo "offgrid rc $?"; grep -v kernels "$OUT/offgrid_896.log"
    ;;
  c)
    timeout -k 10 400 python3 bench/ab/offgrid_plain.py --checked --compile --passes 3 \
      --cells "$CHECKED_CELLS" > "$OUT/offgrid_checked.log" 2>&1
    echo "checked rc $?"; grep -v kernels "$OUT/offgrid_checked.log"
    timeout -k 10 170 python3 bench/ab/offgrid_plain.py --checked --stats --passes 3 \
      --cells f16-ln-1152,f16-ln-1600,f16-ln-4544,f16-ln-6656 \
      > "$OUT/offgrid_checked_stats.log" 2>&1
    echo "checked stats rc $?"; grep -v kernels "$OUT/offgrid_checked_stats.log"
    ;;
  k)
    san_checked float16
    san_checked float32
    ;;
  q)
    timeout -k 10 150 python3 -m pytest -q -p no:cacheprovider -n 8 -m "not ptx" \
      tests/test_layer_norm.py -k "checked or v62 or stats_block" \
      > "$OUT/tests_q.log" 2>&1
    echo "tests rc $?"; tail -2 "$OUT/tests_q.log"
    timeout -k 10 300 python3 bench/ab/offgrid_plain.py --checked --compile --passes 3 \
      --cells f16-ln-1152,f16-ln-1600,f16-ln-4544,f32-ln-1600 \
      > "$OUT/offgrid_checked_q.log" 2>&1
    echo "checked rc $?"; grep -v kernels "$OUT/offgrid_checked_q.log"
    SAN_LIMIT=120 san_checked float16
    ;;
  *) echo "$STAGES" >&2; exit 2 ;;
esac
