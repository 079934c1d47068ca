#!/usr/bin/env bash
# Written in the twenty-first session for the next: why does 16-bit LayerNorm at two
# groups a thread and 48 registers gain 1-2 us in one-row blocks (v24) and nothing in
# blocks of several rows, while RMSNorm's same rows (v21) lose 0.5-1 us in one-row
# blocks? ncu (clocks and caches free, back to back as the benchmark meets them) of the
# fp16 forward at 32768 x 2048, each a separate report:
#   ln_v24: LayerNorm, the default (128 x 1 threads, 10 blocks an SM);
#   ln_rows2: LayerNorm, two groups in blocks of two rows at the same cap
#             (fwd_lean_tpsm 1280, v24 off: fwd_lean_regs None, fwd_words 2);
#   rms_v21: RMSNorm, the default (128 x 2, 5 blocks an SM);
#   rms_rows1: RMSNorm in one-row blocks at the same cap (v21 off, fwd_block 1: a
#              capped layout keeps its own rows a block whatever fwd_block says);
#   inductor: torch.compile's LayerNorm forward.
# Prints each kernel's duration, occupancy, issue rate and warp stall reasons (the
# barrier stall is the one to read). About 3 minutes.
#   bash bench/ab/pending_s22.sh "$OUT"
# Ran once at the end of the twenty-first session without the per-reason metrics
# (results/ln_fwd_ncu_h100_s21/: durations 88.6 / 90.9 / 87.1 / 87.5 / 100.8 us, the
# sections' text gives only the long-scoreboard share); the --metrics line below
# asks for each stall reason per issued instruction (names as ncu's WarpStateStats
# section uses them; not yet run).
set -uo pipefail
OUT=${1:?usage: pending_s22.sh OUTDIR}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
NCU=(ncu --nvtx --nvtx-include "prof/" --clock-control none --cache-control none
     --section SpeedOfLight --section Occupancy --section WarpStateStats
     --section LaunchStats --section SchedulerStats
     --metrics smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio)
PAT="^  [a-z_]+.*\(|Duration|Registers Per|Block Size|Grid Size|Achieved Occupancy|Warp Cycles Per Issued|Issued Warp Per|No Eligible|Stall|Barrier|stalled"
nvidia-smi -L
. bench/ab/ncu_ln.sh
run() {
  ncu_norm "$OUT/ncu22_$1.txt" 30 "$PAT" "$2" --dtype float16 --shape 32768x2048 \
    --provider "$3" --tuning "$4"
}
run ln_v24 ln_fwd numba '{}'
run ln_rows2 ln_fwd numba '{"fwd_lean_regs": null, "fwd_words": 2, "fwd_lean_tpsm": 1280}'
run rms_v21 rms_fwd numba '{}'
run rms_rows1 rms_fwd numba \
  '{"fwd_lean_regs": null, "fwd_words": 2, "fwd_block": 1, "fwd_lean_tpsm": 1280}'
run inductor ln_fwd compile '{}'
