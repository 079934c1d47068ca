#!/usr/bin/env bash
# Sixty-ninth session: v64 (tuning fwd_plain_checked_only) narrowed to 16-bit RMSNorm
# rows no exact layout splits where the lean kernel would run one group a thread, and
# on by default. This session's first calls (H100) had the checked kernel 3.1-9.5 us
# under the lean one at fp16 1152 / 1600 / 3200 and bf16 1152 (lean at one group),
# 0.2-1.0 us over it at fp16 2368 / 4544 and bf16 4544 (lean at two or three groups).
#   v: v64's GPU tests; offgrid_plain.py --checked --compile at widths not timed before:
#      2624 (lean 1 x 352), 1728 (1 x 224), bf16 3200 (1 x 416), predicted ``base``
#      (now v64) 3 us or more under ``no_v64`` / ``lean``; 2880 (4 x 96), 1856 (4 x 64),
#      where v64 leaves the lean kernel, predicted ``base`` within 0.3 us of ``lean``
#      (the forced checked layouts ``cW x R`` show what it leaves); then --stats at fp16
#      1152 / 3200 (the training forward, not timed before at 16-bit RMSNorm), predicted
#      3 us or more under ``lean``. ~5 min.
#   bash bench/ab/pending_s69.sh "$OUT" v
set -uo pipefail
OUT=${1:?"usage: pending_s69.sh OUTDIR v"}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
case "${2:?v}" in
  v)
    timeout -k 10 150 python3 -m pytest -q -p no:cacheprovider -n 8 -m "not ptx" \
      tests/test_layer_norm.py -k "v63 or checked" > "$OUT/tests_v.log" 2>&1
    echo "tests rc $?"; tail -2 "$OUT/tests_v.log"
    timeout -k 10 200 python3 bench/ab/offgrid_plain.py --checked --compile --passes 3 \
      --cells f16-rms-2624,f16-rms-1728,bf16-rms-3200,f16-rms-2880,f16-rms-1856 \
      > "$OUT/offgrid_v64.log" 2>&1
    echo "v64 rc $?"; grep -v kernels "$OUT/offgrid_v64.log"
    timeout -k 10 100 python3 bench/ab/offgrid_plain.py --checked --stats --passes 3 \
      --cells f16-rms-1152,f16-rms-3200 > "$OUT/offgrid_v64_stats.log" 2>&1
    echo "v64 stats rc $?"; grep -v kernels "$OUT/offgrid_v64_stats.log"
    ;;
  *) echo "v" >&2; exit 2 ;;
esac
