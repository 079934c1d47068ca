#!/usr/bin/env bash
# Sixty-eighth session: checks after v62's rows (_PLAIN_STATS_BLOCK) and v63 (tuning
# fwd_plain_checked, now on by default) shipped, on the launcher's own picks:
#   r: the plain kernel's GPU tests; stats_block.py at v62's rows (``ship`` now the
#      table's layout with _sb, ``ship_row`` the row-by-row store of before; predicted:
#      ship within 0.3 us of the p*_sb time the table came from, 1.1-2.2 us under
#      ship_row); offgrid_plain.py --checked --compile at four v63 cells (``base`` now
#      the checked kernel: within 0.5 us of ``chk``, 3-83 us under ``lean``), and 16-bit
#      RMSNorm 1152 / 4544, which has no off-grid rule (``chk_only``: v64's candidate,
#      tuning fwd_plain_checked_only; the forced checked layouts: is 1600's 5 us under
#      the lean kernel general? if chk_only holds 3 us or more under ``lean`` at both,
#      default it True). ~8 min.
#   f: issue #16's norms sweep, forward only, LayerNorm then RMSNorm (norms_sweep_fn.sh),
#      for RESULTS at v62's rows. ~9 min; one op a call: f ln / f rms.
#   t: r cut to fit a short budget (~5 min): its tests, stats_block.py at four of v62's
#      rows, offgrid_plain.py --checked (no compile) at fp16 LayerNorm 1152 and 16-bit
#      RMSNorm 1152 / 4544 (v64).
#   bash bench/ab/pending_s68.sh "$OUT" {r|t|f OP}
set -uo pipefail
OUT=${1:?"usage: pending_s68.sh OUTDIR r|t|f OP"}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
# v62's rows (_PLAIN_STATS_BLOCK) and float32 LayerNorm 1024, which the table leaves out.
SB_CELLS=f32-ln-512,f32-rms-512,f32-ln-768,f16-ln-512,f16-rms-512,f16-ln-768,f16-ln-1024,bf16-ln-512,f32-ln-1024
case "${2:?r, t or f}" in
  r)
    timeout -k 10 150 python3 -m pytest -q -p no:cacheprovider -n 8 -m "not ptx" \
      tests/test_layer_norm.py \
      -k "v62 or v63 or checked or stats_block or plain_kernel_matches or knob_bits" \
      > "$OUT/tests_r.log" 2>&1
    echo "tests rc $?"; tail -2 "$OUT/tests_r.log"
    timeout -k 10 160 python3 bench/ab/stats_block.py --passes 3 --cells "$SB_CELLS" \
      > "$OUT/stats_block_r.log" 2>&1
    echo "stats_block rc $?"; grep -v kernels "$OUT/stats_block_r.log"
    timeout -k 10 130 python3 bench/ab/offgrid_plain.py --checked --compile --passes 3 \
      --cells f16-ln-1152,f16-ln-6656,f32-ln-1600,f32-rms-1600,f16-rms-1152,f16-rms-4544 \
      > "$OUT/offgrid_checked_r.log" 2>&1
    echo "checked rc $?"; grep -v kernels "$OUT/offgrid_checked_r.log"
    ;;
  t)
    timeout -k 10 120 python3 -m pytest -q -p no:cacheprovider -n 8 -m "not ptx" \
      tests/test_layer_norm.py \
      -k "v62 or v63 or checked or stats_block or plain_kernel_matches or knob_bits" \
      > "$OUT/tests_t.log" 2>&1
    echo "tests rc $?"; tail -2 "$OUT/tests_t.log"
    timeout -k 10 100 python3 bench/ab/stats_block.py --passes 3 \
      --cells f32-ln-512,f32-rms-512,f16-ln-512,f16-ln-1024 > "$OUT/stats_block_t.log" 2>&1
    echo "stats_block rc $?"; grep -v kernels "$OUT/stats_block_t.log"
    timeout -k 10 90 python3 bench/ab/offgrid_plain.py --checked --passes 3 \
      --cells f16-ln-1152,f16-rms-1152,f16-rms-4544 > "$OUT/offgrid_checked_t.log" 2>&1
    echo "checked rc $?"; grep -v kernels "$OUT/offgrid_checked_t.log"
    ;;
  f)
    . bench/ab/norms_sweep_fn.sh
    case "${3:?ln or rms}" in
      ln) norms_sweep layer_norm fwd_ln fwd 285 ;;
      rms) norms_sweep rms_norm fwd_rms fwd 285 ;;
      *) echo "ln or rms" >&2; exit 2 ;;
    esac
    ;;
  *) echo "r, t or f" >&2; exit 2 ;;
esac
