#!/usr/bin/env bash
# Where the webhook's time goes at saturation: `bench --floor` with our server under cProfile
# (20 of 1000 policies matching by default), then the functions by own time and by cumulative time.
#   hack/bench-profile.sh               # MATCHING=1 for one matching policy; OUT=dir keeps the .prof
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
OUT="${OUT:-$(mktemp -d)}"
MATCHING="${MATCHING:-20}"
"$PY" -m kinitiras_py bench --floor --total "${TOTAL:-1000}" --matching "$MATCHING" --rounds 1 \
  --seconds "${SECONDS_PER_ROUND:-10}" --profile "$OUT"
"$PY" - "$OUT/ours-$MATCHING-of-${TOTAL:-1000}.prof" <<'PY'
import pstats, sys
stats = pstats.Stats(sys.argv[1])
stats.sort_stats("tottime").print_stats(25)
stats.sort_stats("cumulative").print_stats(40)
PY
