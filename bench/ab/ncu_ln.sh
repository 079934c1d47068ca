# Sourced by the bench/ab ncu scripts (after they set NCU, the ncu command line as an
# array, and PYTHONPATH):
#   ncu_ln_fwd OUTDIR PREFIX LINES PATTERN CASE...
# runs "${NCU[@]}" on bench/profile_op.py's LayerNorm forward for each CASE ("DTYPE
# MxN"), ours and torch.compile's, each report in OUTDIR/PREFIX_DTYPE_MxN_PROVIDER.txt;
# prints each run's exit status and the first LINES report lines matching PATTERN.
ncu_ln_fwd() {
  local out=$1 prefix=$2 lines=$3 pat=$4 case dt shape prov f
  shift 4
  for case in "$@"; do
    read -r dt shape <<< "$case"
    for prov in numba compile; do
      f="$out/${prefix}_${dt}_${shape}_$prov.txt"
      timeout -k 5 85 "${NCU[@]}" python3 bench/profile_op.py ln_fwd --dtype "$dt" \
        --shape "$shape" --provider "$prov" > "$f" 2>&1
      echo "== $dt $shape $prov rc $?"
      grep -E "$pat" "$f" | head -"$lines"
    done
  done
}
