#!/usr/bin/env bash
# Written in the fifty-fifth session for the next (an H200; bench/NOTES.md, fifty-fifth
# session): what dropout v24 (the four-wave 16-bit gelu forward in blocks of 128) still
# owes, and one cheap question for the bias-grad backward.
#   t: the dropout GPU tests (tests/test_dropout.py, tests/test_nonfinite.py; call 10 of
#      the fifty-fifth session was cut 1 test short by the device time), then the four
#      sanitizers on bench/sanitize.py's dropout workload (which now runs the 128-thread
#      forward and, with the per-launch limit lowered, the g64 kernels of row pieces).
#      ~400 s.
#   w: the dropout sweep at v24 (pending_sweep.sh, all three dtypes), then
#      interop.torch beside the array level at every shape (one run each, ~230 s).
#   b: the bias-grad backward at 128 threads against 256, alternating (ptxas: 93-95
#      registers, 5 blocks of 128 an SM = 20 warps against 2 of 256 = 16), fp16 and
#      bf16, 'none' and gelu, with and without the bias grad (~90 s). The v10-era try
#      (NOTES, "within 1 either way") predates v13-v23.
#   n: the plain norms forward with n compiled in (tuning fwd_plain_const_n, opt-in,
#      untimed), fp16 LayerNorm N = 512 / 1024, RMSNorm 512 / 8192 (~4 min).
#   bash bench/ab/pending_s56.sh "$OUT" {t|w|b|n}
set -uo pipefail
OUT=${1:?"usage: pending_s56.sh OUTDIR t|w|b|n"}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
SHAPES=131072x512,87381x768,65536x1024,32768x2048,16384x4096,13107x5120,8192x8192
SHAPES=$SHAPES,5461x12288,4096x16384,1024x65536
case "${2:?t, w, b or n}" in
  t)
    timeout -k 5 330 python3 -m pytest -q -p no:cacheprovider -n 15 tests/test_dropout.py \
      tests/test_nonfinite.py > "$OUT/tests.log" 2>&1
    echo "tests rc $?"; tail -2 "$OUT/tests.log"
    SAN_TOOLS="memcheck racecheck synccheck initcheck" SAN_OPS=dropout SAN_TIMEOUT=200 \
      timeout -k 10 230 bash bench/gpu_harness.sh "$OUT/san" --stages sanitize \
      > "$OUT/san.log" 2>&1
    cat "$OUT/san/summary.md"
    ;;
  w)
    bash bench/ab/pending_sweep.sh "$OUT" float16,bfloat16,float32
    timeout -k 10 200 python3 bench/dropout.py --shapes "$SHAPES" \
      --dtypes float16,bfloat16,float32 --activations none,gelu \
      --providers numba,numba_torch --reps 30 --warmup 5 --no-host-overhead --no-memory \
      --json "$OUT/dropout_interop_sweep.json" > "$OUT/dropout_interop_sweep.log" 2>&1
    echo "interop rc $?"; grep -E "16384x4096 \| float16" "$OUT/dropout_interop_sweep.log"
    ;;
  b)
    for dt in float16 bfloat16; do
      timeout -k 5 150 python3 bench/tune_dropout.py --out "$OUT/b_$dt" --dtype "$dt" \
        --cases "bwd,bwd nobias" --acts none,gelu \
        --configs "shipped,threads=128,shipped,threads=128,shipped,threads=128" \
        > "$OUT/b_$dt.log" 2>&1
      echo "== $dt rc $?"; grep -E "^\| (shipped|threads)" "$OUT/b_$dt/tune_dropout.md" \
        | grep -v p0
      grep -i "registers" "$OUT/b_$dt/tune_dropout.md" | head -2
    done
    ;;
  n)
    # The plain LayerNorm / RMSNorm forward with its n compiled in (tuning
    # fwd_plain_const_n, opt-in): at power-of-two N the two divisions become exact
    # multiplies (same bits; ptxas 13.0 at fp16 N = 1024: no div.rn / FCHK, but 80
    # registers against 64, 25 warps an SM against 32), alone and with bounds for
    # 28 blocks an SM (fwd_plain_min_blocks). fp16 N = 512 / 1024 trail inductor by
    # 1.4-2 us. Two alternating passes. ~4 min.
    TL_DIR="$OUT/tl"; mkdir -p "$TL_DIR"
    . bench/ab/tl.sh
    # LayerNorm 512 / 1024 run 32-thread blocks (bounds for 28 of them: 72 registers,
    # no spills; for 32, 64 registers with 32 bytes of spills);
    # RMSNorm's plain rows here are 512 (128-thread blocks) and 8192 (512 threads).
    tl cn_ln 220 --reps 30 --op ln --ns 512,1024 --dtypes float16 --tunes '{}' \
      '{"fwd_plain_const_n": true}' '{"fwd_plain_const_n": true, "fwd_plain_min_blocks": 28}' \
      '{}' '{"fwd_plain_const_n": true}'
    tl cn_rms 150 --reps 30 --op rms --ns 512,8192 --dtypes float16 --tunes '{}' \
      '{"fwd_plain_const_n": true}' '{}' '{"fwd_plain_const_n": true}'
    tar czf "$OUT/tl.tgz" -C "$TL_DIR" . && rm -rf "$TL_DIR"
    ;;
  *) echo "t, w, b or n" >&2; exit 2 ;;
esac
