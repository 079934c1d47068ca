#!/usr/bin/env bash
# Written in the fifty-seventh session (an H200; bench/NOTES.md, fifty-seventh session):
# the norms forward without its statistics (stats=False; the plain kernel's _nostats
# form; interop.torch's no-grad route and the layer_norm_infer / rms_norm_infer custom
# ops). Every forward behind in the v48 sweep trails torch.compile alone, whose forward
# the sweep times under no_grad, where inductor writes y alone.
#   t: the GPU tests of the change (stats=False, the inference ops, the plain kernel,
#      the custom ops, the torch front end; -k filters every file named, so of
#      test_fast_path.py / test_plan.py only tests matching it), then memcheck, racecheck and
#      initcheck of bench/sanitize.py's layer_norm_plain workload (every plain layout
#      with and without its statistics). ~4 min.
#   s: the norms forward sweep, one run: numba (with statistics), numba_infer (without),
#      numba_torch (interop.torch under no_grad), torch eager, torch.compile, Liger
#      (carry .whl). ~5-8 min.
#   l: after RMSNorm's lean kernel of one row a slot got its _nostats form too (16-bit
#      RMSNorm N = 768 / 1024 take it; 1.3 / 0.2 us behind compile in s): its tests on
#      the GPU, the three sanitizers on layer_norm_plain (which now runs it), and the
#      16-bit RMSNorm forwards at N = 512-2048 and 5120, two runs. ~5 min.
#   bash bench/ab/pending_s57b.sh "$OUT" {t|s|l}
set -uo pipefail
OUT=${1:?"usage: pending_s57b.sh OUTDIR t|s|l"}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

# memcheck, racecheck and initcheck of sanitize.py's layer_norm_plain at once; logs
# $OUT/<prefix>_<tool>.log.
sanitize() {
  for tool in memcheck racecheck initcheck; do
    extra=""
    [ "$tool" = memcheck ] && extra="--report-api-errors no"
    timeout -k 5 200 compute-sanitizer --tool "$tool" $extra python3 bench/sanitize.py \
      layer_norm_plain > "$OUT/$1_$tool.log" 2>&1 &
  done
  wait
  for tool in memcheck racecheck initcheck; do
    echo "== $tool"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|ran|FAILED" "$OUT/$1_$tool.log" \
      | tail -5
  done
}
case "${2:?t, s or l}" in
  t)
    timeout -k 5 300 python3 -m pytest -q -p no:cacheprovider -n 8 tests/test_layer_norm.py \
      -k "without_stats or infer_custom or forward_plain or custom_ops or fullgraph or front" \
      tests/test_fast_path.py tests/test_plan.py tests/test_torch_frontend.py \
      > "$OUT/tests.log" 2>&1
    echo "tests rc $?"; tail -3 "$OUT/tests.log"
    sanitize san
    ;;
  s)
    . bench/ab/liger_env.sh || echo "liger wheel not installed"
    timeout -k 10 560 python3 bench/layer_norm.py --ops layer_norm rms_norm \
      --dtypes float16 bfloat16 float32 --dirs fwd \
      --providers numba numba_infer numba_torch torch compile liger \
      --shapes 131072x512 87381x768 65536x1024 32768x2048 16384x4096 13107x5120 8192x8192 \
      5461x12288 4096x16384 1024x65536 --reps 30 --warmup 5 --no-memory --no-overhead \
      --json "$OUT/norms_fwd_s57.json" > "$OUT/norms_fwd_s57.log" 2>&1
    echo "sweep rc $?"
    python3 bench/sweep_table.py norms "$OUT/norms_fwd_s57.json" | tail -3
    ;;
  l)
    timeout -k 5 200 python3 -m pytest -q -p no:cacheprovider -n 8 tests/test_layer_norm.py \
      -k "without_stats or early_same_bits or infer_custom" > "$OUT/tests_l.log" 2>&1
    echo "tests rc $?"; tail -2 "$OUT/tests_l.log"
    sanitize san_l
    for run in 1 2; do
      timeout -k 10 150 python3 bench/layer_norm.py --ops rms_norm --dtypes float16 bfloat16 \
        --dirs fwd --providers numba numba_infer compile \
        --shapes 131072x512 87381x768 65536x1024 32768x2048 13107x5120 --reps 30 \
        --warmup 5 --no-memory --no-overhead --json "$OUT/rms_fwd_l$run.json" \
        > "$OUT/rms_fwd_l$run.log" 2>&1
      echo "run $run rc $?"
    done
    ;;
esac
