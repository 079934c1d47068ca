#!/usr/bin/env bash
# Written in the fifty-ninth session (an H200; bench/NOTES.md, fifty-ninth session).
#   a: bench/ab/infer_picks.py: the plain forward's layouts at the 19 norms forwards
#      behind in the fifty-eighth session's sweep, with and without the statistics,
#      three alternating passes. ~5 min. (Every cell: the later calls' cells too, since added.)
#   e: the same for w / b early where the registers leave two or more blocks an SM
#      (the cells named *e in infer_picks.py). ~3 min.
#   t: v50's GPU checks (16-bit and float32 LayerNorm N = 8192 at eight words, w / b
#      early): the plain-kernel and stats tests, memcheck / racecheck / initcheck of
#      sanitize.py's layer_norm_plain; then infer_picks.py's RMSNorm cells (*r). ~5 min.
#   c: v51's candidate, an occupancy cap by unused dynamic shared memory
#      (fwd_plain_max_blocks): its GPU tests, then infer_picks.py's cells *c. ~4 min.
#      Refuted and removed after the run: needs commit 39b8d80.
#   v: owed to the next session (v51, stats kept at float32 RMSNorm 2048 / 4096 and
#      LayerNorm 2048): its GPU tests, then the float32 norms forwards across N (every
#      provider but numba_torch), one run. ~4 min. Then full_suite.sh part 5 alone.
#   L / R: issue #16's norms sweep for LayerNorm (L) / RMSNorm (R) in one call each,
#      forward and backward, every provider the tables hold: numba (array level),
#      numba_infer (stats=False, forward only), numba_torch (interop.torch), torch
#      eager, torch.compile, Liger (carry .whl). Two calls on one warm machine give
#      RESULTS.md's norms tables and plots from one run. ~5 min each.
#   bash bench/ab/pending_s59.sh "$OUT" {a|e|t|c|v|L|R}
set -uo pipefail
OUT=${1:?"usage: pending_s59.sh OUTDIR a|e|t|c|v|L|R"}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
. bench/ab/norms_sweep_fn.sh
case "${2:?a, e, t, c, v, L or R}" in
  a)
    timeout -k 10 560 python3 bench/ab/infer_picks.py > "$OUT/picks.log" 2>&1
    echo "picks rc $?"
    grep -E "FAIL|error|median" "$OUT/picks.log"
    ;;
  e)
    timeout -k 10 560 python3 bench/ab/infer_picks.py --suffix e > "$OUT/picks_e.log" 2>&1
    echo "picks rc $?"
    grep -E "FAIL|error|median" "$OUT/picks_e.log"
    ;;
  t)
    timeout -k 5 300 python3 -m pytest -q -p no:cacheprovider -n 8 tests/test_layer_norm.py \
      -k "plain_v50 or forward_plain_kernel or without_stats or early_same_bits or infer_custom" \
      > "$OUT/tests.log" 2>&1
    echo "tests rc $?"; tail -3 "$OUT/tests.log"
    SAN_TOOLS="memcheck racecheck initcheck" SAN_LIMIT=200 \
      bash bench/ab/san_pair.sh "$OUT" layer_norm_plain san
    # After the sanitizers, so that nothing else runs on the GPU while it times.
    timeout -k 10 250 python3 bench/ab/infer_picks.py --suffix r > "$OUT/picks_r.log" 2>&1
    echo "picks rc $?"
    grep -E "FAIL|error|median" "$OUT/picks_r.log"
    ;;
  c)
    timeout -k 5 200 python3 -m pytest -q -p no:cacheprovider -n 4 tests/test_layer_norm.py \
      tests/test_helpers.py -k "plain_max_blocks or cap_shared" > "$OUT/tests_c.log" 2>&1
    echo "tests rc $?"; tail -3 "$OUT/tests_c.log"
    timeout -k 10 300 python3 bench/ab/infer_picks.py --suffix c > "$OUT/picks_c.log" 2>&1
    echo "picks rc $?"
    grep -E "FAIL|error|median" "$OUT/picks_c.log"
    ;;
  v)
    timeout -k 5 200 python3 -m pytest -q -p no:cacheprovider -n 8 tests/test_layer_norm.py \
      -k "v51 or plain_v50 or without_stats" > "$OUT/tests_v.log" 2>&1
    echo "tests rc $?"; tail -3 "$OUT/tests_v.log"
    . bench/ab/liger_env.sh || echo "liger wheel not installed"
    timeout -k 10 330 python3 bench/layer_norm.py --ops layer_norm rms_norm --dtypes float32 \
      --dirs fwd --providers numba numba_infer torch compile liger \
      --shapes 131072x512 87381x768 65536x1024 32768x2048 16384x4096 13107x5120 8192x8192 \
      5461x12288 4096x16384 1024x65536 --reps 30 --warmup 5 --no-memory --no-overhead \
      --json "$OUT/norms_f32_fwd_v51.json" > "$OUT/norms_f32_fwd_v51.log" 2>&1
    echo "sweep rc $?"
    python3 bench/sweep_table.py norms "$OUT/norms_f32_fwd_v51.json" | tail -5
    ;;
  L) norms_sweep layer_norm ln_s59 ;;
  R) norms_sweep rms_norm rms_s59 ;;
  *) echo "a, e, t, c, v, L or R" >&2; exit 2 ;;
esac
