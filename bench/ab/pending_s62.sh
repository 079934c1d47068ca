#!/usr/bin/env bash
# Written in the sixty-first session for the next (bench/NOTES.md, sixty-first
# session, "The mimic"): is the float32 norms' gap to torch.compile in how the binary
# is assembled (driver JIT of sm_90 PTX against Triton's offline sm_90a ptxas)?
#   m: bench/ab/cubin_ab.py -- the mimic kernel loaded four ways through CuPy (driver
#      JIT, toolkit ptxas sm_90 / sm_90a, Triton's ptxas sm_90a), the numba dispatcher,
#      ours and torch.compile, five alternating passes, each cubin also with the
#      shared-memory carveout at 7 %; cuobjdump -sass of each cubin
#      and of inductor's kernel into $OUT/cubin. ~2 min.
#   s: memcheck / racecheck / initcheck of bench/sanitize.py layer_norm_plain_knobs (the
#      plain kernel's opt-in variants _rl, _rlw, _kn, _tree), one dtype a process, all
#      three dtypes side by side; logs $OUT/san_<dtype>_<tool>.log. ~3-5 min.
#   v: v56 (the plain forward kernels of <= 4 words over rows of >= 8 KB prefer 16 KB
#      of shared memory an SM): its GPU tests and the new knobs', ncu's shared-memory
#      configuration of float32 RMSNorm 16384 x 4096's kernel (16 KB, was 8), then
#      issue #16's RMSNorm sweep (pending_s59.sh R; carry .whl). ~8 min.
#   L: ncu's shared-memory configuration of float32 RMSNorm 16384 x 4096's plain kernel
#      at each carveout preference (bench/ab/carveout_cfg.py), then the LayerNorm sweep
#      (pending_s59.sh L). ~6 min.
#   f: v56 as shipped (carveout 5 for LayerNorm, 7 for RMSNorm): its GPU tests, then
#      both ops' forward sweeps alone (pending_s59.sh's providers and shapes; carry
#      .whl). ~5 min.
#   bash bench/ab/pending_s62.sh "$OUT" {m|s|v|L|f}
set -uo pipefail
OUT=${1:?"usage: pending_s62.sh OUTDIR m"}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
case "${2:?m, s, v, L or f}" in
  m)
    mkdir -p "$OUT/cubin"
    timeout -k 10 300 python3 bench/ab/cubin_ab.py --out "$OUT/cubin" > "$OUT/cubin_ab.log" 2>&1
    echo "cubin_ab rc $?"; grep -E "^\||ptxas" "$OUT/cubin_ab.log"; ls "$OUT/cubin"
    ;;
  s)
    for dt in float32 float16 bfloat16; do
      SAN_TOOLS="memcheck racecheck initcheck" SAN_LIMIT=${SAN_LIMIT:-400} \
        bash bench/ab/san_pair.sh "$OUT" "layer_norm_plain_knobs:$dt" "san_$dt" \
        > "$OUT/san_$dt.summary" 2>&1 &
    done
    wait
    for dt in float32 float16 bfloat16; do echo "$dt"; cat "$OUT/san_$dt.summary"; done
    ;;
  v)
    timeout -k 5 200 python3 -m pytest -q -p no:cacheprovider -n 8 tests/test_layer_norm.py \
      tests/test_helpers.py tests/test_tensor_core.py \
      -k "smem_kib or plain_hints or prefer_shared or evict_policies or fit_carveout or plain_knob_bits or resident_blocks or forward_plain_kernel" \
      > "$OUT/tests_v56.log" 2>&1
    echo "tests rc $?"; tail -3 "$OUT/tests_v56.log"
    timeout -k 5 120 ncu --nvtx --nvtx-include "prof/" --clock-control none \
      --section LaunchStats --section Occupancy python3 bench/profile_op.py rms_fwd \
      --dtype float32 --shape 16384x4096 --provider numba > "$OUT/ncu_smem_cfg.txt" 2>&1
    echo "ncu rc $?"
    grep -E "Shared Memory Configuration Size|Registers Per|Achieved Occupancy|Block Limit Shared" \
      "$OUT/ncu_smem_cfg.txt"
    bash bench/ab/pending_s59.sh "$OUT" R
    ;;
  L)
    timeout -k 5 120 ncu --section LaunchStats -k regex:norm_fwd python3 \
      bench/ab/carveout_cfg.py > "$OUT/ncu_carveout_cfg.txt" 2>&1
    echo "ncu rc $?"
    grep -E "Shared Memory Configuration Size|launch with" "$OUT/ncu_carveout_cfg.txt"
    bash bench/ab/pending_s59.sh "$OUT" L
    ;;
  f)
    timeout -k 5 150 python3 -m pytest -q -p no:cacheprovider -n 8 tests/test_layer_norm.py \
      tests/test_helpers.py -k "carveout or prefer or resident_blocks" \
      > "$OUT/tests_f.log" 2>&1
    echo "tests rc $?"; tail -2 "$OUT/tests_f.log"
    . bench/ab/norms_sweep_fn.sh
    for op in layer_norm rms_norm; do norms_sweep "$op" "fwd_$op" fwd 240; done
    ;;
  *) echo "m | s | v | L | f" >&2; exit 2 ;;
esac
