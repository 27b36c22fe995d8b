#!/usr/bin/env bash
# Engine benchmark: time per admission request (Pipeline.admit) for 1, 100 and 1000 policies
# where one matches the Pod, then with every policy matching. No cluster needed.
#
#   hack/bench-engine.sh                      # defaults: 1,100,1000 policies, 2000 requests each
#   REQUESTS=500 hack/bench-engine.sh         # quicker
#   hack/bench-engine.sh -o json > bench.json # extra arguments go to `kinitiras-py bench`
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${PYTHON:-python3}" -m kinitiras_py bench \
  --policies "${POLICIES:-1,100,1000}" --requests "${REQUESTS:-2000}" "$@"
