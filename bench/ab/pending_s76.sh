#!/usr/bin/env bash
# Seventy-sixth session.
#   r: (any card, ~5 min) the 16-bit RMSNorm N = 768 backward lead of the seventy-fifth
#      session (H100: two rows a block, bwd_block 192, 144.2-144.9 us against 148-150.8
#      at one, M N = 2^26), A/B/B/A at 192 and 384 threads, fp16 / bf16, at 87381 rows
#      (2^26) and at 8192 / 32768. Predicted: 192 and 384 3-5 us faster at 2^26, about
#      the same share at 32768 rows, even at 8192. LayerNorm 768 beside it at 192
#      (predicted ~9 us slower, as in the seventy-fifth session).
#      (Ran on an H100: 384 threads fp16 143.8 / bf16 143.9-144.2 against 150.2-150.5 at
#      2^26, 21.1-21.4 against 23.9-24.5 at 8192 rows, 60.4-60.7 against 62.8-63.1 at
#      32768; 192 between; LayerNorm 768 at 192 155.4-155.6 against 147.1-147.9. So v66:
#      16-bit RMSNorm rows with w over 96 threads, one group a thread, take 384 threads.)
#   v: (any card, ~4 min) v66 at the launcher's default against v65's (bwd_block 128
#      gives one row a block there) at N = 640 and 704, the checked forms the rule also
#      covers (predicted: faster by a similar share, ~4%), and at 768 again; memcheck /
#      racecheck / initcheck of sanitize.py layer_norm_bwd at float16 and bfloat16 (now
#      also N = 640), predicted 0 errors.
#      (Ran on an H100: the checked forms lost, N = 640 151.2-152.0 at four rows against
#      147.7-148.1 at one, 704 150.1-150.4 against 148.5-149.2, both types; 768 143.6-143.9
#      against 145.4-150.0. So v66 is the exact layout only. Sanitizers 0 / 0 / 0 at both
#      types.)
#   h: (an H200 only; on any other card it stops before any work, ~5 min) what waits for
#      the card issue #16 is measured on: v65's A/B (pending_s75.sh h's first part, which
#      this runs: then v61's float32 RMSNorm A/B with statistics), then v66's A/B at fp16
#      / bf16 RMSNorm 768, A/B/B/A at 2^26 (predicted: faster at 384 threads, as on the
#      H100; if not, v66 becomes H100-only or goes). Then, in a second call, the RMSNorm
#      forward sweep: . bench/ab/norms_sweep_fn.sh; norms_sweep rms_norm rms_fwd fwd 330
#   bash bench/ab/pending_s76.sh "$OUT" r|v|h
set -uo pipefail
OUT=${1:?"usage: pending_s76.sh OUTDIR r|v|h"}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
case "${2:?r|v|h}" in
  r)
    nvidia-smi --query-gpu=name --format=csv,noheader
    for m in 0 8192 32768; do
      mm=(); [ $m = 0 ] || mm=(--m $m)
      timeout -k 10 150 python3 bench/tune_layer_norm.py --out "$OUT/rms768_m$m" --op rms \
        "${mm[@]}" --ns 768 --dtypes float16,bfloat16 --reps 30 --tunes '{}' \
        '{"bwd_block": 192}' '{"bwd_block": 384}' '{"bwd_block": 384}' \
        '{"bwd_block": 192}' '{}' > "$OUT/rms768_m$m.log" 2>&1
      echo "rms768_m$m rc $?"
      grep "^| [0-9]" "$OUT/rms768_m$m/tune_layer_norm.md" | cut -c1-80,120-
    done
    timeout -k 10 120 python3 bench/tune_layer_norm.py --out "$OUT/ln768" --op ln \
      --ns 768 --dtypes float16 --reps 30 --tunes '{}' '{"bwd_block": 192}' \
      '{"bwd_block": 192}' '{}' > "$OUT/ln768.log" 2>&1; echo "ln768 rc $?"
    grep "^| [0-9]" "$OUT/ln768/tune_layer_norm.md" | cut -c1-80,120-
    ;;
  v)
    nvidia-smi --query-gpu=name --format=csv,noheader
    timeout -k 10 200 python3 bench/tune_layer_norm.py --out "$OUT/rms_v66" --op rms \
      --ns 640,704,768 --dtypes float16,bfloat16 --reps 30 --tunes '{}' \
      '{"bwd_block": 128}' '{"bwd_block": 128}' '{}' > "$OUT/rms_v66.log" 2>&1
    echo "rms_v66 rc $?"
    grep "^| [0-9]" "$OUT/rms_v66/tune_layer_norm.md" | cut -c1-80,120-
    for dt in float16 bfloat16; do
      SAN_TOOLS="memcheck racecheck initcheck" SAN_LIMIT=200 \
        bash bench/ab/san_pair.sh "$OUT" layer_norm_bwd:$dt san_bwd_$dt
    done
    ;;
  h)
    card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
    echo "card: $card"
    case "$card" in *H200*) ;; *) echo "not an H200" >&2; exit 3 ;; esac
    # pending_s75.sh h without its last part (the 16-bit RMSNorm 768 lead, now v66).
    P75_SKIP_768=1 bash bench/ab/pending_s75.sh "$OUT" h
    timeout -k 10 120 python3 bench/tune_layer_norm.py --out "$OUT/rms_v66" --op rms \
      --ns 768 --dtypes float16,bfloat16 --reps 30 --tunes '{}' '{"bwd_block": 128}' \
      '{"bwd_block": 128}' '{}' > "$OUT/rms_v66.log" 2>&1; echo "rms_v66 rc $?"
    grep "^| [0-9]" "$OUT/rms_v66/tune_layer_norm.md" | cut -c1-80,120-
    ;;
  *) echo "r, v or h" >&2; exit 2 ;;
esac
