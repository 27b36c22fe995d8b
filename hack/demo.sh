#!/usr/bin/env bash
# The README's first command: local control plane + webhook + example policies, then a
# Deployment whose requests the webhook oversold on its way into the API server.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"

"$PYTHON" -m kinitiras_py dev status >/dev/null 2>&1 && "$PYTHON" -m kinitiras_py dev down >/dev/null
export_line=$("$PYTHON" -m kinitiras_py dev up)
eval "$export_line"
kc() { kubectl "$@" 2>&1 | grep -v "^Warning: version difference"; }

echo
echo "== policies"
kc apply -f hack/demo/policies.yaml
# A policy applies once the webhook configurations cover its kinds (READY True): wait for that,
# not for a fixed time, which a busy machine may not keep to.
kc wait --for=condition=Ready --timeout=60s -n demo overridepolicy/oversell
kc wait --for=condition=Ready --timeout=60s clustervalidatepolicy/protect-namespaces
kc get kinitiras -A
echo
echo "== the Deployment as written (limits only):"
grep -A1 "limits:" hack/demo/deployment.yaml | grep -v -- "--"
kc apply -f hack/demo/deployment.yaml
echo
echo "== the Deployment as stored: requests = limits x factor (cpu 0.5, memory 0.25)"
kubectl get deployment web -n demo -o jsonpath='{range .spec.template.spec.containers[*]}  {.name}: requests={.resources.requests} limits={.resources.limits}{"\n"}{end}'
kubectl get deployment web -n demo -o jsonpath='  labels={.metadata.labels}{"\n"}'
echo
echo "== a protected namespace cannot be deleted:"
kc label namespace demo protected=yes --overwrite
kc delete namespace demo --wait=false || true
echo
echo "$export_line"
echo "# run that line to use kubectl here; \`make demo-down\` stops everything"
