#!/usr/bin/env bash
# SASS of Liger-Kernel's LayerNorm backward row kernel beside ours, fp16 8192 x 8192 (the
# sweep's 0.89 cell; bench/notes_layer_norm.md: same geometry and registers, ours runs
# ~16% more instructions). Runs Liger's backward once so triton compiles it, then
# disassembles the cubin from triton's cache; ours comes from the same shipped kernel
# through numba_fused.registry.sass. One short call (carry .whl):
#   bash bench/ab/liger_sass.sh "$OUT"
# Writes $OUT/liger_ln_bwd.sass, $OUT/ours_ln_bwd.sass and prints each row loop's
# instruction mix (bench/ab/sass_mix.py).
set -uo pipefail
OUT=${1:?usage: liger_sass.sh OUTDIR}
. bench/ab/liger_env.sh || exit 1
export TRITON_CACHE_DIR="$OUT/triton_cache"
rm -rf "$TRITON_CACHE_DIR"
timeout -k 5 120 python3 bench/profile_op.py ln_bwd --shape 8192x8192 --provider liger || exit 1
CUBIN=$(grep -rl "_layer_norm_backward_kernel" "$TRITON_CACHE_DIR" --include="*.cubin" | head -1)
NVDISASM=$(command -v nvdisasm || echo /usr/local/cuda/bin/nvdisasm)
"$NVDISASM" "$CUBIN" > "$OUT/liger_ln_bwd.sass" || exit 1
python3 - "$OUT/ours_ln_bwd.sass" <<'PY'
import sys
from numba_fused import layer_norm as ln
from numba_fused.registry import sass
k = ln.make_backward_kernel("float16", False, True, True, True, 2, True, True)
open(sys.argv[1], "w").write(sass(k.ptx()))
PY
python3 bench/ab/sass_mix.py "$OUT/liger_ln_bwd.sass" "$OUT/ours_ln_bwd.sass"
rm -rf "$TRITON_CACHE_DIR"
