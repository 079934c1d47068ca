#!/usr/bin/env bash
# Thirteenth session's last GPU call: the dW/dB reduction's dwdb_unroll (4 shipped, 8,
# 16) in the LayerNorm backward's back-to-back kernel timeline (ours only; the
# reduction's own duration), and the GPU tests of the option.
#   bash bench/ab/ab_s13f.sh "$OUT"     (about 3 minutes on an H100)
set -uo pipefail
OUT=${1:?usage: ab_s13f.sh OUTDIR}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
nvidia-smi -L
for u in 4 16 8 4; do
  timeout -k 5 100 python3 bench/ab/ln_timeline.py --out "$OUT/tl" --direction bwd \
    --providers numba --tuning "{\"dwdb_unroll\": $u}" --tag "_u$u" > "$OUT/tl_u$u.log" 2>&1
  echo "timeline u$u rc $?"
  python3 - "$OUT/tl/ln_bwd_timeline_u$u.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["rows"]:
    print(d["tuning"], r["dtype"], r["shape"], r["event_us"], r["plain"].get("per_kernel_us"))
PY
done
timeout -k 5 200 python3 -m pytest -q -p no:cacheprovider -p no:benchmark -n 4 \
  tests/test_layer_norm.py -k "dwdb_unroll or bad" > "$OUT/tests.log" 2>&1
echo "tests rc $?"; tail -3 "$OUT/tests.log"
