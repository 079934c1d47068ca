#!/usr/bin/env bash
# Written in the fifty-fourth session for the next (an H200; bench/NOTES.md, "Next").
#   b: the bisect of the 0.8 us between ab/bulk_fwd.py's register-store gelu loop and
#      the shipped forward (~40 s): each of the shipped kernel's run-time features (g,
#      b, e, d), no launch bounds, and the output allocated each call (a).
#   w: the dropout sweep at v22 (pending_sweep.sh, all three dtypes, ~220 s; carry
#      nothing: Liger has no dropout), for RESULTS.md's tables from one run.
#   v: (fifty-fifth session, after b) dropout v23 (g_base compiled out of the first row
#      piece's kernels): ab/g64_ab.py (v23 against v22 in one process) and
#      ab/bulk_fwd.py's best loop beside the shipped call (~2 min).
#   t: the dropout GPU tests, then tune_dropout's shipped rows at fp16 and bf16.
#   p: tune_dropout's neighbours of the gelu forward's and the bias-grad backward's
#      plans under v23, and the v23 sweep's plots.
#   a: threads=128 against 256 for the gelu forward at four row lengths (alternating),
#      and the plots again (call 8's outputs were over the count that comes back).
#   f: v24's checks in the device time left: the dropout GPU tests, tune_dropout's
#      gelu forward against threads=256, memcheck and racecheck.
#   s: the four sanitizers on the dropout kernels (bench/sanitize.py's workload).
#   bash bench/ab/pending_s55.sh "$OUT" {b|w|v|t|p|a|f|s}
set -uo pipefail
OUT=${1:?"usage: pending_s55.sh OUTDIR b|w"}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
case "${2:?b, w, v, t, p, a, f or s}" in
  b)
    for dt in float16 bfloat16; do
      echo "== $dt"
      timeout -k 5 150 python3 bench/ab/bulk_fwd.py --passes 3 --dtype "$dt" --variants \
        gelu_reg_8_0,gelu_reg_8_0_a,gelu_reg_8_0_g,gelu_reg_8_0_b,gelu_reg_8_0_e,gelu_reg_8_0_d,gelu_reg_0_0_gbed,gelu_reg_0_0_gbeda \
        2>&1 | grep -v Warning
    done | tee "$OUT/bisect.log"
    ;;
  w) bash bench/ab/pending_sweep.sh "$OUT" float16,bfloat16,float32 ;;
  v)
    timeout -k 5 240 python3 bench/ab/g64_ab.py 2>&1 | grep -v Warning | tee "$OUT/g64_ab.log"
    for dt in float16 bfloat16; do
      timeout -k 5 100 python3 bench/ab/bulk_fwd.py --passes 3 --dtype "$dt" --variants \
        gelu_reg_8_0,gelu_reg_0_0_gbed 2>&1 | grep -v Warning | tee -a "$OUT/bulk_fwd.log"
    done
    ;;
  t)
    timeout -k 5 300 python3 -m pytest -q -p no:cacheprovider -n 14 tests/test_dropout.py \
      tests/test_nonfinite.py > "$OUT/tests.log" 2>&1
    echo "tests rc $?"; tail -3 "$OUT/tests.log"
    for dt in float16 bfloat16; do
      timeout -k 5 150 python3 bench/tune_dropout.py --out "$OUT/tune_$dt" --dtype "$dt" \
        --configs shipped > "$OUT/tune_$dt.log" 2>&1
      echo "tune $dt rc $?"; grep -E "^\|" "$OUT/tune_$dt/tune_dropout.md" | head -30
    done
    ;;
  p)
    # The gelu forward's plan neighbours and the bias-grad backward's under v23, then
    # the sweep's plots (no GPU; needs matplotlib on the machine).
    for dt in float16 bfloat16; do
      timeout -k 5 120 python3 bench/tune_dropout.py --out "$OUT/pf_$dt" --dtype "$dt" \
        --cases fwd --acts gelu \
        --configs "shipped,fill=3,fill=5,fill=6,threads=128,threads=512,shipped" \
        > "$OUT/pf_$dt.log" 2>&1
      echo "fwd $dt rc $?"; grep -E "^\| (shipped|fill|threads)" "$OUT/pf_$dt/tune_dropout.md"
      timeout -k 5 120 python3 bench/tune_dropout.py --out "$OUT/pb_$dt" --dtype "$dt" \
        --cases bwd --acts none \
        --configs "shipped,fill=2,step=4,reduce pdl,tile=direct,unroll=4,shipped" \
        > "$OUT/pb_$dt.log" 2>&1
      echo "bwd $dt rc $?"; grep -E "^\| [a-z]" "$OUT/pb_$dt/tune_dropout.md" | grep -v "^| config"
    done
    mkdir -p "$OUT/plots"
    timeout -k 5 60 python3 bench/dropout.py --from-json bench/results/dropout_sweep_h200_s55_v23.json \
      --plot "$OUT/plots" > "$OUT/plots.log" 2>&1
    echo "plots rc $?"; tail -3 "$OUT/plots.log"; ls "$OUT/plots"
    ;;
  a)
    # threads=128 against the shipped 256 for the gelu forward (call 8 read it
    # 0.4-0.6 us faster), alternating, at four row lengths; one summary file back.
    W=$(mktemp -d)
    for shape in 16384x4096 131072x512 8192x8192 1024x65536; do
      for dt in float16 bfloat16; do
        timeout -k 5 100 python3 bench/tune_dropout.py --out "$W/$dt$shape" --dtype "$dt" \
          --shape "$shape" --cases fwd --acts gelu \
          --configs "shipped,threads=128,shipped,threads=128,shipped,threads=128" \
          > "$W/$dt$shape.log" 2>&1
        echo "== $dt $shape rc $?"
        grep -E "^\| (shipped|threads)" "$W/$dt$shape/tune_dropout.md" | grep -v p0
      done
    done | tee "$OUT/threads128.log"
    mkdir -p "$OUT/plots"
    timeout -k 5 60 python3 bench/dropout.py --from-json bench/results/dropout_sweep_h200_s55_v23.json \
      --plot "$OUT/plots" > /dev/null 2>&1
    echo "plots rc $?"
    ;;
  f)
    # v24 (the four-wave gelu forward in blocks of 128) with the device time left:
    # the dropout GPU tests, tune_dropout's forward rows, then memcheck and racecheck.
    timeout -k 5 270 python3 -m pytest -q -p no:cacheprovider -n 15 tests/test_dropout.py \
      tests/test_nonfinite.py > "$OUT/tests.log" 2>&1
    echo "tests rc $?"; tail -2 "$OUT/tests.log"
    for dt in float16 bfloat16; do
      timeout -k 5 60 python3 bench/tune_dropout.py --out "$OUT/tune_$dt" --dtype "$dt" \
        --cases fwd --acts gelu --configs "shipped,threads=256,shipped,threads=256" \
        > "$OUT/tune_$dt.log" 2>&1
      echo "tune $dt rc $?"; grep -E "^\| (shipped|threads)" "$OUT/tune_$dt/tune_dropout.md"
    done
    SAN_TOOLS="memcheck racecheck" SAN_OPS=dropout SAN_TIMEOUT=120 \
      timeout -k 10 150 bash bench/gpu_harness.sh "$OUT/san" --stages sanitize \
      > "$OUT/san.log" 2>&1
    cat "$OUT/san/summary.md"
    ;;
  s)
    SAN_TOOLS="memcheck racecheck synccheck initcheck" SAN_OPS=dropout SAN_TIMEOUT=420 \
      timeout -k 10 450 bash bench/gpu_harness.sh "$OUT/san" --stages sanitize \
      > "$OUT/san.log" 2>&1
    cat "$OUT/san/summary.md"
    ;;
  *) echo "b, w, v, t, p, a, f or s" >&2; exit 2 ;;
esac
