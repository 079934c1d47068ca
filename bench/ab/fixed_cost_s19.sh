#!/usr/bin/env bash
# Nineteenth session: is the forward's gap to inductor (1-3 us in every sweep cell
# below N = 65536, at 16-bit and float32 alike) a fixed cost per call or a share of
# the bytes? The LayerNorm forward, ours against torch.compile, at N = 8192 and 1024
# from 64 rows (one wave, ~0.1-1 MB) to the sweep's 2^26 elements. A fixed cost keeps
# the gap near 2 us at every M; a share shrinks it with M. (About 2 minutes.)
#   bash bench/ab/fixed_cost_s19.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: fixed_cost_s19.sh OUTDIR}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
nvidia-smi -L
timeout -k 10 400 python3 bench/layer_norm.py --ops layer_norm --dirs fwd \
  --dtypes float16 float32 --providers numba compile \
  --shapes 64x8192 256x8192 1024x8192 8192x8192 512x1024 2048x1024 8192x1024 65536x1024 \
  --reps 100 --warmup 10 --no-memory --no-overhead --json "$OUT/fixed_cost_s19.json" \
  > "$OUT/fixed_cost_s19.log" 2>&1
echo "rc $?"
python3 - "$OUT/fixed_cost_s19.json" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
rows = rows["results"] if isinstance(rows, dict) else rows
t = {(r["dtype"], r["M"], r["N"], r["provider"]): r["median_ms"] * 1e3 for r in rows if "median_ms" in r}
for (dt, m, n, p), v in sorted(t.items()):
    if p == "numba" and (dt, m, n, "compile") in t:
        c = t[(dt, m, n, "compile")]
        print(f"{dt} {m}x{n}: ours {v:.2f} us, compile {c:.2f} us, gap {v - c:+.2f}")
PY
