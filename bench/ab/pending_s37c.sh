#!/usr/bin/env bash
# Written in the thirty-seventh session (an H200), after dropout v11 (8 of 223 SASS
# instructions out of the 16-bit gelu forward's loop) moved nothing:
#   t: the GPU run at the shipped code of what v11 left: test_gelu_across_its_range,
#      the reference-based dropout tests and linear_act's gelu tests (the float64 gelu
#      reference now takes Phi from erfc). ~2 minutes.
#   n: ncu of the fp16 gelu forward (16384 x 4096) with the pipe utilisation, the
#      instruction mix and the per-instruction stall samples (SASS), beside 'none'
#      and gelu_tanh: which pipe or stall sets its 86 us, if not the issue slots. The
#      twenty-ninth session's reading (0.74 issued warps a scheduler, 26% cycles with
#      none eligible, 4.7 eligible on average, L2 73% against DRAM 65%) pointed at
#      issue. ~3 minutes.
#   bash bench/ab/pending_s37c.sh "$OUT" t|n
set -uo pipefail
OUT=${1:?usage: pending_s37c.sh OUTDIR t|n}
PART=${2:?usage: pending_s37c.sh OUTDIR t|n}
case "$PART" in
t)
  timeout -k 5 200 python3 -m pytest -q -p no:cacheprovider -n 14 tests/test_dropout.py \
    tests/test_linear_act.py -m "not ptx" -k "gelu or ref or within_twice or linear_act" \
    --timeout 150 > "$OUT/t_tests.log" 2>&1
  echo "tests rc $?"; tail -3 "$OUT/t_tests.log"; grep -E "^FAILED" "$OUT/t_tests.log" | head -20
  ;;
n)
  NCU=(ncu --nvtx --nvtx-include "prof/" --clock-control none --cache-control none
       --section SpeedOfLight --section ComputeWorkloadAnalysis --section InstructionStats
       --section WarpStateStats --section SchedulerStats --section Occupancy
       --section SourceCounters)
  for act in gelu none gelu_tanh; do
    f="$OUT/ncu37_fwd_$act.txt"
    timeout -k 5 100 "${NCU[@]}" python3 bench/profile_op.py dropout_fwd --shape 16384x4096 \
      --dtype float16 --activation "$act" > "$f" 2>&1
    echo "== ncu fwd $act rc $?"
    grep -E "Duration|Issued Warp|No Eligible|Eligible Warps|Pipe|pipe|Stall|Executed Ipc|Issue Slots|SM Busy" "$f" | head -30
  done
  timeout -k 5 100 "${NCU[@]}" --page source --print-source sass --csv python3 \
    bench/profile_op.py dropout_fwd --shape 16384x4096 --dtype float16 --activation gelu \
    > "$OUT/ncu37_fwd_gelu_sass.csv" 2>&1
  echo "== sass csv rc $?"
  ;;
*) echo "PART must be t or n" >&2; exit 2 ;;
esac
