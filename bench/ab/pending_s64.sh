#!/usr/bin/env bash
# Written in the sixty-third session for the next (bench/NOTES.md, sixty-third session,
# "Where issue #16 stands"): is the carveout's back-to-back gain a cost per launch?
#   s: bench/ab/carveout_scale.py -- float32 RMSNorm 4096 / 8192, LayerNorm 4096 and
#      fp16 RMSNorm 8192 at 264-16384 rows, preferences -1 / 5 / 9, five alternating
#      passes. A fixed gain at every row count: a cost per launch; a gain growing with
#      the rows: a rate. ~2 min.
#   b: ncu without cache control or clock control (--cache-control none
#      --clock-control none) of float32 RMSNorm 16384 x 4096's plain kernel, four
#      launches at -1 then four at 9 (carveout_cfg.py -1,9 4): each launch's duration,
#      L1 hit rate, L2 reads and DRAM bytes with the caches as the previous launch left
#      them. If the small L1 wins here but lost with the flush (sixty-third session's
#      n: 131.07 / 131.71 us), the gain rides on what one launch leaves the next. ~1 min.
#   r: v60 candidate, fwd_plain_reload="l2" (inductor's two-read shape with its L2 cache
#      policies, sixty-third session): rms_mimic.py (mimic, mimic_l2, ours, ours_rl2,
#      compile; predicted: mimic_l2 at compile's time, as inductor's PTX was with its
#      policies), then carveout_ab.py base / rl2 against compile at the float32 cells
#      behind and two 16-bit ones, preferences -1 / 7 / 9, then memcheck / racecheck /
#      initcheck of layer_norm_plain_knobs at float32 (now with _rl2). ~6 min.
#   bash bench/ab/pending_s64.sh "$OUT" {s|b|r}
set -uo pipefail
OUT=${1:?"usage: pending_s64.sh OUTDIR s|b|r"}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
case "${2:?s, b or r}" in
  s)
    timeout -k 10 300 python3 bench/ab/carveout_scale.py > "$OUT/carveout_scale.log" 2>&1
    echo "carveout_scale rc $?"; grep -E "^\||Error|GPU" "$OUT/carveout_scale.log"
    ;;
  b)
    timeout -k 5 200 ncu --cache-control none --clock-control none -k regex:norm_fwd \
      --metrics gpu__time_duration.sum,l1tex__t_sector_hit_rate.pct,lts__t_sectors_srcunit_tex_op_read.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__shared_mem_config_size \
      python3 bench/ab/carveout_cfg.py -1,9 4 > "$OUT/ncu_b2b.txt" 2>&1
    echo "ncu rc $?"; grep -E "launch|duration|hit_rate|srcunit|dram__bytes|config_size" "$OUT/ncu_b2b.txt"
    ;;
  r)
    timeout -k 10 120 python3 bench/ab/rms_mimic.py > "$OUT/rms_mimic_l2.log" 2>&1
    echo "rms_mimic rc $?"; grep -E "^\|" "$OUT/rms_mimic_l2.log"
    timeout -k 10 300 python3 bench/ab/carveout_ab.py --passes 5 \
      --cells f32-rms-2048,f32-rms-4096,f32-rms-8192,f32-rms-12288,f32-rms-16384,f32-ln-4096,f16-rms-8192,bf16-rms-12288 \
      --carveouts=-1,7,9 --tunes '{"base": {}, "rl2": {"fwd_plain_reload": "l2"}}' \
      > "$OUT/reload_l2.log" 2>&1
    echo "carveout_ab rc $?"; grep -E "@c|FAIL|Error" "$OUT/reload_l2.log"
    SAN_TOOLS="memcheck racecheck initcheck" SAN_LIMIT=${SAN_LIMIT:-250} \
      bash bench/ab/san_pair.sh "$OUT" "layer_norm_plain_knobs:float32" san_float32 \
      > "$OUT/san_float32.summary" 2>&1
    cat "$OUT/san_float32.summary"
    ;;
  *) echo "s | b | r" >&2; exit 2 ;;
esac
