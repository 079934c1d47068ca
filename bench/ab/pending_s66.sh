#!/usr/bin/env bash
# Written in the sixty-fifth session (no device was lent) for the next, in place of
# pending_s65.sh, whose stages v and o it repeats (bench/NOTES.md, sixty-fifth session):
#   s: v62's candidate (tuning fwd_plain_stats_block): its GPU tests with v60's, the
#      sanitizer on layer_norm_stats_block (every dtype) and layer_norm_plain_knobs
#      (16-bit), then bench/ab/stats_block.py at its eight cells (the statistics'
#      cost, row by row against a block's rows at a time). ~6 min.
#   n: ncu's DRAM / L2 sectors behind s's comparison (stats_block_ncu.sh) at float32
#      LayerNorm 512 (4 words, 8 rows a block) and fp16 LayerNorm 512 (4, 16). ~4 min.
#   v: v60's row table (tuning fwd_plain_reload_rows, opt-in): base / rows against
#      compile at the table's cells and two controls, the launcher's own carveout
#      preferences, five passes. If the rows hold their A/B gains: set the default
#      True, run the norms sweep (norms_sweep_fn.sh). ~4 min.
#   o: off the sweep's widths: offgrid_plain.py --stats at float32 RMSNorm 1536-3584
#      (the forward with statistics at v61's two-word layouts), then --rl2 at 16-bit
#      LayerNorm 2560-10240 and float32 LayerNorm 3072 / 6144. ~4 min.
#   bash bench/ab/pending_s66.sh "$OUT" {s|n|v|o}
set -uo pipefail
OUT=${1:?"usage: pending_s66.sh OUTDIR s|n|v|o"}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
case "${2:?s, n, v or o}" in
  s)
    timeout -k 10 170 python3 -m pytest -q -p no:cacheprovider -n 8 -m "not ptx" \
      tests/test_layer_norm.py -k "v62 or stats_block or v60 or knob_bits or reload" \
      > "$OUT/tests_v62.log" 2>&1
    echo "tests rc $?"; tail -2 "$OUT/tests_v62.log"
    SAN_TOOLS="memcheck racecheck initcheck" SAN_LIMIT=${SAN_LIMIT:-150} \
      bash bench/ab/san_pair.sh "$OUT" layer_norm_stats_block san_sb
    for dt in float16 bfloat16; do
      SAN_TOOLS="memcheck racecheck initcheck" SAN_LIMIT=${SAN_LIMIT:-150} \
        bash bench/ab/san_pair.sh "$OUT" "layer_norm_plain_knobs:$dt" "san_$dt"
    done
    timeout -k 10 200 python3 bench/ab/stats_block.py --passes 3 > "$OUT/stats_block.log" 2>&1
    echo "stats_block rc $?"; grep -v kernels "$OUT/stats_block.log"
    ;;
  n)
    bash bench/ab/stats_block_ncu.sh "$OUT" ln_fwd float32 131072x512 4,8
    bash bench/ab/stats_block_ncu.sh "$OUT" ln_fwd float16 131072x512 4,16
    ;;
  v)
    timeout -k 10 300 python3 bench/ab/carveout_ab.py --passes 5 --carveouts=ship \
      --cells f32-rms-2048,f32-rms-4096,f32-rms-16384,f32-ln-2048,f32-ln-4096,f16-ln-2048,bf16-ln-5120,f32-rms-8192,f16-ln-4096 \
      --tunes '{"base": {}, "rows": {"fwd_plain_reload_rows": true}}' \
      > "$OUT/v60_rows.log" 2>&1
    echo "carveout_ab rc $?"; grep -E "@c|FAIL|Error" "$OUT/v60_rows.log"
    ;;
  o)
    timeout -k 10 200 python3 bench/ab/offgrid_plain.py --stats \
      --cells f32-rms-1536,f32-rms-2304,f32-rms-2560,f32-rms-3072,f32-rms-3584 \
      > "$OUT/offgrid_stats.log" 2>&1
    echo "stats rc $?"; grep -v kernels "$OUT/offgrid_stats.log"
    timeout -k 10 250 python3 bench/ab/offgrid_plain.py --rl2 \
      --cells f16-ln-2560,f16-ln-3584,f16-ln-6144,f16-ln-7168,f16-ln-10240,f32-ln-3072,f32-ln-6144 \
      > "$OUT/offgrid_rl2.log" 2>&1
    echo "rl2 rc $?"; grep -v kernels "$OUT/offgrid_rl2.log"
    ;;
  *) echo "s | n | v | o" >&2; exit 2 ;;
esac
