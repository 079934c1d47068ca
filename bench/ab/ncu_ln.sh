# Sourced by the bench/ab ncu scripts (after they set PYTHONPATH, and NCU, the ncu
# command line as an array, themselves or by ncu_norm_setup below):
#   ncu_norm FILE LINES PATTERN PROFILE_OP_ARGS...
# runs "${NCU[@]}" on bench/profile_op.py with those arguments, the report in FILE;
# prints the exit status and the first LINES report lines matching PATTERN.
#   ncu_ln_fwd OUTDIR PREFIX LINES PATTERN CASE...
# ncu_norm on the LayerNorm forward for each CASE ("DTYPE MxN"), ours and
# torch.compile's, each report in OUTDIR/PREFIX_DTYPE_MxN_PROVIDER.txt.
# ncu_norm_setup: NCU and PAT as the norm profiles read them (speed of light,
# occupancy, warp states and stall reasons, launch, scheduler, memory workload).
ncu_norm_setup() {
  NCU=(ncu --clock-control none --cache-control none --section SpeedOfLight
       --section Occupancy --section WarpStateStats --section LaunchStats
       --section SchedulerStats --section MemoryWorkloadAnalysis)
  PAT="^  [a-z_]+.*\(|Duration|DRAM Throughput|Memory Throughput|Registers Per|Block Size"
  PAT="$PAT|Grid Size|Achieved Occupancy|Warp Cycles Per Issued|Issued Warp Per|No Eligible"
  PAT="$PAT|Stall|Waves Per SM"
}
ncu_norm() {
  local f=$1 lines=$2 pat=$3
  shift 3
  timeout -k 5 85 "${NCU[@]}" python3 bench/profile_op.py "$@" > "$f" 2>&1
  echo "== $(basename "$f" .txt) rc $?"
  grep -E "$pat" "$f" | head -"$lines"
}
ncu_ln_fwd() {
  local out=$1 prefix=$2 lines=$3 pat=$4 case dt shape prov
  shift 4
  for case in "$@"; do
    read -r dt shape <<< "$case"
    for prov in numba compile; do
      ncu_norm "$out/${prefix}_${dt}_${shape}_$prov.txt" "$lines" "$pat" ln_fwd \
        --dtype "$dt" --shape "$shape" --provider "$prov"
    done
  done
}
