# Sourced by the bench/ab GPU scripts: tl TAG SECONDS ARGS... runs
# bench/tune_layer_norm.py --out "$TL_DIR/TAG" ARGS under a timeout, its log in
# "$TL_DIR/TAG.log", and prints its exit status and its table rows, each once.
tl() {
  local tag=$1 t=$2
  shift 2
  timeout -k 5 "$t" python3 bench/tune_layer_norm.py --out "$TL_DIR/$tag" "$@" \
    > "$TL_DIR/$tag.log" 2>&1
  echo "$tag rc $?"
  grep '^| [0-9]' "$TL_DIR/$tag.log" | awk '!seen[$0]++' | head -40
}
