#!/usr/bin/env bash
# Written in the thirty-seventh session (an H200): dropout v11, the gelu forward's scale
# folded into its exponential (c = P'(0) + log2(1 / (1 - p)); bench/notes_dropout.md).
#   a: A/B of the forward against the tree before it (761aaba's numba_fused from
#      s37_old_pkg.tgz at the checkout's root, untracked: make it with
#      `git archive 761aaba numba_fused | gzip > s37_old_pkg.tgz`), alternating
#      processes, three passes each: bench/dropout.py, numba only, fwd, gelu and 'none'
#      (unchanged: the drift control), fp16 / bf16 / float32 at 16384 x 4096, 4096 x
#      16384 and 65536 x 1024. Prediction: the 16-bit gelu forward 223 -> 215 SASS
#      instructions for 8 elements in an issue-bound loop, 86 -> 83 us at 16384 x 4096
#      (-3.5%); float32 (memory-bound at twice the bytes) within 1 us; 'none' even.
#      ~4 minutes.
#   t: the dropout GPU tests (not the PTX ones) and test_nonfinite.py, then memcheck
#      and racecheck of sanitize.py's dropout workload at float16 and float32. ~4 min.
#   bash bench/ab/pending_s37b.sh "$OUT" a|t
set -uo pipefail
OUT=${1:?usage: pending_s37b.sh OUTDIR a|t}
PART=${2:?usage: pending_s37b.sh OUTDIR a|t}
NEW=$PWD
case "$PART" in
a)
  OLD=/tmp/s37_old && rm -rf "$OLD" && mkdir -p "$OLD" && cp -r "$NEW"/bench "$NEW"/interop "$OLD"/ \
    && tar -xzf "$NEW/s37_old_pkg.tgz" -C "$OLD" || { echo "no old tree"; exit 1; }
  for pass in 1 2 3; do
    for tree in old new; do
      dir=$OLD; [ "$tree" = new ] && dir=$NEW
      (cd "$dir" && PYTHONPATH="$dir" timeout -k 5 150 python3 bench/dropout.py --providers numba \
        --activations gelu,none --directions fwd --dtypes float16,bfloat16,float32 \
        --shapes 16384x4096,4096x16384,65536x1024 --reps 50 --no-host-overhead --no-memory \
        --json "$OUT/a_${tree}_$pass.json" > "$OUT/a_${tree}_$pass.log" 2>&1)
      echo "$tree pass $pass rc $?"
    done
  done
  python3 - "$OUT" <<'PY'
import json, sys, glob, collections
out = sys.argv[1]
t = collections.defaultdict(list)
for f in sorted(glob.glob(f"{out}/a_*_*.json")):
    tree = f.split("/a_")[1].split("_")[0]
    for r in json.load(open(f)):
        if "median_ms" in r:
            t[(r["activation"], r["dtype"], r["shape"] if "shape" in r else f'{r.get("M")}x{r.get("N")}', tree)].append(r["median_ms"] * 1000)
for k in sorted({k[:3] for k in t}):
    print(*k, "old", " ".join(f"{v:.1f}" for v in t[k + ("old",)]),
          "| new", " ".join(f"{v:.1f}" for v in t[k + ("new",)]))
PY
  ;;
t)
  timeout -k 5 300 python3 -m pytest -q -p no:cacheprovider -n 14 tests/test_dropout.py \
    tests/test_nonfinite.py -m "not ptx" --timeout 250 > "$OUT/t_tests.log" 2>&1
  echo "tests rc $?"; tail -3 "$OUT/t_tests.log"; grep -E "^FAILED" "$OUT/t_tests.log" | head -20
  SAN_OPS="dropout:float16 dropout:float32" SAN_TOOLS="memcheck racecheck" SAN_TIMEOUT=200 \
    timeout -k 10 220 bash bench/gpu_harness.sh "$OUT/san" --stages sanitize > "$OUT/san.out" 2>&1
  echo "sanitize rc $?"; cat "$OUT/san/summary.md"
  ;;
*) echo "PART must be a or t" >&2; exit 2 ;;
esac
