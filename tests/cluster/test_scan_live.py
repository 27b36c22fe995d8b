"""The background scan against the real API server: Pods that exist before an Audit policy get
``fail`` within one scan period, a fixed Pod turns ``pass``, a deleted Pod and a deleted policy are
forgotten. The scan runs in-process (policy watch, informers, scanner) with an in-memory sink."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from kinitiras_py.cluster.policywatch import PolicyWatch
from kinitiras_py.cluster.store import InformerStore
from kinitiras_py.engine.policies.compiled import CompiledPolicy
from kinitiras_py.scan.evaluation import Context
from kinitiras_py.scan.metrics import ScanMetrics
from kinitiras_py.scan.scanner import Scanner
from tests.cluster.test_informers import eventually
from tests.conftest import Cluster
from tests.scanfakes import MemorySink

pytestmark = pytest.mark.cluster

PERIOD = 10.0
"""The scan period of the test: every finding must arrive within it."""


def pod(name: str, namespace: str) -> str:
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  automountServiceAccountToken: false
  containers: [{{name: app, image: registry.example/app:1}}]
"""


def policy(name: str, namespace: str) -> str:
    return f"""
apiVersion: policy.kcloudlabs.io/v1alpha1
kind: ClusterValidatePolicy
metadata: {{name: {name}}}
spec:
  resourceSelectors: [{{apiVersion: v1, kind: Pod, namespace: {namespace}}}]
  validateRules:
    - cel: "has(object.metadata.labels) && 'owner' in object.metadata.labels"
      message: every Pod needs an owner label
      validationActions: [Audit]
    - cel: "request.userInfo.username != 'mallory'"
      validationActions: [Audit]
"""


async def create_pod(cluster: Cluster, name: str, namespace: str) -> None:
    """Create a Pod, retrying while the namespace's default ServiceAccount does not exist yet."""
    for _ in range(60):
        proc = await asyncio.to_thread(cluster.kubectl, "apply", "-f", "-", input=pod(name, namespace))
        if proc.returncode == 0:
            return
        await asyncio.sleep(0.5)
    raise AssertionError(proc.stderr)


async def test_audit_findings_of_existing_pods_follow_fixes_and_deletions(
        cluster: Cluster, api: Any, namespace: str) -> None:
    name = f"scan-owner-{uuid.uuid4().hex[:6]}"
    for one in ("bad-a", "bad-b"):
        await create_pod(cluster, one, namespace)
    sink = MemorySink()
    store = InformerStore(api)
    synced = asyncio.Event()
    scanner = Scanner(api, sink, Context(store), store.discovery, period=PERIOD, cpu_share=1.0,
                      metrics=ScanMetrics(CollectorRegistry()), ready=synced)

    async def changed(kind: str, ns: str | None, policy_name: str, compiled: CompiledPolicy | None,
                      _error: str | None) -> None:
        await scanner.on_policy(kind, ns, policy_name, compiled)

    watch = PolicyWatch(api, on_change=changed)
    watch.start()
    try:
        await watch.synced.wait()
        synced.set()
        await scanner.start()
        await cluster.kubectl_ok("apply", "-f", "-", input=policy(name, namespace))

        def result(pod_name: str, rule: int = 0) -> str | None:
            return sink.results_of(pod_name).get((name, rule))

        took = await eventually(lambda: result("bad-a") == "fail" and result("bad-b") == "fail", PERIOD)
        assert took < PERIOD
        assert result("bad-a", 1) == "skip"
        report = next(results for ref, results in sink.reports.values() if ref.name == "bad-a")
        mine = [r for r in report if r.policy.name == name]
        assert mine[0].message == "every Pod needs an owner label" and mine[0].audited
        assert "request.userInfo" in mine[1].message

        await cluster.kubectl_ok("-n", namespace, "label", "pod", "bad-b", "owner=team-b")
        await eventually(lambda: result("bad-b") == "pass", PERIOD)
        assert result("bad-a") == "fail"

        await cluster.kubectl_ok("-n", namespace, "delete", "pod", "bad-b", "--wait=false")
        await eventually(lambda: not sink.results_of("bad-b"), PERIOD)
        assert any(method == "forget_resource" for method, _ in sink.calls)

        await cluster.kubectl_ok("delete", "clustervalidatepolicies.policy.kcloudlabs.io", name)
        await eventually(lambda: ("forget_policy", f"ClusterValidatePolicy {name}") in sink.calls, PERIOD)
        assert result("bad-a") is None
        await eventually(lambda: scanner.passes >= 1, PERIOD)
    finally:
        await scanner.stop()
        await watch.stop()
        await store.close()
        cluster.kubectl("delete", "cvp", name, "--ignore-not-found")
