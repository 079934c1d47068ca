#!/usr/bin/env bash
# Written in the sixty-second session for the next (bench/NOTES.md, sixty-second
# session, "Where issue #16 stands"):
#   d: bench/ab/dropout_carveout.py -- dropout + bias + act, fp16 / bf16 16384 x 4096,
#      forward and backward with the bias grad, at carveout preferences -1, 3, 5, 7, 9
#      (the one missed target: the dropout(x+b) backward, 0.0762 / 0.0768 ms against
#      0.0743). ~2 min.
#   c: v56's preferences per cell: carveout_ab.py at float32 LayerNorm 4096 / 12288 and
#      RMSNorm 2048-16384, preferences -1 / 5 / 6 / 7 / 9, five passes, twice (two
#      processes). ~4 min.
#   n: ncu of float32 RMSNorm 16384 x 4096's plain kernel at preferences -1 and 7
#      (carveout_cfg.py): L1 hit rate, L2 read sectors from L1, DRAM bytes, duration --
#      why a smaller L1 is faster. ~1 min.
#   Added in the sixty-third session after d / c / n had run:
#   v: v58 (RMSNorm rows of 5120 or more prefer carveout 9): the carveout / plain-kernel
#      GPU tests of test_layer_norm, then the RMSNorm forward sweep. ~6 min.
#   e: dropout's bias-grad backward at preferences 10 and 12 (228 KB of shared memory;
#      d found 9 even with the default and 3-7 slower). ~1 min.
#   h: the L2 cache-policy loads (fwd_plain_hints with LOAD_POLICIES' L2 forms): their GPU
#      bits tests, then memcheck / racecheck / initcheck of layer_norm_plain_knobs at
#      float32 (now with the _hnl and _hGM kernels). ~4 min.
#   bash bench/ab/pending_s63.sh "$OUT" {d|c|n|v|e|h}
set -uo pipefail
OUT=${1:?"usage: pending_s63.sh OUTDIR d|c|n"}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
case "${2:?d, c, n, v, e or h}" in
  d)
    timeout -k 10 300 python3 bench/ab/dropout_carveout.py > "$OUT/dropout_carveout.log" 2>&1
    echo "dropout_carveout rc $?"; grep -E "^\||Error" "$OUT/dropout_carveout.log"
    ;;
  c)
    for run in 1 2; do
      timeout -k 10 200 python3 bench/ab/carveout_ab.py --no-compile --passes 5 \
        --cells f32-ln-4096,f32-ln-12288,f32-rms-2048,f32-rms-4096,f32-rms-5120,f32-rms-8192,f32-rms-12288,f32-rms-16384 \
        --carveouts=-1,5,6,7,9 --tunes '{"base": {}}' > "$OUT/carveout_cells_$run.log" 2>&1
      echo "carveout_ab run $run rc $?"
      grep -v -E "check|kernels" "$OUT/carveout_cells_$run.log"
    done
    ;;
  n)
    timeout -k 5 150 ncu -k regex:norm_fwd --metrics \
      gpu__time_duration.sum,l1tex__t_sector_hit_rate.pct,lts__t_sectors_srcunit_tex_op_read.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__shared_mem_config_size \
      python3 bench/ab/carveout_cfg.py -1,7 > "$OUT/ncu_l1.txt" 2>&1
    echo "ncu rc $?"; grep -E "launch with|duration|hit_rate|srcunit|dram__bytes|config_size" "$OUT/ncu_l1.txt"
    ;;
  v)
    timeout -k 10 300 python3 -m pytest -q -p no:cacheprovider tests/test_layer_norm.py -m gpu \
      -k "carveout or plain" > "$OUT/tests_v58.log" 2>&1
    echo "tests rc $?"; tail -3 "$OUT/tests_v58.log"
    . bench/ab/norms_sweep_fn.sh
    norms_sweep rms_norm rms_fwd_v58 fwd 380
    ;;
  e)
    timeout -k 10 200 python3 bench/ab/dropout_carveout.py --carveouts=-1,9,10,12 \
      --cases fp16-none-bwd,bf16-none-bwd > "$OUT/dropout_carveout_e.log" 2>&1
    echo "dropout_carveout rc $?"; grep -E "^\||Error" "$OUT/dropout_carveout_e.log"
    ;;
  h)
    timeout -k 10 150 python3 -m pytest -q -p no:cacheprovider -n 8 tests/test_layer_norm.py \
      tests/test_tensor_core.py -k "plain_knob_bits and hints or evict_policies" \
      > "$OUT/tests_h.log" 2>&1
    echo "tests rc $?"; tail -2 "$OUT/tests_h.log"
    SAN_TOOLS="memcheck racecheck initcheck" SAN_LIMIT=${SAN_LIMIT:-300} \
      bash bench/ab/san_pair.sh "$OUT" "layer_norm_plain_knobs:float32" san_float32 \
      > "$OUT/san_float32.summary" 2>&1
    cat "$OUT/san_float32.summary"
    ;;
  *) echo "d | c | n | v | e | h" >&2; exit 2 ;;
esac
