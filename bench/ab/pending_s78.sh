#!/usr/bin/env bash
# Seventy-eighth session.
#   l: (any card, ~9 min) the CuPy plans of linear_act_dgrad / linear_weight_grad /
#      activation_backward (tests/test_cupy_fast.py + its CPU logic test), then every
#      other test that goes through interop.cupy (-k cupy), which the second review's
#      mend (interop.dlpack.cupy_empty) has not yet met on a GPU.
#   g: (any card, ~9 min) the gated MLP's plans (interop.torch.gated_mlp, interop.cupy's
#      gated functions) and the bias-alignment key of interop.torch.linear_act's forward
#      plan: bias_align_probe.py (the old plan on a misaligned bias), then the plan
#      tests, test_gated_linear.py, the no-sync test, then bench/launch_cost.py
#      (predicted: gated_mlp no-grad within ~1.5x of interop.torch.linear_act's call
#      plus the interleave's copy; the CuPy gated rows 4-7x under their array level);
#      then bench/gated_linear.py at decode-sized M (1-2048 tokens, Llama-7B's MLP):
#      what the forward's interleave of the gate and up weights costs where the GEMMs
#      are small (numba_torch interleaves every call, numba_fused is handed the
#      interleaved weight).
#   q: (any card, ~6 min) the gated forward reading its weights in place (pair kernel):
#      its tests, the 16-row tilings', the torch front end's (test_fast_path,
#      test_no_sync), compute-sanitizer memcheck of the linear_act case (fp16, now with
#      the pair forward), bench/gated_linear.py at M = 16 (numba_torch no-grad
#      predicted ~0.32 ms against call g's 0.44).
#   m: (any card, ~4 min) q's essentials: the pair / tiling / gated-plan tests, memcheck of
#      sanitize.py gated_pair (fp16, bf16), the gated bench at M = 16.
#   s: (any card, ~4 min) skinny_ab.py: tilings for a few rows against cuBLAS; the
#      gated forward in place / copied in the call / copied before (predicted: in
#      place ~= copied before, ~0.12 ms under the copy at M = 16).
#   bash bench/ab/pending_s78.sh "$OUT" l|g|m|q|s
set -uo pipefail
OUT=${1:?"usage: pending_s78.sh OUTDIR l|g|m|q|s"}
export OUT PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "card: $card"
case "${2:?l|g|m|q|s}" in
  l)
    timeout -k 10 200 python3 -m pytest -q -p no:cacheprovider tests/test_cupy_fast.py \
      tests/test_cupy_fast_logic.py > "$OUT/cupy_fast.log" 2>&1
    echo "cupy_fast rc $?"; tail -8 "$OUT/cupy_fast.log"
    timeout -k 10 330 python3 -m pytest -q -p no:cacheprovider -n 4 -k cupy tests/test_interop.py \
      tests/test_layer_norm.py tests/test_dropout.py tests/test_attention.py \
      tests/test_linear_act.py tests/test_gated_linear.py tests/test_multi_gpu.py \
      tests/test_bench_examples.py > "$OUT/cupy_ops.log" 2>&1
    echo "cupy_ops rc $?"; tail -8 "$OUT/cupy_ops.log"
    ;;
  g)
    timeout -k 10 60 python3 bench/ab/bias_align_probe.py > "$OUT/bias_probe.log" 2>&1
    echo "bias probe rc $?"; cat "$OUT/bias_probe.log"
    timeout -k 10 330 python3 -m pytest -q -p no:cacheprovider -n 4 tests/test_fast_path.py \
      tests/test_cupy_fast.py tests/test_cupy_fast_logic.py tests/test_gated_linear.py \
      tests/test_no_sync.py > "$OUT/tests_g.log" 2>&1
    echo "tests rc $?"; tail -8 "$OUT/tests_g.log"
    timeout -k 10 190 python3 bench/launch_cost.py --calls 2000 --json "$OUT/launch_cost.json" \
      > "$OUT/launch_cost.log" 2>&1
    echo "launch_cost rc $?"; cat "$OUT/launch_cost.log"
    timeout -k 10 150 python3 bench/gated_linear.py --shapes 1x4096x11008 16x4096x11008 \
      256x4096x11008 2048x4096x11008 --dtypes bfloat16 --providers numba_torch numba_fused torch \
      --reps 20 --json "$OUT/gated_decode.json" > "$OUT/gated_decode.log" 2>&1
    echo "gated bench rc $?"; cat "$OUT/gated_decode.log"
    ;;
  q)
    timeout -k 10 130 python3 -m pytest -q -p no:cacheprovider -n 6 tests/test_gated_linear.py \
      tests/test_linear_act.py -k "pair or other_tilings or torch_fused_gated" \
      > "$OUT/tests_p.log" 2>&1
    echo "tests rc $?"; tail -2 "$OUT/tests_p.log"
    timeout -k 10 100 python3 -m pytest -q -p no:cacheprovider -n 6 tests/test_fast_path.py \
      tests/test_no_sync.py > "$OUT/tests_p2.log" 2>&1
    echo "tests rc $?"; tail -2 "$OUT/tests_p2.log"
    timeout -k 10 90 compute-sanitizer --tool memcheck --error-exitcode 3 python3 bench/sanitize.py \
      linear_act:float16 > "$OUT/memcheck_p.log" 2>&1
    echo "memcheck rc $?"; tail -4 "$OUT/memcheck_p.log"
    timeout -k 10 60 python3 bench/gated_linear.py --shapes 16x4096x11008 --dtypes bfloat16 \
      --providers numba_torch torch --reps 20 --json "$OUT/gated_decode_p.json" \
      > "$OUT/gated_decode_p.log" 2>&1
    echo "gated bench rc $?"; grep "| fwd |" "$OUT/gated_decode_p.log"
    ;;
  s)
    timeout -k 10 280 python3 bench/ab/skinny_ab.py --ms 1 16 64 --reps 20 \
      > "$OUT/skinny_ab.log" 2>&1
    echo "skinny rc $?"; grep -v -i warn "$OUT/skinny_ab.log"
    ;;
  m)
    timeout -k 10 120 python3 -m pytest -q -p no:cacheprovider -n 8 tests/test_gated_linear.py \
      tests/test_linear_act.py tests/test_fast_path.py \
      -k "pair or other_tilings or torch_fused_gated or gated_mlp_plans" > "$OUT/tests_m.log" 2>&1
    echo "tests rc $?"; tail -2 "$OUT/tests_m.log"
    timeout -k 10 60 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 3 \
      python3 bench/sanitize.py gated_pair:float16 gated_pair:bfloat16 > "$OUT/memcheck_m.log" 2>&1
    echo "memcheck rc $?"; tail -3 "$OUT/memcheck_m.log"
    timeout -k 10 50 python3 bench/gated_linear.py --shapes 16x4096x11008 --dtypes bfloat16 \
      --providers numba_torch torch --reps 20 > "$OUT/gated_decode_m.log" 2>&1
    echo "gated bench rc $?"; grep "| fwd |" "$OUT/gated_decode_m.log"
    ;;
  *) echo "l, g, m, q or s" >&2; exit 2 ;;
esac
