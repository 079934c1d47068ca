#!/usr/bin/env bash
# Written in the sixty-fourth session for the next (bench/NOTES.md, sixty-fourth
# session, "Where issue #16 stands"):
#   v: v60's row table (tuning fwd_plain_reload_rows, opt-in) -- its GPU tests, the
#      sanitizer on the 16-bit plain knobs (_rl2 included), then carveout_ab.py base /
#      rows against compile at the table's cells and the controls, five passes. If
#      the rows hold their A/B gains: set the default True, run the norms sweep
#      (norms_sweep_fn.sh). ~5 min.
#   o: off the sweep's widths: offgrid_plain.py --stats at float32 RMSNorm 1536-3584
#      (the forward with statistics, where v61's two-word layouts ran 3-6 us slower
#      at 2560 / 3584 and faster at 1536 / 3072), then --rl2 at 16-bit LayerNorm
#      2560-10240 (v60's two-read kernel at v61's layouts). ~4 min.
#   bash bench/ab/pending_s65.sh "$OUT" {v|o}
set -uo pipefail
OUT=${1:?"usage: pending_s65.sh OUTDIR v|o"}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
case "${2:?v or o}" in
  v)
    timeout -k 10 150 python3 -m pytest -q -p no:cacheprovider -n 8 -m "not ptx" \
      tests/test_layer_norm.py -k "v60 or knob_bits or reload" > "$OUT/tests_v60.log" 2>&1
    echo "tests rc $?"; tail -2 "$OUT/tests_v60.log"
    for dt in float16 bfloat16; do
      SAN_TOOLS="memcheck racecheck initcheck" SAN_LIMIT=${SAN_LIMIT:-200} \
        bash bench/ab/san_pair.sh "$OUT" "layer_norm_plain_knobs:$dt" "san_$dt"
    done
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
  *) echo "v | o" >&2; exit 2 ;;
esac
