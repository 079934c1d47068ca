# Sourced by the bench/ab GPU scripts (after they set OUT): puts the checkout on
# PYTHONPATH, makes a work folder TL_DIR (unless set) and names the GPU, then gives
#   tl TAG SECONDS ARGS...   bench/tune_layer_norm.py --out "$TL_DIR/TAG" ARGS under a
#                            timeout, its log in "$TL_DIR/TAG.log"; prints its exit
#                            status and its table rows, each once;
#   ab_verify TAG SECONDS K OPS   test_layer_norm.py -k K on the GPU and memcheck /
#                            racecheck on bench/sanitize.py's OPS (gpu_harness.sh),
#                            under SECONDS; prints the summary, then packs every log
#                            in TL_DIR into "$OUT/TAG.tgz" (the device returns few
#                            files).
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
TL_DIR=${TL_DIR:-$(mktemp -d)}
nvidia-smi -L
tl() {
  local tag=$1 t=$2
  shift 2
  timeout -k 5 "$t" python3 bench/tune_layer_norm.py --out "$TL_DIR/$tag" "$@" \
    > "$TL_DIR/$tag.log" 2>&1
  echo "$tag rc $?"
  grep '^| [0-9]' "$TL_DIR/$tag.log" | awk '!seen[$0]++' | head -40
}
ab_verify() {
  local tag=$1 t=$2 k=$3 ops=$4
  TESTS="tests/test_layer_norm.py" SAN_OPS="$ops" SAN_TOOLS="memcheck racecheck" \
    SAN_TIMEOUT=$((t - 100)) timeout -k 10 "$t" bash bench/gpu_harness.sh \
    "$TL_DIR/verify" --stages tests,sanitize --workers 14 -k "$k" --timeout 150 \
    > "$TL_DIR/harness.out" 2>&1
  echo "harness rc $?"
  cat "$TL_DIR/verify/summary.md"
  tar czf "$OUT/$tag.tgz" -C "$TL_DIR" .
}
