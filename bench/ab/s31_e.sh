#!/usr/bin/env bash
# Thirty-first session, one call: the streaming forward with inductor's cache hints
# (tuning fwd_stream_l2: x's statistics read last out of L2, its output read first
# out) at the float32 forwards still behind inductor, against the default and the
# unhinted streaming kernel, two alternating passes; first its GPU test.
# Predicted: if inductor's 3-5 us lead is its second read from L2, the hinted
# streaming kernel under bounds for 3-4 blocks an SM (32-40 registers, inductor's
# occupancy) reaches ~130 us at LayerNorm N = 4096 (default ~134); the unhinted one
# stays far behind (H100 seventeenth session: 1.6x the row kernel).
#   bash bench/ab/s31_e.sh "$OUT"
set -uo pipefail
OUT=${1:?usage: s31_e.sh OUTDIR}
TL_DIR="$OUT/tl"
mkdir -p "$TL_DIR"
. bench/ab/tl.sh
timeout -k 5 100 python3 -m pytest -q -p no:cacheprovider -n 8 tests/test_layer_norm.py \
  -k "stream_l2" > "$TL_DIR/test.log" 2>&1
echo "test rc $?"; tail -2 "$TL_DIR/test.log"
S='"fwd_stream": true'
tl ln32 110 --reps 30 --op ln --ns 4096,8192 --dtypes float32 --tunes '{}' "{$S}" \
  "{$S, \"fwd_stream_l2\": true}" "{$S, \"fwd_stream_l2\": true, \"fwd_stream_blocks\": 3}" \
  '{}' "{$S, \"fwd_stream_l2\": true}" "{$S, \"fwd_stream_l2\": true, \"fwd_stream_blocks\": 3}"
tl rms32 90 --reps 30 --op rms --ns 2048,12288 --dtypes float32 --tunes '{}' "{$S}" \
  "{$S, \"fwd_stream_l2\": true}" "{$S, \"fwd_stream_l2\": true, \"fwd_stream_blocks\": 4}" \
  '{}' "{$S, \"fwd_stream_l2\": true}" "{$S, \"fwd_stream_l2\": true, \"fwd_stream_blocks\": 4}"
