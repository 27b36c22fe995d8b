"""`kinitiras-py serve` scans existing objects: a Pod created before an Audit policy gets its
finding (logged by the default sink until the PolicyReport writer is wired in), the scan's metrics
are exported, and a fixed Pod's result turns pass."""

from __future__ import annotations

import json
import ssl
import urllib.request
import uuid

import pytest

from tests.cluster.test_scan_live import pod, policy
from tests.conftest import Cluster
from tests.e2e.conftest import Webhook, apply_policy, kubectl_ok, wait_for

pytestmark = pytest.mark.cluster


def findings(webhook: Webhook, pod: str) -> list[list[str]]:
    """The findings of every ``scan results for Pod <pod>`` line the webhook logged, in order."""
    out = []
    for line in webhook.log_text().splitlines():
        if line.startswith("{") and f"scan results for Pod {pod}" in line:
            out.append(json.loads(line).get("findings", []))
    return out


def test_serve_scans_pods_that_exist_before_an_audit_policy(cluster: Cluster, webhook: Webhook,
                                                             namespace: str) -> None:
    name = f"scan-{uuid.uuid4().hex[:6]}"
    assert wait_for(lambda: cluster.kubectl("apply", "-f", "-", input=pod("lonely", namespace)).returncode == 0, 30)
    try:
        apply_policy(cluster, policy(name, namespace), "cvp", name, 2)
        expected = f"ClusterValidatePolicy {name} rule 0: fail: every Pod needs an owner label"
        assert wait_for(lambda: any(expected in one for one in findings(webhook, f"{namespace}/lonely")), 30), \
            webhook.log_text()[-3000:]
        context = ssl.create_default_context(cafile=str(webhook.ca))
        with urllib.request.urlopen(f"https://127.0.0.1:{webhook.port}/metrics", context=context) as answer:
            metrics = answer.read().decode()
        assert "kinitiras_scan_leading 1.0" in metrics
        assert 'kinitiras_scan_results{result="fail"}' in metrics

        kubectl_ok(cluster, "-n", namespace, "label", "pod", "lonely", "owner=me")
        assert wait_for(lambda: (seen := findings(webhook, f"{namespace}/lonely")) and seen[-1] == [], 30)
    finally:
        cluster.kubectl("delete", "cvp", name, "--ignore-not-found")
