#!/usr/bin/env bash
# For the eighty-sixth session (bench/NOTES.md, "Next (eighty-sixth session)"); no
# device came then, so the eighty-seventh's.
#   a: (any Hopper card, ~8 min; TRAIN_S=0 skips the training steps) pending_s85b.sh a:
#      v7 / v7b / v9's A/B (epi_cost.py, epi 0 1 2 3, 3 rounds), the epi variants' GPU
#      tests (epi3 / epi3_hb included), the CuPy TMA plan test, the training step at
#      epi 0 / 1 / 2. If v7 holds (every activation at "none"'s time), flip WG_ROLE's
#      fwd, fwd_long_k and dgrad tilings to the best epi and run b.
#   b: (any Hopper card, ~9 min) after the flip: the suites the defaults run through
#      (test_wgmma, test_gated_linear, test_linear_act, test_torch_frontend,
#      test_fast_path, test_plan, test_no_sync, test_cupy_fast), then memcheck of the
#      wgmma kernels (sanitize.py linear_act_wgmma, its default tilings).
#   g: (any Hopper card, ~4 min) the training-step gap (5.55 ms against torch's 4.77,
#      eighty-fourth session, while torch.profiler's kernel sums were close): each GEMM
#      of the step timed on its own with events (bench/ab/step_gemms.py), ours against
#      torch's, at the shipped epi and at epi 2 / 3. Predicted: the pieces sum to
#      within 3% of each step; the loss sits in the pair dgrad / wgrad pieces (v4's
#      tilings were tuned on the forward).
#   bash bench/ab/pending_s86.sh "$OUT" a|b|g
set -uo pipefail
OUT=${1:?"usage: pending_s86.sh OUTDIR a|b"}
export OUT PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
echo "card: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
case "${2:?a|b}" in
  a)
    EPI_ARGS="--rounds 3" bash bench/ab/pending_s85b.sh "$OUT" a 2>&1 | grep -v "^round"
    ;;
  b)
    timeout -k 5 420 python3 -m pytest -q -p no:cacheprovider -n 8 tests/test_wgmma.py \
      tests/test_gated_linear.py tests/test_linear_act.py tests/test_torch_frontend.py \
      tests/test_fast_path.py tests/test_plan.py tests/test_no_sync.py \
      tests/test_cupy_fast.py > "$OUT/suites.log" 2>&1
    echo "suites rc $?"; tail -3 "$OUT/suites.log"
    timeout -k 5 120 compute-sanitizer --tool memcheck --report-api-errors no \
      --error-exitcode 3 python3 bench/sanitize.py linear_act_wgmma:bfloat16 \
      > "$OUT/memcheck_wgmma.log" 2>&1
    echo "memcheck wgmma rc $?"; tail -2 "$OUT/memcheck_wgmma.log"
    ;;
  g)
    for epi in "" 2 3; do
      timeout -k 5 ${STEP_S:-150} python3 bench/ab/step_gemms.py ${epi:+--epi $epi} \
        --json "$OUT/step_gemms${epi}.json" > "$OUT/step_gemms${epi}.log" 2>&1
      echo "step_gemms epi '${epi}' rc $?"; grep -v -i warn "$OUT/step_gemms${epi}.log"
    done
    ;;
  *) echo "a, b or g" >&2; exit 2 ;;
esac
