#!/usr/bin/env bash
# The benchmarks of docs/performance.md, each measured against its floor in the same run:
#   1. the engine in process: 10, 1000 and 10000 policies with one matching (is the cost flat?),
#      and 20 matching;
#   2. the webhook on one core at saturation beside the floor (bench --floor: 1 and 20 of 1000
#      policies matching, 3 interleaved rounds; again with the CEL result cache off);
#   3. Pod CREATEs through a local kube-apiserver (bench --e2e: no webhook, the floor, ours with
#      1 and 20 of 1000 matching, side by side at concurrency 1 and 10, on the replicas' Pod and on
#      Pods all unlike each other beside the hand-written webhook and a slow JavaScript neighbour;
#      medians of 5 rounds, each ratio to its round's peer, targets marked; again with ours'
#      memories off).
# About 15 minutes on a 2-core machine. Smaller: REQUESTS=200 ROUNDS=1 RUNS=1 PODS=100.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
echo "== 1. engine (Pipeline.admit in process)"
"$PY" -m kinitiras_py bench --policies 10,1000,10000 --requests "${REQUESTS:-1000}" --all-match 20
echo
echo "== 2. webhook on one core, beside the floor"
"$PY" -m kinitiras_py bench --floor --uncached --rounds "${ROUNDS:-3}"
echo
echo "== 3. Pod CREATEs through the API server"
"$PY" -m kinitiras_py bench --e2e --uncached --runs "${RUNS:-5}" --pods "${PODS:-500}"
