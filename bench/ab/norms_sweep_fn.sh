# Sourced by the pending_s*.sh scripts: norms_sweep OP TAG [DIRS] [LIMIT] runs issue #16's
# norms sweep of OP (layer_norm or rms_norm) over its ten shapes, fp16 / bf16 / fp32,
# every provider (Liger from the wheel in .whl where carried), for the passes in DIRS
# (default "fwd bwd"), under LIMIT seconds (default 570); writes $OUT/norms_TAG.json and
# .log and prints the sweep table's summary. Needs OUT set.
norms_sweep() {
  . bench/ab/liger_env.sh || echo "liger wheel not installed"
  nvidia-smi -L
  # DIRS unquoted on purpose: one --dirs argument a pass.
  timeout -k 10 "${4:-570}" python3 bench/layer_norm.py --ops "$1" \
    --dtypes float16 bfloat16 float32 --dirs ${3:-fwd bwd} \
    --providers numba numba_infer numba_torch torch compile liger \
    --shapes 131072x512 87381x768 65536x1024 32768x2048 16384x4096 13107x5120 8192x8192 \
    5461x12288 4096x16384 1024x65536 --reps 30 --warmup 5 --no-memory --no-overhead \
    --json "$OUT/norms_$2.json" > "$OUT/norms_$2.log" 2>&1
  echo "sweep $1 rc $?"
  python3 bench/sweep_table.py norms "$OUT/norms_$2.json" | tail -3
}
