#!/usr/bin/env bash
# Thirty-eighth session, H200: where v13's staged backward spends the 8-12 us its bias
# grad costs (pending_s38b.sh: 'none' 72.4-73 without, 81-85 with at any fill; 78 with
# the reduction kernel; shipped pays 2-3).
#   a: torch.profiler trace of the back-to-back loop (dropout_bwd_trace.py), shipped and
#      stages=3: is the kernel itself 10 us longer, or the gaps around it? (First run:
#      the kernel, 82.2 us against 70.0 without the bias grad; ncu alone read 72.3.)
#      Second run: the staged kernel with the shuffle tile (40 registers, 6 blocks an
#      SM), per-thread fences, the reduction kernel, and each call after a 512 MB read
#      (an L2 of clean lines, not the predecessor's dirty grad_x). Prediction: the clean
#      L2 brings the staged kernel with its bias grad to ~73 us (its ncu time).
#   n: ncu (warp states, source counters) of the staged fp16 'none' backward with and
#      without the bias grad, one launch each, and the SASS stall table of the first.
#      Prediction: alone the two differ by the epilogue's few us at most (as shipped,
#      73.06 with and without under ncu), the stalls at the fence / counter atomic.
#   bash bench/ab/pending_s38c.sh "$OUT" a|n
set -uo pipefail
OUT=${1:?usage: pending_s38c.sh OUTDIR a|n}
PART=${2:?usage: pending_s38c.sh OUTDIR a|n}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
case "$PART" in
a)
  # name|stages|config JSON|clean
  for v in "shipped|||" "st3|3||" "st3_shuffle|3|{\"tile_reduce\": \"shuffle\"}|" \
           "st3_fence_thread|3|{\"fence\": \"thread\"}|" \
           "st3_reduce_kernel|3|{\"bias_reduce\": \"kernel\"}|" \
           "shipped_clean|||1" "st3_clean|3||1"; do
    IFS='|' read -r name st cfg clean <<< "$v"
    DROPOUT_STAGES=$st DROPOUT_CFG=$cfg DROPOUT_CLEAN=$clean timeout -k 5 100 \
      python3 bench/ab/dropout_bwd_trace.py > "$OUT/trace_$name.txt" 2>&1
    echo "== trace $name rc $?"; grep events "$OUT/trace_$name.txt"
    python3 - "$OUT/trace_$name.txt" <<'PY'
import collections, statistics, sys
by = collections.defaultdict(list)
for line in open(sys.argv[1]):
    if " us  gap " in line:
        f = line.split()
        by[f[4]].append(float(f[0]))
# Each kernel runs 25 times a loop (5 warm-up, 20 timed) in the loops that use it.
for name, d in by.items():
    meds = [statistics.median(d[k + 5:k + 25]) for k in range(0, len(d), 25)]
    print(f"  {name[-48:]}: {len(d)} launches, timed medians " + ", ".join(f"{m:.1f}" for m in meds))
PY
  done
  ;;
n)
  NCU=(ncu --nvtx --nvtx-include "prof/" --clock-control none --cache-control none
       --section SpeedOfLight --section WarpStateStats --section SchedulerStats
       --section Occupancy --section LaunchStats)
  for nb in "" "--no-bias-grad"; do
    f="$OUT/ncu38_bwd_st3$nb.txt"
    timeout -k 5 100 "${NCU[@]}" python3 bench/profile_op.py dropout_bwd --shape 16384x4096 \
      --dtype float16 --activation none --config '{"stages": 3}' $nb > "$f" 2>&1
    echo "== ncu bwd stages=3 $nb rc $?"
    grep -E "Duration|DRAM Throughput|Issued Warp|No Eligible|Grid Size|Registers|Achieved Occ|Stall" "$f" | head -20
  done
  timeout -k 5 120 "${NCU[@]}" --section SourceCounters --page source --print-source sass --csv \
    python3 bench/profile_op.py dropout_bwd --shape 16384x4096 --dtype float16 \
    --activation none --config '{"stages": 3}' > "$OUT/ncu38_bwd_st3_sass.csv" 2>&1
  echo "== sass csv rc $?"
  python3 - "$OUT/ncu38_bwd_st3_sass.csv" <<'PY'
import csv, sys
lines = open(sys.argv[1]).read().splitlines()
start = next((i for i, l in enumerate(lines) if l.startswith('"#"') or l.startswith('"Address"')), None)
if start is None:
    print("no csv table"); sys.exit()
rows = list(csv.DictReader(lines[start:]))
key = next((k for k in rows[0] if "Warp Stall Sampling (All" in k), None)
src = next((k for k in rows[0] if k == "Source"), None)
tot = sum(float(r[key] or 0) for r in rows)
print(f"{len(rows)} SASS lines, {tot:.0f} stall samples")
top = sorted(rows, key=lambda r: -float(r[key] or 0))[:25]
for r in top:
    print(f"{float(r[key] or 0):7.0f} {100 * float(r[key] or 0) / tot:5.1f}%  {r.get('#', r.get('Address', ''))}  {r[src][:70]}")
PY
  ;;
*) echo "PART must be a or n" >&2; exit 2 ;;
esac
